package watches

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/teststatus"
)

// TestWatchStatus: each fact a poll records gives its reason, the first
// that applies winning, and kstatus (kubectl wait, Flux, Argo CD) reads
// the result as the docs say.
func TestWatchStatus(t *testing.T) {
	polled := facts{polled: true}
	with := func(f func(*facts)) facts { c := polled; f(&c); return c }
	for _, tc := range []struct {
		name    string
		facts   facts
		ready   metav1.ConditionStatus
		reason  string
		stalled bool
		kstatus status.Status
	}{
		{"watching", polled, metav1.ConditionTrue, v1alpha1.ReasonWatching, false, status.CurrentStatus},
		{"not polled yet", facts{}, metav1.ConditionUnknown, v1alpha1.ReasonFirstPoll, false, status.InProgressStatus},
		{"invalid spec", with(func(f *facts) { f.invalid = "x"; f.connection = "y" }), metav1.ConditionFalse, v1alpha1.ReasonInvalidSpec, true, status.FailedStatus},
		{"over quota", with(func(f *facts) { f.overQuota = "x"; f.sink = "y" }), metav1.ConditionFalse, v1alpha1.ReasonOverQuota, true, status.FailedStatus},
		{"sink denied", with(func(f *facts) { f.sinkDenied = "x"; f.connection = "y" }), metav1.ConditionFalse, v1alpha1.ReasonSinkNotAllowed, true, status.FailedStatus},
		{"connection not ready", with(func(f *facts) { f.connection = "x"; f.sink = "y" }), metav1.ConditionFalse, v1alpha1.ReasonConnectionNotReady, false, status.InProgressStatus},
		{"sink not found", with(func(f *facts) { f.sink = "x"; f.pathMissing = "y" }), metav1.ConditionFalse, v1alpha1.ReasonSinkNotFound, false, status.InProgressStatus},
		{"too large", with(func(f *facts) { f.tooLarge = "x"; f.delivery = "y" }), metav1.ConditionFalse, v1alpha1.ReasonDirectoryTooLarge, false, status.InProgressStatus},
		{"over budget", with(func(f *facts) { f.overBudget = "x"; f.pathMissing = "y" }), metav1.ConditionFalse, v1alpha1.ReasonStateBudgetExceeded, false, status.InProgressStatus},
		{"at capacity", with(func(f *facts) { f.atCapacity = "x"; f.pathMissing = "y" }), metav1.ConditionFalse, v1alpha1.ReasonReplicaAtCapacity, false, status.InProgressStatus},
		{"path missing", with(func(f *facts) { f.pathMissing = "x" }), metav1.ConditionFalse, v1alpha1.ReasonPathNotFound, false, status.InProgressStatus},
		{"poll failed", with(func(f *facts) { f.pollFailed = "x" }), metav1.ConditionFalse, v1alpha1.ReasonConnectionNotReady, false, status.InProgressStatus},
		{"first poll failed", facts{pollFailed: "x"}, metav1.ConditionFalse, v1alpha1.ReasonConnectionNotReady, false, status.InProgressStatus},
		{"delivery failing", with(func(f *facts) { f.delivery = "x" }), metav1.ConditionFalse, v1alpha1.ReasonDeliveryFailing, false, status.InProgressStatus},
		{"sink unreachable", with(func(f *facts) { f.delivery = "x"; f.unreachable = true }), metav1.ConditionFalse, v1alpha1.ReasonSinkUnreachable, false, status.InProgressStatus},
		{"transfers at limit", with(func(f *facts) { f.transfersAtLimit = "x" }), metav1.ConditionFalse, v1alpha1.ReasonTransfersAtLimit, false, status.InProgressStatus},
		{"delivery failing before a poll", facts{delivery: "x"}, metav1.ConditionUnknown, v1alpha1.ReasonFirstPoll, false, status.InProgressStatus},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &v1alpha1.SftpWatch{ObjectMeta: metav1.ObjectMeta{Name: "w", Generation: 3}}
			// A Stalled and a Reconciling left from before go when
			// they no longer hold.
			setConditions(w, facts{invalid: "old"})
			setConditions(w, facts{})
			setConditions(w, tc.facts)
			ready := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady)
			if ready == nil || ready.Status != tc.ready || ready.Reason != tc.reason {
				t.Fatalf("Ready = %+v, want %s %s", ready, tc.ready, tc.reason)
			}
			if got := meta.IsStatusConditionTrue(w.Status.Conditions, v1alpha1.ConditionStalled); got != tc.stalled {
				t.Errorf("Stalled = %t, want %t", got, tc.stalled)
			}
			reconciling := tc.reason == v1alpha1.ReasonFirstPoll
			if got := meta.IsStatusConditionTrue(w.Status.Conditions, v1alpha1.ConditionReconciling); got != reconciling {
				t.Errorf("Reconciling = %t, want %t", got, reconciling)
			}
			for _, c := range w.Status.Conditions {
				if c.ObservedGeneration != 3 {
					t.Errorf("%s is for generation %d, not 3", c.Type, c.ObservedGeneration)
				}
			}
			if w.Status.ObservedGeneration != 3 {
				t.Errorf("observedGeneration = %d", w.Status.ObservedGeneration)
			}
			if got := teststatus.KStatus(t, w); got != tc.kstatus {
				t.Errorf("kstatus: %s, want %s", got, tc.kstatus)
			}
			// A replica taking the watch over reads from its status
			// whether this generation was polled: never when it was not,
			// and whenever Ready's reason says so.
			afterPoll := tc.facts.polled && tc.ready == metav1.ConditionTrue || tc.reason == v1alpha1.ReasonDeliveryFailing ||
				tc.reason == v1alpha1.ReasonSinkUnreachable || tc.reason == v1alpha1.ReasonTransfersAtLimit
			if got := polledBefore(w); got != afterPoll || got && !tc.facts.polled {
				t.Errorf("polledBefore = %t, want %t (polled %t)", got, afterPoll, tc.facts.polled)
			}
			if waitsForFirstPoll(w) != (tc.reason == v1alpha1.ReasonFirstPoll) {
				t.Errorf("waitsForFirstPoll = %t with Ready %s", waitsForFirstPoll(w), tc.reason)
			}
			w.Generation++
			if polledBefore(w) {
				t.Error("a generation after the one polled counts as polled")
			}
		})
	}
}
