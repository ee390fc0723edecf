// Package deliver sends CloudEvents 1.0 over HTTP, in binary mode, with
// the CloudEvents Go SDK, to sinks a tenant chose: every dial goes through
// the worker's dial policy (no metadata address, no link-local, loopback
// and private ranges only where allowed), each try is bounded in time, and
// an event may be signed as Standard Webhooks asks, for receivers that are
// plain webhooks. Try is the one policy of tries, backoff and dead-letter
// sink for every event the worker sends.
package deliver

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/egress"
	"github.com/sftpgate/sftpgate/internal/tenants"
	"github.com/sftpgate/sftpgate/internal/tracing"
)

// Sender sends events.
type Sender struct {
	// client sends the operator's namespaces' events, accounts those of
	// web UI accounts: connections of one are never reused by the other,
	// which would reach an address its policy refuses without a dial.
	client, accounts cloudevents.Client
	tenants          tenants.Kinds
	// Outcomes, when set, counts events by Verdict, and failed tries as
	// "failed".
	Outcomes *prometheus.CounterVec
}

// New returns a sender whose dials follow policy, for web UI accounts (as
// tenants says which namespaces are theirs) policy.ForAccounts.
func New(policy egress.Policy, tenants tenants.Kinds) (*Sender, error) {
	c, err := newClient(policy)
	if err != nil {
		return nil, err
	}
	accounts, err := newClient(policy.ForAccounts())
	if err != nil {
		return nil, err
	}
	return &Sender{client: c, accounts: accounts, tenants: tenants}, nil
}

// newClient is a CloudEvents client of its own connections, dialled
// within policy.
func newClient(policy egress.Policy) (cloudevents.Client, error) {
	dialer := &net.Dialer{Timeout: 10 * time.Second, ControlContext: policy.Control}
	transport := &http.Transport{
		DialContext: dialer.DialContext, ForceAttemptHTTP2: true,
		MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: 10 * time.Second,
		ResponseHeaderTimeout: time.Minute,
	}
	// Redirects are not followed: a sink that redirects could send the
	// event (and its signature) where the dial policy would not have.
	httpClient := http.Client{Transport: headerSafe{transport},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	protocol, err := cehttp.New(cehttp.WithClient(httpClient))
	if err != nil {
		return nil, err
	}
	return cloudevents.NewClient(protocol, cloudevents.WithTimeNow())
}

// headerSafe percent-encodes the bytes HTTP cannot carry in a header
// (control bytes, which a file's name in an event's subject may hold) in
// the ce- headers the CloudEvents SDK writes as they are, as the HTTP
// binding asks of binary mode (3.1.3.2); else such an event could never
// be sent. A value HTTP carries is sent unchanged.
type headerSafe struct{ http.RoundTripper }

func (t headerSafe) RoundTrip(r *http.Request) (*http.Response, error) {
	sent := r
	for name, values := range r.Header {
		if !strings.HasPrefix(name, "Ce-") || !slices.ContainsFunc(values, hasControl) {
			continue
		}
		if sent == r {
			sent = r.Clone(r.Context()) // a RoundTripper leaves its request as it was
		}
		encoded := make([]string, len(values))
		for i, v := range values {
			encoded[i] = encodeControls(v)
		}
		sent.Header[name] = encoded
	}
	return t.RoundTripper.RoundTrip(sent)
}

func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(c rune) bool { return c < 0x20 || c == 0x7f })
}

// encodeControls is s with its control bytes as %XX.
func encodeControls(s string) string {
	var b strings.Builder
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c == 0x7f {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Outcome is what one try of a delivery came to.
type Outcome struct {
	// Delivered: the sink answered 2xx.
	Delivered bool
	// Retry says a failed try may be tried again: the sink could not be
	// reached, timed out, or answered 408, 429 or 5xx. Other answers (a
	// 4xx) will not change by trying again.
	Retry bool
	// Denied says the dial policy refused the sink's address: no try will
	// reach it until the sink or the policy changes.
	Denied bool
	// Status is the sink's HTTP status, 0 when it did not answer.
	Status int
	Err    error
}

// Signing is a Standard Webhooks secret: "whsec_" and base64.
type Signing []byte

// ParseSigning reads a Standard Webhooks secret.
func ParseSigning(secret string) (Signing, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(strings.TrimSpace(secret), "whsec_"))
	if err != nil || len(raw) < 24 {
		return nil, errors.New(`the signing secret must be "whsec_" and the base64 of at least 24 random bytes`)
	}
	return raw, nil
}

// Sign returns the Standard Webhooks headers for a message of id, sent at
// t, whose body is body.
func (s Signing) Sign(id string, t time.Time, body []byte) http.Header {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, s)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", ts)
	h.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	return h
}

