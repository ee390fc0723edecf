package worker_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsink"
	"github.com/sftpgate/sftpgate/worker"
	"github.com/sftpgate/sftpgate/worker/expectations"
)

// shiftedClock is the time the tests' worker reads expectations' windows
// on: the real time moved to a date a test chooses, so that a night's
// windows pass in seconds. Only the expectation tests move it.
type shiftedClock struct {
	mu     sync.Mutex
	offset time.Duration
}

var expectationClock shiftedClock

func (c *shiftedClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

// set makes it t now.
func (c *shiftedClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset = time.Until(t)
}

// TestExpectation: payment reports due by 06:00 Berlin time on business
// days, dropped on a real sshd on time on Monday, late on Tuesday and
// never on Wednesday: the sink hears met, missed, late, missed, in that
// order, each once with an id of its own, and the status, the OnTime
// condition and the audit trail say the same.
func TestExpectation(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	sink := testsink.Start(t)
	startWorker(t)
	berlin, err := time.LoadLocation("Europe/Berlin")
	must(t, err)
	local := func(day, h, m int) time.Time { return time.Date(2031, 1, day, h, m, 0, 0, berlin) } // 6 January 2031 is a Monday
	expectationClock.set(local(5, 23, 0))

	e := &v1alpha1.FileExpectation{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: "payments"}, Spec: v1alpha1.FileExpectationSpec{
		ConnectionRef: v1alpha1.ConnectionReference{Name: "box"}, Path: "/in",
		Files:        v1alpha1.ExpectedFiles{Include: []string{"report-*.csv"}},
		Schedule:     v1alpha1.ExpectationSchedule{Opens: "0 0 * * 1-5", TimeZone: "Europe/Berlin", Deadline: metav1.Duration{Duration: 6 * time.Hour}},
		PollInterval: &metav1.Duration{Duration: 10 * time.Second}, Stability: v1alpha1.Stability{MinAge: &metav1.Duration{}},
		Sink: &v1alpha1.Destination{URI: sink.URL}, Delivery: v1alpha1.DeliverySpec{BackoffDelay: "PT0.2S"}}}
	must(t, k8s.Create(context.Background(), e))
	var got v1alpha1.FileExpectation
	status := func() v1alpha1.FileExpectationStatus {
		must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(e), &got))
		return got.Status
	}
	eventually(t, "the expectation is Ready, its first window Monday's", func() bool {
		st := status()
		ready := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
		return ready != nil && ready.Status == metav1.ConditionTrue && st.CurrentWindow != nil &&
			st.CurrentWindow.Deadline.Equal(&metav1.Time{Time: local(6, 6, 0)})
	})
	want := func(what string, types ...string) {
		t.Helper()
		eventually(t, what, func() bool { return strings.Join(typesOf(sink), " ") == strings.Join(types, " ") })
	}

	// Monday: on time.
	expectationClock.set(local(6, 1, 0))
	tn.put(t, "in/report-1.csv", "id,amount\n1,10\n")
	want("Monday's file came on time", "met")
	// Tuesday: nothing by 06:00, then a file at 07:00.
	expectationClock.set(local(7, 6, 0).Add(30 * time.Second))
	want("Tuesday's window is missed", "met", "missed")
	expectationClock.set(local(7, 7, 0))
	tn.put(t, "in/report-2.csv", "id,amount\n2,20\n")
	want("Tuesday's file came late", "met", "missed", "late")
	// Wednesday: never.
	expectationClock.set(local(8, 6, 0).Add(30 * time.Second))
	want("Wednesday's window is missed", "met", "missed", "late", "missed")

	ids := map[string]bool{}
	for _, ev := range sink.Events() {
		if ids[ev.ID()] {
			t.Errorf("the id %s twice", ev.ID())
		}
		ids[ev.ID()] = true
		var d expectations.Data
		must(t, json.Unmarshal(ev.Data(), &d))
		if d.Expectation != "payments" || d.Path != "/in" || d.Window.Deadline.Sub(d.Window.Opens) != 6*time.Hour {
			t.Errorf("%s: %+v", ev.Type(), d)
		}
	}
	eventually(t, "the status says the last four outcomes and the count missed", func() bool {
		st := status()
		onTime := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionOnTime)
		return len(st.LastOutcomes) == 4 && st.LastOutcomes[0].Outcome == v1alpha1.OutcomeMissed && st.Missed == 2 &&
			onTime != nil && onTime.Status == metav1.ConditionFalse && onTime.Reason == "Missed" && st.LastMetTime != nil
	})
	if o := got.Status.LastOutcomes[3]; o.FileCount != 1 || len(o.Files) != 1 || o.Files[0].Name != "report-1.csv" {
		t.Errorf("Monday's outcome: %+v", o)
	}
}

