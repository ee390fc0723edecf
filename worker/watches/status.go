package watches

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// facts are what a watcher found about its watch; its conditions are
// computed from them alone (setConditions), in one place.
type facts struct {
	// invalid says why the spec cannot work; overQuota that the namespace,
	// or the cluster, has more watches than it may.
	invalid   string
	overQuota string
	// connection says why the connection cannot be used now.
	connection string
	// sink says why the sink has no address; sinkDenied that the dial
	// policy refuses it.
	sink, sinkDenied string
	// overBudget says why the state could not be stored: the namespace's
	// budget. atCapacity says the replica tracks as many files as it may.
	overBudget, atCapacity string
	// pathMissing, tooLarge and pollFailed say why the last poll failed.
	pathMissing, tooLarge, pollFailed string
	// polled: the current spec has been polled.
	polled bool
	// delivery says why events wait (the sink fails), while they do;
	// unreachable that the sink did not answer at all.
	delivery    string
	unreachable bool
	// transfersAtLimit says the namespace has as many Transfers made by
	// watches as it may: the next file's waits.
	transfersAtLimit string
}

// setConditions sets w's Ready, Reconciling and Stalled from f, for w's
// current generation.
func setConditions(w *v1alpha1.SftpWatch, f facts) {
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse}
	stalled := false
	switch {
	case f.invalid != "":
		ready.Reason, ready.Message, stalled = v1alpha1.ReasonInvalidSpec, f.invalid, true
	case f.overQuota != "":
		ready.Reason, ready.Message, stalled = v1alpha1.ReasonOverQuota, f.overQuota, true
	case f.sinkDenied != "":
		ready.Reason, ready.Message, stalled = v1alpha1.ReasonSinkNotAllowed, f.sinkDenied, true
	case f.connection != "":
		ready.Reason, ready.Message = v1alpha1.ReasonConnectionNotReady, f.connection
	case f.sink != "":
		ready.Reason, ready.Message = v1alpha1.ReasonSinkNotFound, f.sink
	case f.tooLarge != "":
		ready.Reason, ready.Message = v1alpha1.ReasonDirectoryTooLarge, f.tooLarge
	case f.overBudget != "":
		ready.Reason, ready.Message = v1alpha1.ReasonStateBudgetExceeded, f.overBudget
	case f.atCapacity != "":
		ready.Reason, ready.Message = v1alpha1.ReasonReplicaAtCapacity, f.atCapacity
	case f.pathMissing != "":
		ready.Reason, ready.Message = v1alpha1.ReasonPathNotFound, f.pathMissing
	case f.pollFailed != "":
		ready.Reason, ready.Message = v1alpha1.ReasonConnectionNotReady, f.pollFailed
	case !f.polled:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionUnknown, v1alpha1.ReasonFirstPoll, "the folder has not been polled yet"
	case f.delivery != "" && f.unreachable:
		ready.Reason, ready.Message = v1alpha1.ReasonSinkUnreachable, f.delivery
	case f.delivery != "":
		ready.Reason, ready.Message = v1alpha1.ReasonDeliveryFailing, f.delivery
	case f.transfersAtLimit != "":
		ready.Reason, ready.Message = v1alpha1.ReasonTransfersAtLimit, f.transfersAtLimit
	default:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionTrue, v1alpha1.ReasonWatching, "polling the folder and delivering its events"
	}
	v1alpha1.SetSummary(&w.Status.Conditions, w.Generation, ready, ready.Reason == v1alpha1.ReasonFirstPoll, stalled)
	w.Status.ObservedGeneration = w.Generation
}

// waitsForFirstPoll says whether w's conditions say only that its current
// generation waits for its first poll.
func waitsForFirstPoll(w *v1alpha1.SftpWatch) bool {
	ready := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady)
	return ready != nil && ready.Reason == v1alpha1.ReasonFirstPoll
}

// polledBefore says whether w's status shows its current generation
// polled: Ready, for that generation, has a reason setConditions gives
// only once it was (those past the !f.polled case).
func polledBefore(w *v1alpha1.SftpWatch) bool {
	ready := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady)
	if ready == nil || ready.ObservedGeneration != w.Generation || w.Status.ObservedGeneration != w.Generation {
		return false
	}
	switch ready.Reason {
	case v1alpha1.ReasonWatching, v1alpha1.ReasonDeliveryFailing, v1alpha1.ReasonSinkUnreachable, v1alpha1.ReasonTransfersAtLimit:
		return true
	}
	return false
}
