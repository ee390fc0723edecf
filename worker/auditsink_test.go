package worker_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsink"
	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/auditstore"
	"github.com/sftpgate/sftpgate/internal/storedbytes"
)

// auditOutbox is the tests' workers' bound of a namespace's undelivered
// records.
const auditOutbox = 40

// auditSink makes ns's AuditSink, sending to uri in batches of maxBatch.
func auditSink(t *testing.T, ns, uri string, maxBatch int32) *v1alpha1.AuditSink {
	t.Helper()
	s := &v1alpha1.AuditSink{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v1alpha1.AuditSinkName},
		Spec: v1alpha1.AuditSinkSpec{Sink: v1alpha1.Destination{URI: uri}, MaxBatch: maxBatch}}
	must(t, k8s.Create(context.Background(), s))
	return s
}

// TestAuditSinkDelivers: the worker's records of a namespace's transfer
// reach the namespace's AuditSink in batches of at most maxBatch, as a
// whole chain of that namespace's records only, and the sink's status
// says so; a second namespace's sink gets its own records, never the
// first's.
func TestAuditSinkDelivers(t *testing.T) {
	t.Parallel()
	src, dst := inProcessServer(testsftp.Start(t)), inProcessServer(testsftp.Start(t))
	ns := transferNamespace(t, map[string]server{"src": src, "dst": dst})
	other := transferNamespace(t, map[string]server{"src": src, "dst": dst})
	startWorker(t)
	sink, otherSink := testsink.Start(t), testsink.Start(t)
	auditSink(t, ns, sink.URL, 2)
	auditSink(t, other, otherSink.URL, 100)
	for i := range 3 {
		src.file(t, fmt.Sprintf("out/%d.csv", i), []byte("figures"))
	}
	tr := transfer(t, ns, "batch", "/out")
	if got := finished(t, tr); readyReason(got) != "True/Succeeded" {
		t.Fatalf("%s %+v", readyReason(got), got.Status)
	}
	tr = transfer(t, other, "one", "/out/0.csv")
	if got := finished(t, tr); readyReason(got) != "True/Succeeded" {
		t.Fatalf("%s %+v", readyReason(got), got.Status)
	}
	eventually(t, "the sink gets the three copies' records", func() bool { return len(sink.AuditRecords(t)) >= 3 })
	eventually(t, "the other sink gets its copy's record", func() bool { return len(otherSink.AuditRecords(t)) >= 1 })

	for _, e := range sink.Events() {
		var batch []audit.Record
		must(t, e.DataAs(&batch))
		if len(batch) > 2 || e.Type() != "dev.sftpgate.audit.batch" || e.Source() != "/apis/sftpgate.dev/v1alpha1/namespaces/"+ns+"/auditsinks/audit" {
			t.Errorf("event %s %s: %d records", e.Type(), e.Source(), len(batch))
		}
	}
	for sink, want := range map[*testsink.Sink]string{sink: ns, otherSink: other} {
		records := sink.AuditRecords(t)
		for _, r := range records {
			if r.Namespace != want {
				t.Fatalf("the sink of %s got a record of %s: %s", want, r.Namespace, r)
			}
		}
		if reports := audit.Verify(records); len(reports) != 1 || !reports[0].Whole() {
			t.Errorf("chains at the sink of %s: %+v", want, reports)
		}
	}
	var copied []string
	for _, r := range sink.AuditRecords(t) {
		copied = append(copied, r.Action+" "+r.Paths[0])
	}
	slices.Sort(copied)
	if want := []string{"transfer.copy src:/out/0.csv", "transfer.copy src:/out/1.csv", "transfer.copy src:/out/2.csv"}; !slices.Equal(copied, want) {
		t.Errorf("records %q, want %q", copied, want)
	}
	eventually(t, "the sink's status counts the records", func() bool {
		s := &v1alpha1.AuditSink{}
		must(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "audit"}, s))
		ready := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
		return ready != nil && ready.Reason == v1alpha1.ReasonDelivering && s.Status.Delivered >= 3 && s.Status.Pending == 0 &&
			s.Status.SinkURI == sink.URL && s.Status.ObservedGeneration == s.Generation
	})
}

