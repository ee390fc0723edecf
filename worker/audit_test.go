package worker_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsink"
	"github.com/sftpgate/sftpgate/internal/audit"
)

// workerLog keeps what the tests' worker logs, besides standard error.
var workerLog logCopy

type logCopy struct{ testkit.Log }

// tee is log, its lines copied here too.
func (l *logCopy) tee(log *slog.Logger) *slog.Logger {
	return slog.New(teeHandler{log.Handler(), slog.NewJSONHandler(l, nil)})
}

// records are the audit records logged for namespace.
func (l *logCopy) records(namespace string) []audit.Record {
	return audit.FromLog(l.String(), namespace)
}

type teeHandler struct{ a, b slog.Handler }

func (t teeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return t.a.Enabled(ctx, l) || t.b.Enabled(ctx, l)
}

func (t teeHandler) Handle(ctx context.Context, r slog.Record) error {
	_ = t.b.Handle(ctx, r.Clone())
	return t.a.Handle(ctx, r)
}

func (t teeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return teeHandler{t.a.WithAttrs(as), t.b.WithAttrs(as)}
}

func (t teeHandler) WithGroup(g string) slog.Handler {
	return teeHandler{t.a.WithGroup(g), t.b.WithGroup(g)}
}

// TestAuditOfWorkerActions: what the worker does to a tenant's files, a
// transfer's copy (Move: the source removed) and a watch's move after
// delivery, is an audit record of the namespace's chain, whole, naming
// the Transfer or watch that acted, and the SHA-256 a verification computed.
func TestAuditOfWorkerActions(t *testing.T) {
	t.Parallel()
	src, dst := inProcessServer(testsftp.Start(t)), inProcessServer(testsftp.Start(t))
	ns := transferNamespace(t, map[string]server{"src": src, "dst": dst})
	startWorker(t)
	src.file(t, "out/report.csv", []byte("figures"))
	tr := transfer(t, ns, "moved", "/out/report.csv", func(s *v1alpha1.TransferSpec) {
		s.Mode, s.Verify = v1alpha1.TransferMove, v1alpha1.VerifySHA256
	})
	if got := finished(t, tr); readyReason(got) != "True/Succeeded" {
		t.Fatalf("%s %+v", readyReason(got), got.Status)
	}
	src.file(t, "inbox/.keep", nil)
	w := &v1alpha1.SftpWatch{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "inbox"}, Spec: v1alpha1.SftpWatchSpec{
		ConnectionRef: v1alpha1.ConnectionReference{Name: "src"}, Path: "/inbox", Include: []string{"*.csv"},
		PollInterval: &metav1.Duration{Duration: 5 * time.Second}, Stability: v1alpha1.Stability{MinAge: &metav1.Duration{}},
		Sink:          &v1alpha1.Destination{URI: testsink.Start(t).URL},
		AfterDelivery: v1alpha1.AfterDelivery{Action: v1alpha1.AfterDeliveryMove, MoveTo: "/done", FailedTo: "/failed"}}}
	must(t, k8s.Create(context.Background(), w))
	testkit.Polls(t, k8s, w)(1)
	src.file(t, "inbox/late.csv", []byte("late"))
	eventually(t, "the watch files the file it reported", func() bool { return src.has("done/late.csv") })
	// The record follows the move: it says how the move ended.
	eventually(t, "the watch's move is recorded", func() bool {
		return slices.ContainsFunc(workerLog.records(ns), func(r audit.Record) bool { return r.Action == "watch.move" })
	})

	records := workerLog.records(ns)
	reports := audit.Verify(records)
	if len(reports) != 1 || !reports[0].Whole() {
		t.Fatalf("chains: %+v", reports)
	}
	actions := make([]string, 0, len(records))
	for _, r := range records {
		actions = append(actions, r.Action+" "+r.Actor.Kind+"/"+r.Actor.Name+" "+strings.Join(r.Paths, " ")+" "+r.Result)
	}
	figures := sha256.Sum256([]byte("figures"))
	if !slices.ContainsFunc(records, func(r audit.Record) bool {
		return r.Action == "transfer.move" && r.SHA256 == hex.EncodeToString(figures[:])
	}) {
		t.Errorf("no record of the move with the SHA-256 its verification computed: %v", records)
	}
	for _, want := range []string{"transfer.move Transfer/moved src:/out/report.csv dst:/out/report.csv ok",
		"watch.move SftpWatch/inbox /inbox/late.csv /done/late.csv ok"} {
		if !slices.Contains(actions, want) {
			t.Errorf("no record %q in %q", want, actions)
		}
	}
}
