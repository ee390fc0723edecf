package expectations

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// TestSetConditions: a row per state; a missed window leaves Ready as
// it is and says so in OnTime.
func TestSetConditions(t *testing.T) {
	missed := &v1alpha1.ExpectationResult{Outcome: v1alpha1.OutcomeMissed}
	met := &v1alpha1.ExpectationResult{Outcome: v1alpha1.OutcomeMet}
	for _, c := range []struct {
		name          string
		f             facts
		last          *v1alpha1.ExpectationResult
		ready, reason string
		stalled       bool
		onTime, onWhy string
		reconciling   bool
	}{
		{"not listed yet", facts{}, nil, "Unknown", v1alpha1.ReasonFirstPoll, false, "Unknown", v1alpha1.ReasonNoWindowDecided, true},
		{"expecting, nothing decided", facts{listed: true}, nil, "True", v1alpha1.ReasonExpecting, false, "Unknown", v1alpha1.ReasonNoWindowDecided, false},
		{"expecting, last window met", facts{listed: true}, met, "True", v1alpha1.ReasonExpecting, false, "True", "Met", false},
		{"expecting, last window missed", facts{listed: true}, missed, "True", v1alpha1.ReasonExpecting, false, "False", "Missed", false},
		{"an invalid spec", facts{invalid: "schedule: bad"}, missed, "False", v1alpha1.ReasonInvalidSpec, true, "False", "Missed", false},
		{"over quota", facts{overQuota: "too many"}, nil, "False", v1alpha1.ReasonOverQuota, true, "Unknown", v1alpha1.ReasonNoWindowDecided, false},
		{"no calendar", facts{calendar: "none"}, nil, "False", v1alpha1.ReasonCalendarNotFound, false, "Unknown", v1alpha1.ReasonNoWindowDecided, false},
		{"no connection", facts{connection: "none"}, nil, "False", v1alpha1.ReasonConnectionNotReady, false, "Unknown", v1alpha1.ReasonNoWindowDecided, false},
		{"no sink", facts{sink: "none"}, nil, "False", v1alpha1.ReasonSinkNotFound, false, "Unknown", v1alpha1.ReasonNoWindowDecided, false},
		{"a sink not allowed", facts{listed: true, delivery: "private", sinkDenied: true}, nil, "False", v1alpha1.ReasonSinkNotAllowed, true, "Unknown", v1alpha1.ReasonNoWindowDecided, false},
		{"a sink that does not answer", facts{listed: true, delivery: "timeout", unreachable: true}, nil, "False", v1alpha1.ReasonSinkUnreachable, false, "Unknown", v1alpha1.ReasonNoWindowDecided, false},
		{"a sink that refuses", facts{listed: true, delivery: "503"}, nil, "False", v1alpha1.ReasonDeliveryFailing, false, "Unknown", v1alpha1.ReasonNoWindowDecided, false},
		{"no folder", facts{listed: true, pathMissing: "/in"}, nil, "False", v1alpha1.ReasonPathNotFound, false, "Unknown", v1alpha1.ReasonNoWindowDecided, false},
		{"a folder too large", facts{tooLarge: "many"}, nil, "False", v1alpha1.ReasonDirectoryTooLarge, false, "Unknown", v1alpha1.ReasonNoWindowDecided, false},
		{"a listing that failed", facts{listFailed: "EOF"}, nil, "False", v1alpha1.ReasonConnectionNotReady, false, "Unknown", v1alpha1.ReasonNoWindowDecided, false},
		{"over the state budget", facts{listed: true, overBudget: "full"}, nil, "False", v1alpha1.ReasonStateBudgetExceeded, false, "Unknown", v1alpha1.ReasonNoWindowDecided, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := &v1alpha1.FileExpectation{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
			setConditions(e, c.f, c.last)
			ready := meta.FindStatusCondition(e.Status.Conditions, v1alpha1.ConditionReady)
			onTime := meta.FindStatusCondition(e.Status.Conditions, v1alpha1.ConditionOnTime)
			if string(ready.Status) != c.ready || ready.Reason != c.reason || ready.ObservedGeneration != 3 {
				t.Errorf("Ready %s/%s, want %s/%s", ready.Status, ready.Reason, c.ready, c.reason)
			}
			if got := meta.IsStatusConditionTrue(e.Status.Conditions, v1alpha1.ConditionStalled); got != c.stalled {
				t.Errorf("Stalled %v", got)
			}
			if got := meta.IsStatusConditionTrue(e.Status.Conditions, v1alpha1.ConditionReconciling); got != c.reconciling {
				t.Errorf("Reconciling %v", got)
			}
			if string(onTime.Status) != c.onTime || onTime.Reason != c.onWhy {
				t.Errorf("OnTime %s/%s, want %s/%s", onTime.Status, onTime.Reason, c.onTime, c.onWhy)
			}
			if e.Status.ObservedGeneration != 3 {
				t.Errorf("observedGeneration %d", e.Status.ObservedGeneration)
			}
		})
	}
}