// TestAuditOutboxBound: records a failing sink cannot take pile up to the
// outbox's bound and no further: the oldest are dropped (down to nine
// tenths of the bound), the worker's drop record names them, and once the sink takes records again it gets
// the drop record and every record after the dropped ones, so that
// `audit verify` finds nothing missing that is not said.
func TestAuditOutboxBound(t *testing.T) {
	t.Parallel()
	ns := testkit.Namespace(t, k8s, "audit-bound-")
	startWorker(t)
	sink := testsink.Start(t)
	sink.SetAnswer(http.StatusServiceUnavailable)
	auditSink(t, ns, sink.URL, 100)

	// A replica's chain of 60 records, stored as six segments of ten.
	store := &auditstore.Store{Client: k8s, Namespace: workerNamespace(t)}
	chains := &audit.Chains{Replica: "gateway/test/" + ns}
	for range 6 {
		var segment []audit.Record
		for range 10 {
			segment = append(segment, chains.Link(audit.Record{Action: "gateway.write", Namespace: ns,
				Actor: audit.Actor{Kind: audit.ActorKey, Name: "k"}, Paths: []string{"/in/a.csv"}, Result: audit.ResultOK}))
		}
		_, err := store.Keep(context.Background(), ns, segment)
		must(t, err)
		time.Sleep(10 * time.Millisecond) // the segments' order is their first record's time
	}
	eventually(t, "the oldest records past the bound are dropped", func() bool {
		s := &v1alpha1.AuditSink{}
		must(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "audit"}, s))
		return s.Status.Dropped == 30 && s.Status.Pending <= auditOutbox
	})
	sink.SetAnswer(0)
	eventually(t, "the sink gets what is left, and the drop record", func() bool {
		return slices.ContainsFunc(sink.AuditRecords(t), func(r audit.Record) bool { return r.Action == audit.ActionDropped }) &&
			slices.ContainsFunc(sink.AuditRecords(t), func(r audit.Record) bool { return r.Seq == 60 })
	})
	for _, rep := range audit.Verify(sink.AuditRecords(t)) {
		if rep.Replica != chains.Replica {
			continue
		}
		if rep.First != 31 || rep.Last != 60 || len(rep.Missing) != 0 || rep.Records != 30 || !slices.Equal(rep.Dropped, []audit.Gap{{From: 1, To: 30}}) {
			t.Errorf("the chain at the sink: %+v", rep)
		}
	}
}

