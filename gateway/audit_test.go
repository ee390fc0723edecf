package gateway_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sftpgate/sftpgate/gateway"
	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/fixtures/testhttp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/egress"
)

// TestAuditRecords: every request that reached a tenant's connection is
// an audit record in the gateway's log (the operator's view): who, from
// where, which paths, how it ended; the records of one namespace chain
// whole, and carry no secret or content.
func TestAuditRecords(t *testing.T) {
	f := newFixture(t)
	var log testkit.Log
	gw, err := gateway.New(restConfig, gateway.Options{Networks: egress.Networks{DeniedNetworks: testcluster.LoopbackNetworks},
		Log:    slog.New(slog.NewJSONHandler(&log, nil)),
		Limits: gateway.Limits{MaxBodyBytes: maxBody, MaxUploadBytes: maxUpload, RequestTimeout: 30 * time.Second}})
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	must(t, gw.Start(ctx))
	srv := httptest.NewServer(gw.Handler())
	defer srv.Close()
	base := srv.URL + "/" + f.slug + "/"
	eventually(t, "the replica serves the connection", func() bool {
		status, _ := testhttp.PostJSON(t, base+"exists", f.token, `{"path": "/"}`)
		return status == http.StatusOK
	})
	for _, call := range []struct{ command, body string }{
		{"write", `{"path": "audited.txt", "file": {"text": "the secret content"}}`},
		{"read", `{"path": "missing.txt"}`},
		{"rename", `{"from": "audited.txt", "to": "moved.txt"}`},
	} {
		testhttp.PostJSON(t, base+call.command, f.token, call.body)
	}
	testhttp.PostJSON(t, base+"write", "not-a-key", `{"path": "x"}`) // no tenant's: no record

	logged := log.String()
	records := audit.FromLog(logged, "")
	reports := audit.Verify(records)
	if len(reports) != 1 || !reports[0].Whole() || reports[0].Namespace != f.ns {
		t.Fatalf("chains: %+v", reports)
	}
	want := map[string]struct {
		paths  []string
		result string
	}{
		"gateway.write":  {[]string{"audited.txt"}, "ok"},
		"gateway.read":   {[]string{"missing.txt"}, "not_found"},
		"gateway.rename": {[]string{"audited.txt", "moved.txt"}, "ok"},
	}
	seen := 0
	for _, r := range records {
		w, ok := want[r.Action]
		if !ok {
			continue
		}
		seen++
		if strings.Join(r.Paths, ",") != strings.Join(w.paths, ",") || r.Result != w.result || r.Actor.Kind != audit.ActorKey ||
			r.Actor.Name == "" || r.Client != "127.0.0.1" || r.RequestID == "" || r.Connection == "" {
			t.Errorf("%s: %+v", r.Action, r)
		}
	}
	if seen != 3 {
		t.Errorf("%d of the 3 commands recorded: %+v", seen, records)
	}
	for _, secret := range []string{f.token, "the secret content"} {
		if strings.Contains(logged, secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
}
