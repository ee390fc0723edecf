package auditsinks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"reflect"
	"slices"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/auditstore"
	"github.com/sftpgate/sftpgate/internal/statuspatch"
	"github.com/sftpgate/sftpgate/worker/deliver"
)

// EventType is the type of every batch's CloudEvent.
const EventType = "dev.sftpgate.audit.batch"

// batchesPerStep bounds what one step delivers, so that the status is
// written and the Lease's loss seen between steps.
const batchesPerStep = 50

// statusEvery is how often counts alone are written to the status.
const statusEvery = 5 * time.Second

// outbox is the task of one namespace's records.
type outbox struct {
	r         *Runner
	namespace string

	// attempts counts the failed tries of the next batch; retryAt is when
	// it may be tried again.
	attempts int32
	retryAt  time.Time
	// failing says why the next batch waits, unreachable that the sink
	// did not answer at all; lastErr is the last failure, for people.
	failing     string
	unreachable bool
	lastErr     string
	// delivered and dropped count what this task delivered and dropped
	// since the status was last written.
	delivered, dropped int64
	lastDelivery       time.Time
	lastStatus         time.Time
	// lostRecorded names the segments whose unreadable records this task
	// recorded dropped: the cache of segments may not show the mark yet.
	lostRecorded map[string]bool
}

// facts are what a step found: the sink's conditions are computed from
// them alone, in setConditions.
type facts struct {
	invalid, sink, sinkDenied string
	// readFailed: the stored records could not be read this step.
	readFailed string
	sinkURI    string
	pending    int64
	// oldestPending is when the oldest undelivered record was made.
	oldestPending time.Time
}

// Step delivers what is due and removes what is no longer needed.
func (o *outbox) Step(ctx context.Context) (time.Duration, bool) {
	segments, err := o.r.Store.List(ctx, o.namespace)
	if err != nil {
		o.r.log().Error("listing audit records", "namespace", o.namespace, "error", err)
		return idle, false
	}
	for name := range o.lostRecorded {
		if !slices.ContainsFunc(segments, func(s auditstore.Segment) bool { return s.Name == name }) {
			delete(o.lostRecorded, name) // removed: its name is no longer needed
		}
	}
	sink := &v1alpha1.AuditSink{}
	err = o.r.Cache.Get(ctx, client.ObjectKey{Namespace: o.namespace, Name: v1alpha1.AuditSinkName}, sink)
	if apierrors.IsNotFound(err) || err == nil && sink.DeletionTimestamp != nil {
		o.prune(ctx, segments, false)
		return idle, false
	}
	if err != nil {
		o.r.log().Error("reading the AuditSink", "namespace", o.namespace, "error", err)
		return idle, false
	}
	var f facts
	wait := busy
	if slices.ContainsFunc(segments, func(s auditstore.Segment) bool { return s.Pending() > 0 }) || !settled(sink) {
		wait = o.deliver(ctx, sink, segments, &f)
	} else {
		// Nothing to send to a sink found good for this spec: its
		// address and Secret are not read again every second.
		f.sinkURI = sink.Status.SinkURI
	}
	o.prune(ctx, segments, true)
	for _, s := range segments {
		if s.Pending() > 0 && f.pending == 0 {
			f.oldestPending = s.Time
		}
		f.pending += int64(max(s.Pending(), 0))
	}
	o.report(ctx, sink, f)
	return wait, false
}

// settled says s's status is Ready for its current spec.
func settled(s *v1alpha1.AuditSink) bool {
	ready := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
	return ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == s.Generation
}

// Stop has nothing to store: what was delivered is marked on the
// segments as it is.
func (o *outbox) Stop(context.Context) {}

