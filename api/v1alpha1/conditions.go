package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SetSummary sets the conditions kstatus reads for generation gen: ready,
// and Reconciling and Stalled (True, with ready's reason and message) or
// removed, as reconciling and stalled say.
func SetSummary(conditions *[]metav1.Condition, gen int64, ready metav1.Condition, reconciling, stalled bool) {
	ready.Type, ready.ObservedGeneration = ConditionReady, gen
	meta.SetStatusCondition(conditions, ready)
	for _, c := range []struct {
		kind string
		set  bool
	}{{ConditionReconciling, reconciling}, {ConditionStalled, stalled}} {
		if c.set {
			meta.SetStatusCondition(conditions, metav1.Condition{Type: c.kind, Status: metav1.ConditionTrue,
				Reason: ready.Reason, Message: ready.Message, ObservedGeneration: gen})
		} else {
			meta.RemoveStatusCondition(conditions, c.kind)
		}
	}
}