// TestExpectationTakenOver: the replica holding an expectation stops at
// its deadline while the sink holds the missed window's event; the
// replica that takes over announces it again, with the same id, and the
// window is decided once. Not parallel: its replicas, of a worker
// namespace of their own, hold every expectation, and it moves the
// expectations' clock.
func TestExpectationTakenOver(t *testing.T) {
	ctx := context.Background()
	const workers = "sftpgate-expect-test"
	must(t, testcluster.EnsureNamespace(ctx, restConfig, workers))
	replica := func(identity string) func() {
		return runWorker(t, identity, func(o *worker.Options) { o.Namespace = workers })
	}
	tn := newTenant(t)
	sink := testsink.Start(t)
	expectationClock.set(time.Date(2031, 1, 5, 23, 0, 0, 0, time.UTC))
	stopA := replica("a")
	defer stopA()
	e := &v1alpha1.FileExpectation{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: "daily"}, Spec: v1alpha1.FileExpectationSpec{
		ConnectionRef: v1alpha1.ConnectionReference{Name: "box"}, Path: "/in", Files: v1alpha1.ExpectedFiles{Include: []string{"*.csv"}},
		Schedule:     v1alpha1.ExpectationSchedule{Opens: "0 0 * * *", Deadline: metav1.Duration{Duration: 6 * time.Hour}},
		PollInterval: &metav1.Duration{Duration: 10 * time.Second}, Sink: &v1alpha1.Destination{URI: sink.URL},
		Delivery: v1alpha1.DeliverySpec{BackoffDelay: "PT0.2S"}}}
	must(t, k8s.Create(ctx, e))
	defer func() { _ = k8s.Delete(ctx, e) }()
	var got v1alpha1.FileExpectation
	eventually(t, "replica a evaluates the expectation", func() bool {
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(e), &got))
		return meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady) && got.Status.Worker == "a"
	})
	held := sink.HoldNext(t)
	expectationClock.set(time.Date(2031, 1, 6, 6, 0, 30, 0, time.UTC))
	eventually(t, "the missed window's event reaches the sink", func() bool {
		select {
		case <-held.Arrived:
			return true
		default:
			return false
		}
	})
	stopped := make(chan struct{})
	go func() { stopA(); close(stopped) }()
	held.Release() // answered 503: replica a stops with the event undelivered
	<-stopped
	stopB := replica("b")
	defer stopB()
	eventually(t, "replica b delivers the event", func() bool { return len(sink.Taken()) == 1 })
	ids := map[string]bool{}
	for _, r := range sink.Requests() {
		ids[r.Event.ID()] = true
		if r.Event.Type() != "dev.sftpgate.expectation.missed" {
			t.Errorf("an event of type %s", r.Event.Type())
		}
	}
	if len(ids) != 1 || len(sink.Requests()) < 2 {
		t.Errorf("%d tries with %d ids, want at least two with one", len(sink.Requests()), len(ids))
	}
	eventually(t, "replica b's status says the window was missed once", func() bool {
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(e), &got))
		st := got.Status
		return st.Worker == "b" && st.Missed == 1 && len(st.LastOutcomes) == 1 && st.Pending == 0
	})
}

// typesOf is the sink's expectation events' types, in order, without
// their prefix.
func typesOf(sink *testsink.Sink) []string {
	var out []string
	for _, ev := range sink.Events() {
		out = append(out, strings.TrimPrefix(ev.Type(), "dev.sftpgate.expectation."))
	}
	return out
}