// deliver sends the segments' undelivered records in order, a batch at a
// time, until one fails or the step's share is spent; it says when to
// step next.
func (o *outbox) deliver(ctx context.Context, sink *v1alpha1.AuditSink, segments []auditstore.Segment, f *facts) time.Duration {
	set, err := deliver.ReadSettings(ctx, o.r.Client, o.namespace, sink.Spec.Delivery, sink.Spec.SigningSecretRef)
	if err != nil {
		f.invalid = err.Error()
		return time.Minute
	}
	to := deliver.Targets{}
	if to.Sink, err = deliver.Resolve(ctx, o.r.Client, o.namespace, sink.Spec.Sink); err != nil {
		f.sink = err.Error()
		return idle
	}
	f.sinkURI = to.Sink
	if dls := sink.Spec.Delivery.DeadLetterSink; dls != nil {
		if to.DeadLetter, err = deliver.Resolve(ctx, o.r.Client, o.namespace, *dls); err != nil {
			f.sink = "the dead-letter sink: " + err.Error()
			return idle
		}
	}
	if wait := time.Until(o.retryAt); wait > 0 {
		return wait
	}
	maxBatch := int(max(sink.Spec.MaxBatch, 1))
	batches := 0
	for i := range segments {
		seg := &segments[i]
		if seg.Pending() <= 0 {
			continue
		}
		records, err := o.read(ctx, seg)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			f.readFailed = "reading the stored records: " + err.Error()
			o.lastErr = f.readFailed
			return busy
		}
		start := seg.Delivered
		for seg.Delivered < len(records) {
			if batches == batchesPerStep || !o.r.Shard.Holds(itemOf(o.namespace)) {
				o.mark(ctx, seg, start)
				return 0
			}
			batch := batchOf(records[seg.Delivered:], maxBatch)
			res := o.r.Sender.Try(ctx, o.namespace, to, event(o.namespace, batch), set, o.attempts)
			batches++
			if res.Verdict == deliver.Denied {
				f.sinkDenied = "the sink's address is one the worker may not reach: " + res.Err.Error()
				o.lastErr = f.sinkDenied
				o.mark(ctx, seg, start)
				return idle
			}
			if res.Err != nil {
				o.lastErr = res.Err.Error()
			}
			if !res.Ended() {
				o.attempts, o.retryAt = res.Attempts, res.RetryAt
				o.failing, o.unreachable = res.Err.Error(), res.Unreachable
				o.mark(ctx, seg, start)
				return time.Until(res.RetryAt)
			}
			o.attempts, o.retryAt, o.failing, o.unreachable = 0, time.Time{}, "", false
			if res.Verdict == deliver.Dropped {
				// The sink refused the batch for good: its records are
				// lost to it, and the drop is itself a record.
				o.recordDrop(ctx, spansOf(batch), "the sink refused them")
			} else {
				o.delivered += int64(len(batch))
				o.lastDelivery = time.Now()
			}
			seg.Delivered += len(batch)
		}
		// Every record that could be read is delivered: what could not
		// be is named by a drop record (read).
		seg.Delivered = max(seg.Delivered, seg.Records)
		o.mark(ctx, seg, start)
	}
	return busy
}

// maxBatchBytes bounds a batch's records, whatever maxBatch allows: a
// record may take up to audit.MaxRecordBytes, and receivers refuse large
// bodies (nginx's default is 1 MiB).
const maxBatchBytes = 512 << 10

// batchOf is the first records that make one batch: at most maxBatch,
// and at most maxBatchBytes but for the first.
func batchOf(records []audit.Record, maxBatch int) []audit.Record {
	n, size := 0, 0
	for n < min(maxBatch, len(records)) {
		if size += len(records[n].Line()) + 1; n > 0 && size > maxBatchBytes {
			break
		}
		n++
	}
	return records[:n]
}

// read reads seg's records; what of it cannot be read is recorded as
// dropped, once, so that delivery goes past it and a receiver is told.
func (o *outbox) read(ctx context.Context, seg *auditstore.Segment) ([]audit.Record, error) {
	records, lost, err := o.r.Store.Read(ctx, *seg)
	if err != nil || len(lost) == 0 || seg.LostRecorded || o.lostRecorded[seg.Name] {
		return records, err
	}
	if o.lostRecorded == nil {
		o.lostRecorded = map[string]bool{}
	}
	o.lostRecorded[seg.Name] = true
	o.recordDrop(ctx, lost, "they could not be read")
	// Were this mark lost, the next step would name them again: a
	// second drop record of the same records, never none.
	if err := o.r.Store.MarkLostRecorded(ctx, *seg); err != nil && !apierrors.IsNotFound(err) {
		o.r.log().Error("marking unreadable audit records recorded", "namespace", o.namespace, "error", err)
	}
	seg.LostRecorded = true
	return records, nil
}

