package tenant

import (
	"testing"
	"time"

	"github.com/sftpgate/sftpgate/internal/audit"
)

// TestTrailRows: the UI's own gateway calls fold into the action of the
// same request, and each row reads as a sentence; another key's call of
// that id, or an id a client chose, folds into nothing.
func TestTrailRows(t *testing.T) {
	t.Parallel()
	now := time.Now()
	person := audit.Actor{Kind: audit.ActorAccount, Name: "ana@example.com"}
	records := []audit.Record{ // newest first
		{Action: "webui.file.delete", Actor: person, RequestID: "host/abc-000002", Connection: "reports", Paths: []string{"/q3.csv"}, Result: audit.ResultOK, Time: now},
		{Action: "gateway.unlink", Actor: audit.Actor{Kind: audit.ActorKey, Name: "6bn46dls"}, RequestID: "ui:abc-000002", Connection: "reports", Paths: []string{"/q3.csv"}, Result: audit.ResultOK, Time: now.Add(-time.Millisecond)},
		{Action: "gateway.write", Actor: audit.Actor{Kind: audit.ActorKey, Name: "ci4f9a2b"}, RequestID: "ui:abc-000002", Connection: "reports", Paths: []string{"/in/a.csv"}, Result: audit.ResultOK, Time: now.Add(-time.Second)},
		{Action: "webui.login", Actor: person, RequestID: "job-1", Result: "invalid_credentials", Time: now.Add(-time.Minute)},
		{Action: "gateway.read", Actor: audit.Actor{Kind: audit.ActorKey, Name: "6bn46dls"}, RequestID: "job-1", Connection: "reports", Paths: []string{"/b"}, Result: "not_found", Time: now.Add(-2 * time.Minute)},
	}
	rows := trailRows(records, map[string]bool{"6bn46dls": true})
	want := []struct{ action, sentence, outcome string }{
		{"webui.file.delete", "ana@example.com deleted /q3.csv on reports", "Done"},
		{"gateway.write", "API key ci4f9a2b wrote /in/a.csv on reports", "Done"},
		{"webui.login", "ana@example.com logged in", "Failed: invalid credentials"},
		{"gateway.read", "API key 6bn46dls read /b on reports", "Not found"},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(rows), len(want), rows)
	}
	for i, w := range want {
		if got := rows[i].Who + " " + rows[i].Did; rows[i].Action != w.action || got != w.sentence || rows[i].Outcome != w.outcome {
			t.Errorf("row %d: %s %q %q, want %s %q %q", i, rows[i].Action, got, rows[i].Outcome, w.action, w.sentence, w.outcome)
		}
	}
	if rows[0].Calls != 1 || rows[1].Calls != 0 {
		t.Errorf("calls folded: %d, %d; want 1, 0", rows[0].Calls, rows[1].Calls)
	}
}
