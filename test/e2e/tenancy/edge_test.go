package tenancy

import (
	"context"
	"encoding/base64"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsink"
	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/auditstore"
	"github.com/sftpgate/sftpgate/internal/httpedge"
	"github.com/sftpgate/sftpgate/test/framework"
)

// TestUploadProxyDropsMethodOverride: the file browser's uploads reach
// the gateway with the method the UI checked. Were X-HTTP-Method-Override
// passed on, the gateway would refuse the creation (400) or tusd would
// take it for a PATCH of no upload.
func TestUploadProxyDropsMethodOverride(t *testing.T) {
	t.Parallel()
	tn := newTenant(t, "override")
	var status int
	var body string
	testkit.Eventually(t, "an upload created through the UI with X-HTTP-Method-Override", func() bool {
		req, err := http.NewRequest(http.MethodPost, tn.ui.Base+"/connections/"+tn.uiConn+"/uploads/", nil)
		must(t, err)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.Header.Set("Tus-Resumable", "1.0.0")
		req.Header.Set("Upload-Length", "1")
		req.Header.Set("Upload-Metadata", "path "+base64.StdEncoding.EncodeToString([]byte("/overridden")))
		req.Header.Set("X-HTTP-Method-Override", http.MethodPatch)
		status, body = tn.ui.Do(t, req)
		// Until the file browser's key reaches the gateway: 401, 503.
		return status != http.StatusUnauthorized && status != http.StatusServiceUnavailable
	})
	if status != http.StatusCreated {
		t.Errorf("the creation: %d %.300s, want 201", status, body)
	}
}

// hostileRequestIDs are what an attacker sends as X-Request-Id: 56 kB of
// 0x80 (under the servers' header bound, httpedge.MaxHeaderBytes, so that
// the handlers meet it), 180 kB of them (over it: the servers answer 431
// before any handler runs), bytes that are not UTF-8, control bytes
// (which Go's server refuses with 400), and a formula.
var hostileRequestIDs = []string{strings.Repeat("\x80", httpedge.MaxHeaderBytes-8<<10), strings.Repeat("\x80", 180_000),
	"\x80\xfe\xff", "id\x01\x1b[2J", `=HYPERLINK("http://evil/")`}

// refusedID is the status of the answer to a request with id before any
// handler runs (0: none; a handler answers).
func refusedID(id string) int {
	switch {
	case len(id) > httpedge.MaxHeaderBytes:
		return http.StatusRequestHeaderFieldsTooLarge
	case strings.ContainsAny(id, "\x01"):
		return http.StatusBadRequest
	}
	return 0
}

// sendHostileIDs sends each of hostileRequestIDs with send, which says
// the answer's status: want, or the refusal of one no handler meets.
func sendHostileIDs(t *testing.T, want int, send func(id string) int) {
	t.Helper()
	for _, id := range hostileRequestIDs {
		w := want
		if refused := refusedID(id); refused != 0 {
			w = refused
		}
		if status := send(id); status != w {
			t.Errorf("with X-Request-Id %.20q: %d, want %d", id, status, w)
		}
	}
}

// serverMadeID is a request id the UI or the gateway made.
var serverMadeID = regexp.MustCompile(`^[A-Za-z0-9.-]+/[A-Za-z0-9]{10}-[0-9]{6,}$`)

// trailHolds checks tn's audit trail after hostile request ids: its
// records of the attack (attacked) are stored with ids the servers made;
// a later write of its own (named after later) is stored and read back
// with every record of its namespace, none of them holding an attacker's
// id or changed; and its AuditSink still gets what comes, a whole chain.
func trailHolds(t *testing.T, tn *tenant, sink *testsink.Sink, later string, attacked func(audit.Record) bool) {
	t.Helper()
	tn.writes(t, later)
	isLater := func(r audit.Record) bool {
		return r.Action == "gateway.write" && slices.ContainsFunc(r.Paths, func(p string) bool { return strings.HasSuffix(p, "-"+later) })
	}
	met := 0 // the ids a handler met, each in a record of the attack
	for _, id := range hostileRequestIDs {
		if refusedID(id) == 0 {
			met++
		}
	}
	var stored []audit.Record
	testkit.Eventually(t, tn.ns+"'s records of the attack and after it, stored", func() bool {
		stored = storedRecords(t, tn.ns)
		n := 0
		for _, r := range stored {
			if attacked(r) {
				n++
			}
		}
		return n >= met && slices.ContainsFunc(stored, isLater)
	})
	for _, r := range stored {
		if slices.Contains(hostileRequestIDs, r.RequestID) || !utf8.ValidString(r.RequestID) {
			t.Errorf("a record holds the attacker's request id: %s %.40q", r.Action, r.RequestID)
		}
		if (attacked(r) || isLater(r)) && !serverMadeID.MatchString(r.RequestID) {
			t.Errorf("%s: request id %.40q is not one a server made", r.Action, r.RequestID)
		}
	}
	for _, rep := range audit.Verify(stored) {
		if len(rep.Broken) > 0 {
			t.Errorf("%s's stored chain %s: records changed: %v", tn.ns, rep.Replica, rep.Broken)
		}
	}
	testkit.Eventually(t, tn.ns+"'s sink gets the later record", func() bool { return slices.ContainsFunc(sink.AuditRecords(t), isLater) })
	for _, rep := range audit.Verify(sink.AuditRecords(t)) {
		if !rep.Whole() {
			t.Errorf("%s's sink: chain %+v", tn.ns, rep)
		}
	}
}

// storedRecords are namespace's audit records as stored, every segment
// read back whole.
func storedRecords(t *testing.T, namespace string) []audit.Record {
	t.Helper()
	ctx := context.Background()
	store := &auditstore.Store{Client: k8s, Namespace: framework.Namespace}
	segments, err := store.List(ctx, namespace)
	must(t, err)
	var out []audit.Record
	for _, seg := range segments {
		records, lost, err := store.Read(ctx, seg)
		if apierrors.IsNotFound(err) {
			continue // delivered and removed meanwhile
		}
		must(t, err)
		if len(lost) > 0 {
			t.Errorf("segment %s of %s: records lost reading it: %+v", seg.Name, namespace, lost)
		}
		out = append(out, records...)
	}
	return out
}