// mark notes on seg what was delivered of it since start.
func (o *outbox) mark(ctx context.Context, seg *auditstore.Segment, start int) {
	if seg.Delivered == start {
		return
	}
	if err := o.r.Store.MarkDelivered(ctx, *seg, seg.Delivered); err != nil && !apierrors.IsNotFound(err) {
		// Delivered again, with the same ids, by the next step.
		o.r.log().Error("marking audit records delivered", "namespace", o.namespace, "error", err)
	}
}

// event is batch's CloudEvent: its id names the records it carries, so
// that a batch sent again (after a crash before it was marked) has the
// same id.
func event(namespace string, batch []audit.Record) cloudevents.Event {
	first, last := batch[0], batch[len(batch)-1]
	sum := sha256.Sum256([]byte(first.Replica))
	e := cloudevents.NewEvent()
	e.SetID(fmt.Sprintf("%s-%d-%d", hex.EncodeToString(sum[:8]), first.Seq, last.Seq))
	e.SetType(EventType)
	e.SetSource(fmt.Sprintf("/apis/%s/namespaces/%s/auditsinks/%s", v1alpha1.GroupVersion, namespace, v1alpha1.AuditSinkName))
	e.SetSubject(first.Replica)
	e.SetTime(last.Time)
	_ = e.SetData(cloudevents.ApplicationJSON, batch) // records always encode
	return e
}

// prune removes what is no longer needed: past the newest Recent
// records (or half the namespace's audit budget), those delivered (all,
// without a sink); and, past the outbox's bound or nine tenths of the
// budget, the oldest undelivered, with a drop record saying which.
func (o *outbox) prune(ctx context.Context, segments []auditstore.Segment, hasSink bool) {
	budget := int64(math.MaxInt64)
	if o.r.Budget != nil {
		if b := o.r.Budget.Limit(ctx, o.namespace, true); b > 0 {
			budget = b
		}
	}
	undelivered, stored := 0, int64(0)
	for _, s := range segments {
		stored += s.Bytes
		if hasSink {
			undelivered += s.Pending()
		}
	}
	kept, keptBytes := 0, int64(0)
	for i := len(segments) - 1; i >= 0; i-- {
		s := segments[i]
		if hasSink && s.Pending() > 0 {
			continue
		}
		if kept < o.r.Limits.Recent && keptBytes+s.Bytes <= budget/2 {
			kept, keptBytes = kept+s.Records, keptBytes+s.Bytes
			continue
		}
		if o.remove(ctx, s) {
			stored -= s.Bytes
		}
	}
	if undelivered <= o.r.Limits.Outbox && stored <= budget-budget/10 {
		return
	}
	// Down to nine tenths of the bounds, in one drop record: the drop
	// record takes room too, and must not make the next step drop again.
	var dropped []audit.Span
	defer func() { o.recordDrop(ctx, dropped, "the outbox was full") }()
	for _, s := range segments {
		if undelivered <= o.r.Limits.Outbox-o.r.Limits.Outbox/10 && stored <= budget-budget/5 {
			return
		}
		if s.Pending() <= 0 {
			continue
		}
		records, lost, err := o.r.Store.Read(ctx, s)
		if err != nil {
			o.r.log().Error("reading audit records", "namespace", o.namespace, "error", err)
			return
		}
		if !o.remove(ctx, s) {
			return
		}
		dropped = append(dropped, spansOf(records[min(s.Delivered, len(records)):])...)
		if !s.LostRecorded {
			dropped = append(dropped, lost...)
		}
		undelivered -= s.Pending()
		stored -= s.Bytes
	}
}

func (o *outbox) remove(ctx context.Context, s auditstore.Segment) bool {
	if err := o.r.Store.Delete(ctx, s); err != nil {
		o.r.log().Error("removing audit records", "namespace", o.namespace, "error", err)
		return false
	}
	return true
}

// spansOf are the runs of Seq of records, a chain's in order.
func spansOf(records []audit.Record) []audit.Span {
	out := make([]audit.Span, 0, len(records))
	for _, r := range records {
		out = append(out, audit.Span{Replica: r.Replica, From: r.Seq, To: r.Seq})
	}
	return merged(out)
}

