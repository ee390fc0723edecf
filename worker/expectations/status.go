package expectations

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/statuspatch"
)

// facts are what a task found about its expectation; its conditions are
// computed from them alone (setConditions), in one place.
type facts struct {
	// invalid says why the spec cannot work; overQuota that the
	// namespace, or the cluster, has more expectations than it may.
	invalid, overQuota string
	// calendar says the calendar named is missing; connection why the
	// connection cannot be used now; sink why the sink has no address.
	calendar, connection, sink string
	// overBudget says why the state could not be stored.
	overBudget string
	// pathMissing, tooLarge and listFailed say why the last listing
	// failed; listed that one succeeded since the task started.
	pathMissing, tooLarge, listFailed string
	listed                            bool
	// delivery says why outcomes wait (the sink fails), while they do;
	// unreachable that the sink did not answer at all, sinkDenied that
	// the dial policy refuses it.
	delivery                string
	unreachable, sinkDenied bool
}

// setConditions sets e's Ready, Reconciling and Stalled from f, and
// OnTime from its last outcome, for e's current generation.
func setConditions(e *v1alpha1.FileExpectation, f facts, last *v1alpha1.ExpectationResult) {
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse}
	stalled := false
	switch {
	case f.invalid != "":
		ready.Reason, ready.Message, stalled = v1alpha1.ReasonInvalidSpec, f.invalid, true
	case f.overQuota != "":
		ready.Reason, ready.Message, stalled = v1alpha1.ReasonOverQuota, f.overQuota, true
	case f.sinkDenied:
		ready.Reason, ready.Message, stalled = v1alpha1.ReasonSinkNotAllowed, f.delivery, true
	case f.calendar != "":
		ready.Reason, ready.Message = v1alpha1.ReasonCalendarNotFound, f.calendar
	case f.connection != "":
		ready.Reason, ready.Message = v1alpha1.ReasonConnectionNotReady, f.connection
	case f.sink != "":
		ready.Reason, ready.Message = v1alpha1.ReasonSinkNotFound, f.sink
	case f.overBudget != "":
		ready.Reason, ready.Message = v1alpha1.ReasonStateBudgetExceeded, f.overBudget
	case f.tooLarge != "":
		ready.Reason, ready.Message = v1alpha1.ReasonDirectoryTooLarge, f.tooLarge
	case f.pathMissing != "":
		ready.Reason, ready.Message = v1alpha1.ReasonPathNotFound, f.pathMissing
	case f.listFailed != "":
		ready.Reason, ready.Message = v1alpha1.ReasonConnectionNotReady, f.listFailed
	case !f.listed:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionUnknown, v1alpha1.ReasonFirstPoll, "the folder has not been listed yet"
	case f.delivery != "" && f.unreachable:
		ready.Reason, ready.Message = v1alpha1.ReasonSinkUnreachable, f.delivery
	case f.delivery != "":
		ready.Reason, ready.Message = v1alpha1.ReasonDeliveryFailing, f.delivery
	default:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionTrue, v1alpha1.ReasonExpecting, "listing the folder and deciding its windows"
	}
	ready.Message = statuspatch.Cut(ready.Message, 1024) // a server's or a sink's words
	v1alpha1.SetSummary(&e.Status.Conditions, e.Generation, ready, ready.Reason == v1alpha1.ReasonFirstPoll, stalled)
	onTime := metav1.Condition{Type: v1alpha1.ConditionOnTime, Status: metav1.ConditionUnknown, ObservedGeneration: e.Generation,
		Reason: v1alpha1.ReasonNoWindowDecided, Message: "no window has been decided yet"}
	if last != nil {
		onTime.Status, onTime.Reason = metav1.ConditionFalse, string(last.Outcome)
		if last.Outcome == v1alpha1.OutcomeMet {
			onTime.Status = metav1.ConditionTrue
		}
		onTime.Message = fmt.Sprintf("the window from %s to %s: %s at %s", last.Window.Opens.UTC().Format(time.RFC3339),
			last.Window.Deadline.UTC().Format(time.RFC3339), last.Outcome, last.Time.UTC().Format(time.RFC3339))
	}
	meta.SetStatusCondition(&e.Status.Conditions, onTime)
	e.Status.ObservedGeneration = e.Generation
}

// report writes e's status when it changed, no more often than
// Limits.WriteEvery unless a condition changed; it says when to try
// again, if it could not write it now.
func (t *task) report(ctx context.Context, e *v1alpha1.FileExpectation, f facts) (again time.Time) {
	next := e.DeepCopy()
	var last *v1alpha1.ExpectationResult
	st := &next.Status
	st.Worker, st.SinkURI = t.r.Shard.Identity, t.sinkURI
	if t.state != nil {
		if len(t.state.Outcomes) > 0 {
			last = &t.state.Outcomes[0]
		}
		st.CurrentWindow, st.NextDeadline = nil, nil
		if w := t.tracker.State.Window; !w.IsZero() {
			cw := windowOf(w)
			st.CurrentWindow = &cw
		}
		if d := t.nextDeadline(t.r.now()); !d.IsZero() {
			st.NextDeadline = &metav1.Time{Time: d.Truncate(time.Second)}
		}
		st.LastOutcomes = append([]v1alpha1.ExpectationResult(nil), t.state.Outcomes...)
		st.Missed, st.Pending = t.state.Missed, int32(min(len(t.state.Outbox), 1<<30))
		st.LastMetTime = nil
		if !t.state.LastMet.IsZero() {
			st.LastMetTime = &metav1.Time{Time: t.state.LastMet.Truncate(time.Second)}
		}
	}
	setConditions(next, f, last)
	if was := meta.FindStatusCondition(e.Status.Conditions, v1alpha1.ConditionOnTime); t.state == nil && was != nil {
		meta.SetStatusCondition(&next.Status.Conditions, *was) // not known until the state is read
	}
	lastErr := t.lastErr
	if t.state != nil && t.state.Dropped > 0 && lastErr == "" {
		lastErr = fmt.Sprintf("%d outcomes were dropped undelivered: the sink did not take them before %d more waited", t.state.Dropped, t.r.Limits.MaxPending)
	}
	st.LastError = statuspatch.Cut(lastErr, 1024)
	if reflect.DeepEqual(normalized(next.Status), normalized(e.Status)) {
		return time.Time{}
	}
	conditionsChanged := !reflect.DeepEqual(next.Status.Conditions, e.Status.Conditions)
	if e.ResourceVersion == t.behind || !conditionsChanged && time.Since(t.lastStatus) < t.r.Limits.WriteEvery {
		return time.Now().Add(t.r.Limits.WriteEvery)
	}
	if _, err := t.r.status.Patch(ctx, e, next); err != nil {
		switch {
		case apierrors.IsConflict(err):
			t.behind = e.ResourceVersion
		case !apierrors.IsNotFound(err):
			t.r.log().Info("writing an expectation's status", "namespace", e.Namespace, "name", e.Name, "error", err)
		}
		return time.Now().Add(t.r.Limits.WriteEvery)
	}
	t.lastStatus, t.behind = time.Now(), e.ResourceVersion
	return time.Time{}
}

// normalized is s as the API server gives it back: times to the second,
// in UTC, so that a status written is not written again for nanoseconds.
func normalized(s v1alpha1.FileExpectationStatus) v1alpha1.FileExpectationStatus {
	blob, _ := json.Marshal(s) //nolint:errchkjson // plain data
	var out v1alpha1.FileExpectationStatus
	_ = json.Unmarshal(blob, &out)
	return out
}
