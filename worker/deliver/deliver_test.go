package deliver

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsink"
	"github.com/sftpgate/sftpgate/internal/egress"
	"github.com/sftpgate/sftpgate/internal/tenants"
)

func event(id string) cloudevents.Event {
	e := cloudevents.NewEvent()
	e.SetID(id)
	e.SetType("dev.sftpgate.file.created")
	e.SetSource("/apis/sftpgate.dev/v1alpha1/namespaces/team/sftpconnections/box")
	e.SetSubject("/incoming/a.csv")
	_ = e.SetData(cloudevents.ApplicationJSON, []byte(`{"path":"/incoming/a.csv","size":3}`))
	return e
}

func TestSend(t *testing.T) {
	r := testsink.Start(t)
	s, err := New(egress.Policy{}, tenants.Kinds{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	signing, err := ParseSigning("whsec_" + base64.StdEncoding.EncodeToString([]byte("a secret of twenty-four bytes or more")))
	if err != nil {
		t.Fatal(err)
	}
	var out Outcome
	testkit.EventuallyFound(t, "the event is delivered", func() (bool, string) {
		out = s.Send(ctx, "default", r.URL, event("id-1"), 5*time.Second, signing)
		return out.Delivered, fmt.Sprintf("%+v", out)
	})
	if !out.Delivered || out.Status != 200 {
		t.Fatalf("%+v", out)
	}
	requests := r.Requests()
	got := requests[len(requests)-1]
	if got.Event.ID() != "id-1" || got.Header.Get("Ce-Id") != "id-1" || got.Header.Get("Content-Type") != "application/json" {
		t.Errorf("not binary mode, or not the event: %v %v", got.Event, got.Header)
	}
	mac := hmac.New(sha256.New, signing)
	mac.Write([]byte("id-1." + got.Header.Get("webhook-timestamp") + "." + `{"path":"/incoming/a.csv","size":3}`))
	if got.Header.Get("webhook-id") != "id-1" || got.Header.Get("webhook-signature") != "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)) {
		t.Errorf("the Standard Webhooks signature does not verify: %v", got.Header)
	}

	for status, retry := range map[int]bool{500: true, 503: true, 429: true, 408: true, 400: false, 404: false} {
		r.SetAnswer(status)
		if out := s.Send(ctx, "default", r.URL, event("id-2"), 5*time.Second, nil); out.Delivered || out.Retry != retry || out.Status != status {
			t.Errorf("answered %d: %+v, want retry %v", status, out, retry)
		}
	}
	// A sink nobody listens at may come back; one the policy refuses may
	// not.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	gone := "http://" + l.Addr().String()
	_ = l.Close()
	if out := s.Send(ctx, "default", gone, event("id-3"), time.Second, nil); !out.Retry || out.Denied {
		t.Errorf("a sink that is down: %+v", out)
	}
	policy, _ := egress.ParsePolicy("loopback")
	strict, _ := New(policy, tenants.Kinds{})
	if out := strict.Send(ctx, "default", r.URL, event("id-4"), time.Second, nil); !out.Denied || out.Retry || !strings.Contains(out.Err.Error(), "loopback") {
		t.Errorf("a sink the policy refuses: %+v", out)
	}
}

func TestBackoffAndDurations(t *testing.T) {
	for _, tc := range []struct {
		policy   v1alpha1.BackoffPolicy
		attempts int32
		want     time.Duration
	}{
		{v1alpha1.BackoffExponential, 1, time.Second}, {v1alpha1.BackoffExponential, 4, 8 * time.Second},
		{v1alpha1.BackoffLinear, 4, 4 * time.Second}, {v1alpha1.BackoffExponential, 40, maxBackoff}, {v1alpha1.BackoffLinear, 0, 0},
	} {
		if got := Backoff(tc.policy, time.Second, tc.attempts); got != tc.want {
			t.Errorf("%s after %d: %v, want %v", tc.policy, tc.attempts, got, tc.want)
		}
	}
	for s, want := range map[string]time.Duration{"PT1S": time.Second, "PT0.2S": 200 * time.Millisecond, "PT1H2M3S": time.Hour + 2*time.Minute + 3*time.Second, "PT10M": 10 * time.Minute} {
		if got, err := ParseDuration(s); err != nil || got != want {
			t.Errorf("%s: %v %v", s, got, err)
		}
	}
	for _, bad := range []string{"1s", "PT", "PT1X", "P1D"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("%s parses", bad)
		}
	}
	if _, err := ParseSigning("whsec_c2hvcnQ="); err == nil {
		t.Error("a short secret is taken")
	}
}