// merged is spans with each run that goes on where the one before it
// ended (of one chain) made one.
func merged(spans []audit.Span) []audit.Span {
	var out []audit.Span
	for _, s := range spans {
		if n := len(out); n > 0 && out[n-1].Replica == s.Replica && out[n-1].To+1 == s.From {
			out[n-1].To = s.To
			continue
		}
		out = append(out, s)
	}
	return out
}

// recordDrop records that the records of lost were dropped undelivered,
// and why.
func (o *outbox) recordDrop(ctx context.Context, lost []audit.Span, why string) {
	if len(lost) == 0 {
		return
	}
	var count int64
	for _, drop := range audit.DropRecords(o.namespace, merged(lost)) {
		count += drop.Count
		o.r.Audit.Record(ctx, drop)
	}
	o.dropped += count
	if o.r.Metrics != nil { // tests' runners may have none
		o.r.Metrics.AuditDropped.WithLabelValues("undelivered").Add(float64(count))
	}
	o.lastErr = fmt.Sprintf("%d records dropped undelivered: %s", count, why)
}

// report writes the sink's status: at once when its conditions change,
// its counts at most every statusEvery.
func (o *outbox) report(ctx context.Context, sink *v1alpha1.AuditSink, f facts) {
	next := sink.DeepCopy()
	setConditions(next, f, o)
	st := &next.Status
	st.Worker = o.r.Shard.Identity
	st.SinkURI = f.sinkURI
	st.Pending = f.pending
	st.Delivered += o.delivered
	st.Dropped += o.dropped
	if !o.lastDelivery.IsZero() {
		st.LastDeliveryTime = &metav1.Time{Time: o.lastDelivery.Truncate(time.Second)}
	}
	st.LastError = statuspatch.Cut(o.lastErr, 1024)
	st.OldestPendingTime = nil
	if !f.oldestPending.IsZero() {
		st.OldestPendingTime = &metav1.Time{Time: f.oldestPending.Truncate(time.Second)}
	}
	if reflect.DeepEqual(next.Status, sink.Status) {
		return
	}
	if reflect.DeepEqual(next.Status.Conditions, sink.Status.Conditions) && time.Since(o.lastStatus) < statusEvery {
		return
	}
	if _, err := o.r.status.Patch(ctx, sink, next); err != nil {
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			o.r.log().Info("writing an AuditSink's status", "namespace", o.namespace, "error", err)
		}
		return
	}
	o.delivered, o.dropped, o.lastStatus = 0, 0, time.Now()
}

// setConditions sets s's Ready, Reconciling and Stalled from f and the
// outbox's state, for s's current generation.
func setConditions(s *v1alpha1.AuditSink, f facts, o *outbox) {
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse}
	stalled := false
	switch {
	case f.invalid != "":
		ready.Reason, ready.Message, stalled = v1alpha1.ReasonInvalidSpec, f.invalid, true
	case f.sinkDenied != "":
		ready.Reason, ready.Message, stalled = v1alpha1.ReasonSinkNotAllowed, f.sinkDenied, true
	case f.sink != "":
		ready.Reason, ready.Message = v1alpha1.ReasonSinkNotFound, f.sink
	case o.failing != "" && o.unreachable:
		ready.Reason, ready.Message = v1alpha1.ReasonSinkUnreachable, o.failing
	case o.failing != "":
		ready.Reason, ready.Message = v1alpha1.ReasonDeliveryFailing, o.failing
	case f.readFailed != "":
		ready.Reason, ready.Message = v1alpha1.ReasonDeliveryFailing, f.readFailed
	case !f.oldestPending.IsZero() && time.Since(f.oldestPending) > o.r.Limits.StuckAfter:
		ready.Reason = v1alpha1.ReasonDeliveryStuck
		ready.Message = fmt.Sprintf("the oldest undelivered record has waited since %s, over %s", f.oldestPending.UTC().Format(time.RFC3339), o.r.Limits.StuckAfter)
	default:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionTrue, v1alpha1.ReasonDelivering, "the namespace's audit records go to the sink"
	}
	v1alpha1.SetSummary(&s.Status.Conditions, s.Generation, ready, false, stalled)
	s.Status.ObservedGeneration = s.Generation
}