// TestAuditUnreadableLine: a stored line that cannot be read (over the
// line limit, not JSON) does not stop delivery: the sink gets the records
// before and after it and one drop record naming it, the chain verifies
// with that record said dropped, and the sink's status is Ready with
// nothing pending.
func TestAuditUnreadableLine(t *testing.T) {
	t.Parallel()
	ns := testkit.Namespace(t, k8s, "audit-unreadable-")
	ctx := context.Background()
	store := &auditstore.Store{Client: k8s, Namespace: workerNamespace(t)}
	chains := &audit.Chains{Replica: "gateway/unreadable/" + ns}
	var records []audit.Record
	for range 5 {
		records = append(records, chains.Link(audit.Record{Action: "gateway.write", Namespace: ns,
			Actor: audit.Actor{Kind: audit.ActorKey, Name: "k"}, Paths: []string{"/in/a.csv"}, Result: audit.ResultOK}))
	}
	_, err := store.Keep(ctx, ns, records[:3])
	must(t, err)
	// Record 2's line as a tree older than the bounds could store it.
	segments, err := store.List(ctx, ns)
	must(t, err)
	cm := &corev1.ConfigMap{}
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: workerNamespace(t), Name: segments[0].Name}, cm))
	var data bytes.Buffer
	z := gzip.NewWriter(&data)
	fmt.Fprintf(z, "%s\n{\"requestID\":\"%s\"}\n%s\n", records[0].Line(), strings.Repeat(`\ufffd`, 180<<10), records[2].Line())
	must(t, z.Close())
	cm.BinaryData["records.jsonl.gz"] = data.Bytes()
	must(t, k8s.Update(ctx, cm))
	_, err = store.Keep(ctx, ns, records[3:])
	must(t, err)

	sink := testsink.Start(t)
	auditSink(t, ns, sink.URL, 100)
	startWorker(t)
	eventually(t, "the sink gets the records after the unreadable one, and the drop record", func() bool {
		got := sink.AuditRecords(t)
		return slices.ContainsFunc(got, func(r audit.Record) bool { return r.Replica == chains.Replica && r.Seq == 5 }) &&
			slices.ContainsFunc(got, func(r audit.Record) bool { return r.Action == audit.ActionDropped })
	})
	for _, rep := range audit.Verify(sink.AuditRecords(t)) {
		if rep.Replica == chains.Replica && (!rep.Whole() || rep.Records != 4 || !slices.Equal(rep.Dropped, []audit.Gap{{From: 2, To: 2}})) {
			t.Errorf("the chain at the sink: %+v", rep)
		}
	}
	eventually(t, "the sink is Ready with nothing pending", func() bool {
		s := &v1alpha1.AuditSink{}
		must(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "audit"}, s))
		ready := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
		return ready != nil && ready.Reason == v1alpha1.ReasonDelivering && s.Status.Pending == 0 && s.Status.OldestPendingTime == nil
	})
	drops := slices.DeleteFunc(sink.AuditRecords(t), func(r audit.Record) bool { return r.Action != audit.ActionDropped })
	if len(drops) != 1 {
		t.Errorf("%d drop records, want 1: %v", len(drops), drops)
	}
}

// TestAuditBudgetRefuses: a namespace's stored records are refused past
// its audit budget, before they are written, while the rest of what is
// stored for it (its budget apart) is still admitted.
func TestAuditBudgetRefuses(t *testing.T) {
	t.Parallel()
	ns := testkit.Namespace(t, k8s, "audit-budget-")
	budget := &storedbytes.Budget{Client: k8s, Namespace: workerNamespace(t),
		Limits: storedbytes.Limits{PerNamespace: 1 << 20, AuditPerNamespace: 8 << 10}}
	store := &auditstore.Store{Client: k8s, Namespace: workerNamespace(t), Budget: budget}
	chains := &audit.Chains{Replica: "gateway/budget/" + ns}
	var err error
	kept := 0
	for ; kept < 100 && err == nil; kept++ {
		_, err = store.Keep(context.Background(), ns, []audit.Record{chains.Link(audit.Record{Action: "gateway.read", Namespace: ns,
			Actor: audit.Actor{Kind: audit.ActorKey, Name: "k"}, Paths: []string{"/in/a.csv"}, Result: audit.ResultOK})})
	}
	var exceeded *storedbytes.ExceededError
	if !errors.As(err, &exceeded) || kept < 2 {
		t.Fatalf("after %d segments: %v, want the audit budget's refusal", kept, err)
	}
	segments, err := store.List(context.Background(), ns)
	must(t, err)
	var stored int64
	for _, s := range segments {
		stored += s.Bytes
	}
	if stored > 8<<10 || len(segments) != kept-1 {
		t.Errorf("%d segments of %d bytes stored, past the budget of 8Ki", len(segments), stored)
	}
	state := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: workerNamespace(t), Name: "sftpwatch-" + ns}}
	storedbytes.Mark(state, ns, 0)
	done, err := budget.Admit(context.Background(), ns, []*corev1.ConfigMap{state}, nil)
	if err != nil {
		t.Fatalf("the namespace's other state is refused: %v", err)
	}
	done()
}
