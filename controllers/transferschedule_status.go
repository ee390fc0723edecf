package controllers

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// scheduleFacts is what one reconcile of a TransferSchedule found.
// setScheduleStatus computes the schedule's conditions from them alone.
type scheduleFacts struct {
	// invalid says why the schedule can never come due: its spec must
	// change.
	invalid string
	// next is when the next Transfer is due (zero: none, suspended or
	// invalid).
	next time.Time
}

// setScheduleStatus sets s's conditions and next schedule time from f and
// its spec.
func setScheduleStatus(s *v1alpha1.TransferSchedule, f scheduleFacts) {
	ready := metav1.Condition{Status: metav1.ConditionTrue}
	stalled := false
	s.Status.NextScheduleTime = nil
	switch {
	case f.invalid != "":
		ready.Status, ready.Reason, ready.Message, stalled = metav1.ConditionFalse, v1alpha1.ReasonInvalidSchedule, f.invalid, true
	case s.Spec.Suspend:
		ready.Reason, ready.Message = v1alpha1.ReasonSuspended, "runs are held back (spec.suspend)"
	default:
		ready.Reason, ready.Message = v1alpha1.ReasonScheduled, fmt.Sprintf("the next Transfer is due at %s", f.next.UTC().Format(time.RFC3339))
		s.Status.NextScheduleTime = &metav1.Time{Time: f.next}
	}
	v1alpha1.SetSummary(&s.Status.Conditions, s.Generation, ready, false, stalled)
	s.Status.ObservedGeneration = s.Generation
}