// Send tries once to deliver e, an event of namespace's, to target,
// within timeout, signed with signing when it is set.
func (s *Sender) Send(ctx context.Context, namespace, target string, e cloudevents.Event, timeout time.Duration, signing Signing) (out Outcome) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Each try is a span, and the event carries its context (CloudEvents'
	// distributed tracing extension), for the consumer to go on from.
	ctx, span := tracing.Tracer().Start(ctx, "deliver "+e.Type(), trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("cloudevents.event_id", e.ID()), attribute.String("cloudevents.event_type", e.Type())))
	defer func() {
		if !out.Delivered {
			// The sink's status alone: its URL may hold a token.
			span.SetStatus(codes.Error, fmt.Sprintf("not delivered (status %d)", out.Status))
		}
		span.End()
	}()
	if span.SpanContext().IsValid() {
		carrier := propagation.MapCarrier{}
		tracing.Propagator.Inject(ctx, carrier)
		for k, v := range carrier {
			e.SetExtension(k, v)
		}
	}
	client := s.client
	if s.tenants.IsAccount(ctx, namespace) {
		client = s.accounts
	}
	ctx = cloudevents.ContextWithTarget(ctx, target)
	if signing != nil {
		ctx = cehttp.WithCustomHeader(ctx, signing.Sign(e.ID(), time.Now(), e.Data()))
	}
	result := client.Send(ctx, e)
	var httpResult *cehttp.Result
	status := 0
	if cloudevents.ResultAs(result, &httpResult) {
		status = httpResult.StatusCode
	}
	var denied *egress.DeniedError
	switch {
	case cloudevents.IsACK(result) && (status == 0 || status/100 == 2):
		return Outcome{Delivered: true, Status: status}
	case errors.As(result, &denied):
		return Outcome{Denied: true, Err: denied}
	case status == 0:
		return Outcome{Retry: true, Err: fmt.Errorf("the sink did not answer: %w", result)}
	case status == http.StatusRequestTimeout, status == http.StatusTooManyRequests, status >= 500:
		return Outcome{Retry: true, Status: status, Err: fmt.Errorf("the sink answered %d", status)}
	}
	return Outcome{Status: status, Err: fmt.Errorf("the sink refused the event: %d", status)}
}

// maxBackoff bounds the wait between two tries, however many failed.
const maxBackoff = 10 * time.Minute

// MaxTimeout bounds one try: a sink that never answers holds its watch's
// deliveries this long at most.
const MaxTimeout = time.Minute

// Backoff is how long to wait before the try after attempts failed ones:
// linear, delay times attempts; exponential, delay times 2 to
// attempts-1; never more than maxBackoff.
func Backoff(policy v1alpha1.BackoffPolicy, delay time.Duration, attempts int32) time.Duration {
	if attempts < 1 {
		return 0
	}
	f := float64(attempts)
	if policy != v1alpha1.BackoffLinear {
		f = math.Pow(2, float64(attempts-1))
	}
	return time.Duration(min(float64(delay)*f, float64(maxBackoff)))
}

// ParseDuration reads an ISO 8601 duration of hours, minutes and seconds
// (PT1H2M3.5S), as Knative's delivery spec writes them.
func ParseDuration(s string) (time.Duration, error) {
	rest, ok := strings.CutPrefix(s, "PT")
	if !ok || rest == "" {
		return 0, fmt.Errorf("%q is not an ISO 8601 duration such as PT1S", s)
	}
	var d time.Duration
	for _, unit := range []struct {
		suffix string
		of     time.Duration
	}{{"H", time.Hour}, {"M", time.Minute}, {"S", time.Second}} {
		i := strings.Index(rest, unit.suffix)
		if i < 0 {
			continue
		}
		n, err := strconv.ParseFloat(rest[:i], 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%q is not an ISO 8601 duration such as PT1S", s)
		}
		d += time.Duration(n * float64(unit.of))
		rest = rest[i+1:]
	}
	if rest != "" {
		return 0, fmt.Errorf("%q is not an ISO 8601 duration such as PT1S", s)
	}
	return d, nil
}
