package transfers

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/statuspatch"
	"github.com/sftpgate/sftpgate/internal/words"
	"github.com/sftpgate/sftpgate/worker/transfer"
)

// facts are what a run found about its transfer; the status is computed
// from them alone (setStatus), in one place.
type facts struct {
	// queued says the namespace runs as many transfers as it may;
	// overQuota that the web UI accounts do.
	queued, overQuota string
	// connection says why a connection cannot be used now.
	connection string
	// keys says which OpenPGP key's Secret is missing or unusable.
	keys string
	// retrying says why files wait for their next try.
	retrying string
	// overBudget says why the plan could not be stored: the namespace's
	// budget. No file is copied until it is.
	overBudget string
	// plan is the files and where each stands; nil before the listing.
	plan *transfer.Plan
	// outcome and message are the end, once every file ended (or the
	// source could not be listed for good): Succeeded or a failure's
	// reason. finished says the end is reported (the event was sent).
	outcome, message string
	finished         bool
	// eventDelivered and sinkURI are the finishing event's, once
	// finished.
	eventDelivered bool
	sinkURI        string
	// rate is the bytes per second over the last status write.
	rate int64
}

// setStatus sets t's conditions and counts from f.
func setStatus(t *v1alpha1.Transfer, f facts) {
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse}
	stalled, reconciling := false, true
	switch {
	case f.outcome == v1alpha1.ReasonSucceeded:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionTrue, f.outcome, f.message
		reconciling = !f.finished
	case f.outcome != "":
		ready.Reason, ready.Message, stalled = f.outcome, f.message, true
		reconciling = !f.finished
	case f.queued != "":
		ready.Reason, ready.Message = v1alpha1.ReasonQueued, f.queued
	case f.overQuota != "":
		ready.Reason, ready.Message = v1alpha1.ReasonOverQuota, f.overQuota
	case f.connection != "":
		ready.Reason, ready.Message, stalled = v1alpha1.ReasonConnectionNotReady, f.connection, true
		reconciling = false
	case f.keys != "":
		ready.Reason, ready.Message, stalled = v1alpha1.ReasonSecretNotFound, f.keys, true
		reconciling = false
	case f.overBudget != "":
		ready.Reason, ready.Message = v1alpha1.ReasonStateBudgetExceeded, f.overBudget
	case f.retrying != "":
		ready.Reason, ready.Message = v1alpha1.ReasonRetrying, f.retrying
	case f.plan == nil:
		ready.Reason, ready.Message = v1alpha1.ReasonTransferring, "listing the source"
	default:
		ready.Reason, ready.Message = v1alpha1.ReasonTransferring, "copying the files"
	}
	v1alpha1.SetSummary(&t.Status.Conditions, t.Generation, ready, reconciling, stalled)
	st := &t.Status
	st.ObservedGeneration = t.Generation
	st.BytesPerSecond = f.rate
	st.TriggeredBy = triggeredBy(t)
	if f.plan == nil {
		return
	}
	c := f.plan.Count()
	st.Files = v1alpha1.TransferFileCounts{Total: c.Total, Done: c.Done, Skipped: c.Skipped, Failed: c.Failed}
	st.Bytes = v1alpha1.TransferByteCounts{Total: c.Bytes, Done: c.BytesDone}
	st.Progress = progress(c)
	st.Failures, st.MoreFailures = nil, 0
	for i := range f.plan.Files {
		file := &f.plan.Files[i]
		if file.State != transfer.Failed {
			continue
		}
		if len(st.Failures) == v1alpha1.MaxTransferFailures {
			st.MoreFailures++
			continue
		}
		st.Failures = append(st.Failures, v1alpha1.TransferFailure{Path: file.Path, Reason: file.Reason, Message: statuspatch.Cut(file.Message, 512)})
	}
}

// triggeredBy names the watch that made t, from its owner reference.
func triggeredBy(t *v1alpha1.Transfer) *v1alpha1.TriggeredBy {
	if o := t.MadeBy(); o != nil {
		return &v1alpha1.TriggeredBy{Watch: o.Name, EventID: t.Annotations[v1alpha1.AnnotationEventID]}
	}
	return nil
}

// copied says every file of t ended (its Ready condition says how), though
// the end may not be reported yet: its finishing event may wait for its
// sink.
func copied(t *v1alpha1.Transfer) bool {
	ready := meta.FindStatusCondition(t.Status.Conditions, v1alpha1.ConditionReady)
	if ready == nil || ready.ObservedGeneration != t.Generation {
		return false
	}
	return ready.Status == metav1.ConditionTrue ||
		meta.IsStatusConditionTrue(t.Status.Conditions, v1alpha1.ConditionStalled) &&
			ready.Reason != v1alpha1.ReasonConnectionNotReady && ready.Reason != v1alpha1.ReasonSecretNotFound
}

// progress is files ended of the total, and the share of bytes done.
func progress(c transfer.Counts) string {
	return fmt.Sprintf("%d of %s, %s", c.Done+c.Skipped+c.Failed, words.Count(int64(c.Total), "file", "files"), words.Percent(c.BytesDone, c.Bytes))
}

// outcome is how a plan whose files all ended ends: Succeeded, or the
// failures' reason when they share one, else FilesFailed.
func outcome(p *transfer.Plan) (reason, message string) {
	c := p.Count()
	if c.Failed == 0 {
		return v1alpha1.ReasonSucceeded, fmt.Sprintf("%s done, %d skipped", words.Count(int64(c.Done), "file", "files"), c.Skipped)
	}
	reason = ""
	for i := range p.Files {
		f := &p.Files[i]
		if f.State != transfer.Failed {
			continue
		}
		switch {
		case reason == "":
			reason = f.Reason
		case reason != f.Reason:
			reason = v1alpha1.ReasonFilesFailed
		}
	}
	if reason == "" {
		reason = v1alpha1.ReasonFilesFailed
	}
	return reason, fmt.Sprintf("%d of %s failed every try (%d done, %d skipped)", c.Failed, words.Count(int64(c.Total), "file", "files"), c.Done, c.Skipped)
}
