package controllers_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/controllers"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
)

func schedule(ns, name, expr string, mutate ...func(*v1alpha1.TransferScheduleSpec)) *v1alpha1.TransferSchedule {
	s := &v1alpha1.TransferSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.TransferScheduleSpec{
		Schedule: expr,
		TransferTemplate: v1alpha1.TransferTemplate{
			Metadata: v1alpha1.TemplateMetadata{Labels: map[string]string{"team": "reports"}},
			Spec: v1alpha1.TransferSpec{
				Source: v1alpha1.TransferSource{ConnectionRef: v1alpha1.ConnectionReference{Name: "partner"}, Path: "/outgoing"},
				TransferOptions: v1alpha1.TransferOptions{
					Destination: v1alpha1.TransferDestination{ConnectionRef: v1alpha1.ConnectionReference{Name: "archive"}, Path: "/in"}}}}}}
	for _, m := range mutate {
		m(&s.Spec)
	}
	return s
}

func transfersOf(t *testing.T, s *v1alpha1.TransferSchedule) []v1alpha1.Transfer {
	t.Helper()
	var list v1alpha1.TransferList
	must(t, k8s.List(context.Background(), &list, client.InNamespace(s.Namespace), client.MatchingLabels{controllers.LabelSchedule: s.Name}))
	return list.Items
}

// runs waits until s has handled n more runs than when it is called.
func runs(t *testing.T, s *v1alpha1.TransferSchedule, n int) {
	t.Helper()
	last := func(o *v1alpha1.TransferSchedule) time.Time {
		if o.Status.LastScheduleTime == nil {
			return time.Time{}
		}
		return o.Status.LastScheduleTime.Time
	}
	for range n {
		from := last(waitFor(t, s, "read", func(*v1alpha1.TransferSchedule) bool { return true }))
		waitFor(t, s, "the next run", func(o *v1alpha1.TransferSchedule) bool { return last(o).After(from) })
	}
}

// finish marks tr as a worker would once it ended: succeeded or not.
func finish(t *testing.T, tr *v1alpha1.Transfer, ok bool, at time.Time) {
	t.Helper()
	status, reason := metav1.ConditionTrue, v1alpha1.ReasonSucceeded
	if !ok {
		status, reason = metav1.ConditionFalse, v1alpha1.ReasonSourceNotFound
	}
	meta.SetStatusCondition(&tr.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: status, Reason: reason, Message: "m",
		ObservedGeneration: tr.Generation})
	tr.Status.CompletionTime = &metav1.Time{Time: at.Truncate(time.Second)}
	must(t, k8s.Status().Update(context.Background(), tr))
}

// TestTransferSchedule: a schedule makes a Transfer each time it is due,
// owned by it and labelled from its template; Forbid skips a run while one
// runs; the history keeps as many finished Transfers as it says; suspend
// holds runs back.
func TestTransferSchedule(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	s := schedule(ns, "nightly", "@every 1s", func(s *v1alpha1.TransferScheduleSpec) {
		s.SuccessfulTransfersHistoryLimit, s.FailedTransfersHistoryLimit = ptr(int32(1)), ptr(int32(0))
	})
	create(t, s)
	waitForReady(t, s, metav1.ConditionTrue, v1alpha1.ReasonScheduled)
	runs(t, s, 1)
	made := transfersOf(t, s)
	if len(made) != 1 || made[0].Labels["team"] != "reports" || !metav1.IsControlledBy(&made[0], s) {
		t.Fatalf("made %+v", made)
	}
	// Forbid (the default): runs are skipped while the first runs.
	runs(t, s, 2)
	if got := transfersOf(t, s); len(got) != 1 {
		t.Fatalf("%d transfers while the first runs", len(got))
	}
	got := waitFor(t, s, "lists the active transfer", func(o *v1alpha1.TransferSchedule) bool { return len(o.Status.Active) == 1 })
	if got.Status.NextScheduleTime == nil {
		t.Error("no next schedule time")
	}
	// Finished ones are kept as the history limits say: one that
	// succeeded, none that failed.
	first := made[0]
	finish(t, &first, true, time.Now())
	runs(t, s, 1)
	for range 2 {
		latest := transfersOf(t, s)
		for i := range latest {
			if !latest[i].Finished() {
				finish(t, &latest[i], len(latest)%2 == 0, time.Now())
			}
		}
		runs(t, s, 1)
	}
	waitFor(t, s, "the history is trimmed", func(*v1alpha1.TransferSchedule) bool {
		succeeded, failed := 0, 0
		for _, tr := range transfersOf(t, s) {
			switch {
			case !tr.Finished():
			case meta.IsStatusConditionTrue(tr.Status.Conditions, v1alpha1.ConditionReady):
				succeeded++
			default:
				failed++
			}
		}
		return succeeded <= 1 && failed == 0
	})
	// Suspended: no further run. A patch, as kubectl's: an update would
	// conflict with the controller's status writes.
	must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(s), s))
	before := s.DeepCopy()
	s.Spec.Suspend = true
	must(t, k8s.Patch(context.Background(), s, client.MergeFrom(before)))
	waitForReady(t, s, metav1.ConditionTrue, v1alpha1.ReasonSuspended)
}

// TestTransferScheduleInvalid: a schedule the parser refuses, one that
// never comes due (30 February), or an unknown time zone, is Stalled with
// InvalidSchedule, and makes nothing.
func TestTransferScheduleInvalid(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	for name, s := range map[string]*v1alpha1.TransferSchedule{
		"expr":  schedule(ns, "expr", "every night at two"),
		"zone":  schedule(ns, "zone", "0 2 * * *", func(s *v1alpha1.TransferScheduleSpec) { s.TimeZone = "Mars/Olympus" }),
		"never": schedule(ns, "never", "0 0 30 2 *"),
	} {
		create(t, s)
		got := waitForReady(t, s, metav1.ConditionFalse, v1alpha1.ReasonInvalidSchedule)
		if !meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionStalled) || len(transfersOf(t, s)) != 0 {
			t.Errorf("%s: %+v", name, got.Status)
		}
	}
}

// TestTransferTTL: a finished Transfer with ttlSecondsAfterFinished is
// deleted once it passed; one without is kept.
func TestTransferTTL(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	spec := schedule(ns, "x", "@daily").Spec.TransferTemplate.Spec
	expiring := &v1alpha1.Transfer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "expiring"}, Spec: spec}
	expiring.Spec.TTLSecondsAfterFinished = ptr(int32(1))
	kept := &v1alpha1.Transfer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kept"}, Spec: spec}
	create(t, expiring)
	create(t, kept)
	finish(t, expiring, true, time.Now())
	finish(t, kept, true, time.Now())
	testkit.Eventually(t, "the expired transfer is removed", func() bool {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(expiring), &v1alpha1.Transfer{})
		return client.IgnoreNotFound(err) == nil && err != nil
	})
	must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(kept), kept))
}

func ptr[T any](v T) *T { return &v }
