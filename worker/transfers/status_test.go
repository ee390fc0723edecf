package transfers

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/teststatus"
	"github.com/sftpgate/sftpgate/worker/transfer"
)

// TestTransferStatus: each fact a run records gives its reason, the first
// that applies winning, and kstatus reads the result as the docs say.
func TestTransferStatus(t *testing.T) {
	plan := &transfer.Plan{Files: []transfer.File{
		{Path: "/a", Size: 10, State: transfer.Done}, {Path: "/b", Size: 30}, {Path: "/c", Size: 60, State: transfer.Skipped}}}
	for _, tc := range []struct {
		name                 string
		facts                facts
		ready                metav1.ConditionStatus
		reason               string
		stalled, reconciling bool
		kstatus              status.Status
	}{
		{"listing", facts{}, metav1.ConditionFalse, v1alpha1.ReasonTransferring, false, true, status.InProgressStatus},
		{"copying", facts{plan: plan}, metav1.ConditionFalse, v1alpha1.ReasonTransferring, false, true, status.InProgressStatus},
		{"over budget", facts{overBudget: "x", retrying: "y"}, metav1.ConditionFalse, v1alpha1.ReasonStateBudgetExceeded, false, true, status.InProgressStatus},
		{"retrying", facts{plan: plan, retrying: "x"}, metav1.ConditionFalse, v1alpha1.ReasonRetrying, false, true, status.InProgressStatus},
		{"queued", facts{queued: "x", connection: "y"}, metav1.ConditionFalse, v1alpha1.ReasonQueued, false, true, status.InProgressStatus},
		{"over the accounts' total", facts{overQuota: "x", connection: "y"}, metav1.ConditionFalse, v1alpha1.ReasonOverQuota, false, true, status.InProgressStatus},
		{"connection not ready", facts{connection: "x", retrying: "y"}, metav1.ConditionFalse, v1alpha1.ReasonConnectionNotReady, true, false, status.FailedStatus},
		{"succeeded, event under way", facts{plan: plan, outcome: v1alpha1.ReasonSucceeded}, metav1.ConditionTrue, v1alpha1.ReasonSucceeded, false, true, status.InProgressStatus},
		{"succeeded", facts{plan: plan, outcome: v1alpha1.ReasonSucceeded, finished: true}, metav1.ConditionTrue, v1alpha1.ReasonSucceeded, false, false, status.CurrentStatus},
		{"failed", facts{plan: plan, outcome: v1alpha1.ReasonVerificationFailed, finished: true, queued: "x"}, metav1.ConditionFalse, v1alpha1.ReasonVerificationFailed, true, false, status.FailedStatus},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &v1alpha1.Transfer{ObjectMeta: metav1.ObjectMeta{Name: "t", Generation: 1}}
			setStatus(tr, facts{connection: "old"})
			setStatus(tr, tc.facts)
			ready := meta.FindStatusCondition(tr.Status.Conditions, v1alpha1.ConditionReady)
			if ready == nil || ready.Status != tc.ready || ready.Reason != tc.reason {
				t.Fatalf("Ready = %+v, want %s %s", ready, tc.ready, tc.reason)
			}
			if got := meta.IsStatusConditionTrue(tr.Status.Conditions, v1alpha1.ConditionStalled); got != tc.stalled {
				t.Errorf("Stalled = %t, want %t", got, tc.stalled)
			}
			if got := meta.IsStatusConditionTrue(tr.Status.Conditions, v1alpha1.ConditionReconciling); got != tc.reconciling {
				t.Errorf("Reconciling = %t, want %t", got, tc.reconciling)
			}
			if got := teststatus.KStatus(t, tr); got != tc.kstatus {
				t.Errorf("kstatus: %s, want %s", got, tc.kstatus)
			}
			if tc.facts.plan != nil && (tr.Status.Progress != "2 of 3 files, 70%" || tr.Status.Files.Done != 1 || tr.Status.Bytes.Total != 100) {
				t.Errorf("counts: %q %+v %+v", tr.Status.Progress, tr.Status.Files, tr.Status.Bytes)
			}
		})
	}
}

// TestOutcome: a transfer's end names the failures' reason when they
// share one, and lists at most MaxTransferFailures of them.
func TestOutcome(t *testing.T) {
	p := &transfer.Plan{}
	for i := range 25 {
		p.Files = append(p.Files, transfer.File{Path: string(rune('a' + i)), State: transfer.Failed, Reason: v1alpha1.ReasonPermissionDenied})
	}
	p.Files = append(p.Files, transfer.File{Path: "z", State: transfer.Done})
	if reason, _ := outcome(p); reason != v1alpha1.ReasonPermissionDenied {
		t.Errorf("one reason: %s", reason)
	}
	p.Files[3].Reason = v1alpha1.ReasonDestinationFull
	if reason, _ := outcome(p); reason != v1alpha1.ReasonFilesFailed {
		t.Errorf("two reasons: %s", reason)
	}
	tr := &v1alpha1.Transfer{}
	setStatus(tr, facts{plan: p, outcome: v1alpha1.ReasonFilesFailed, finished: true})
	if len(tr.Status.Failures) != v1alpha1.MaxTransferFailures || tr.Status.MoreFailures != 5 {
		t.Errorf("%d failures listed, %d more", len(tr.Status.Failures), tr.Status.MoreFailures)
	}
	if reason, _ := outcome(&transfer.Plan{Files: []transfer.File{{State: transfer.Skipped}}}); reason != v1alpha1.ReasonSucceeded {
		t.Errorf("all skipped: %s", reason)
	}
}
