package transfers

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/worker/deliver"
)

// EventTypePrefix starts the finishing event's type:
// dev.sftpgate.transfer.succeeded or .failed.
const EventTypePrefix = "dev.sftpgate.transfer."

// EventData is the finishing event's data, as JSON.
type EventData struct {
	Transfer string `json:"transfer"`
	// Reason is the Ready condition's: Succeeded, or why it failed.
	Reason  string                      `json:"reason"`
	Message string                      `json:"message"`
	Files   v1alpha1.TransferFileCounts `json:"files"`
	Bytes   v1alpha1.TransferByteCounts `json:"bytes"`
	// Failures lists the first files that failed.
	Failures    []v1alpha1.TransferFailure `json:"failures,omitempty"`
	Source      string                     `json:"source"`
	Destination string                     `json:"destination"`
}

// finishEvent is tr's finishing event. Its id is the same on every try
// and from every replica, so that receivers can drop repeats.
func finishEvent(tr *v1alpha1.Transfer, f facts) (cloudevents.Event, error) {
	e := cloudevents.NewEvent()
	sum := sha256.Sum256([]byte(string(tr.UID) + "\x00" + f.outcome))
	e.SetID(hex.EncodeToString(sum[:16]))
	kind := "failed"
	if f.outcome == v1alpha1.ReasonSucceeded {
		kind = "succeeded"
	}
	e.SetType(EventTypePrefix + kind)
	e.SetSource(fmt.Sprintf("/apis/%s/namespaces/%s/transfers/%s", v1alpha1.GroupVersion, tr.Namespace, tr.Name))
	e.SetSubject(tr.Name)
	e.SetTime(time.Now())
	probe := tr.DeepCopy()
	setStatus(probe, f)
	src := tr.Spec.Source
	data, err := json.Marshal(EventData{Transfer: tr.Name, Reason: f.outcome, Message: f.message,
		Files: probe.Status.Files, Bytes: probe.Status.Bytes, Failures: probe.Status.Failures,
		Source:      src.ConnectionRef.String() + ":" + src.What(),
		Destination: tr.Spec.Destination.ConnectionRef.String() + ":" + tr.Spec.Destination.Path})
	if err != nil {
		return e, err
	}
	return e, e.SetData(cloudevents.ApplicationJSON, data)
}

// finish reports the end of a transfer whose files all ended: it tries
// the finishing event (when the transfer has a sink) as deliver.Try says,
// its tries stored in the plan; once the event's tries ended, it writes
// the status with its completion time, then removes the plan. It returns
// how long to wait and whether all of that is done; if not, a later step
// does the rest, the event with the same id.
func (t *run) finish(ctx context.Context, tr *v1alpha1.Transfer) (time.Duration, bool) {
	f := facts{plan: t.plan, outcome: t.plan.Outcome, message: t.plan.Message}
	delivered := tr.Status.EventDelivered
	if sink := tr.Spec.Sink; sink != nil && !delivered {
		if t.nextEvent.After(time.Now()) {
			return time.Until(t.nextEvent), false
		}
		res, uri, err := t.notify(ctx, tr, f, *sink)
		if err == nil && !res.Ended() {
			err = res.Err
			t.mu.Lock()
			t.plan.EventAttempts, t.dirty = res.Attempts, true
			t.mu.Unlock()
			t.save(ctx, true)
		}
		if err != nil || !res.Ended() {
			t.setLastErr("the finishing event waits: " + err.Error())
			t.report(ctx, f)
			t.nextEvent = cmp.Or(res.RetryAt, time.Now().Add(idle))
			return time.Until(t.nextEvent), false
		}
		if delivered = res.Verdict == deliver.Delivered; !delivered {
			t.setLastErr("the finishing event: " + res.Err.Error())
		}
		f.sinkURI = uri
	}
	f.finished, f.eventDelivered = true, delivered
	t.mu.Lock()
	t.moving, t.rate = nil, 0
	t.mu.Unlock()
	if !t.report(ctx, f) {
		return idle, false
	}
	if err := t.r.States.Delete(ctx, string(t.uid)); err != nil {
		t.r.log().Error("removing a finished transfer's plan", "uid", t.uid, "error", err)
	}
	if t.r.Metrics != nil { // tests' runners may have none
		t.r.Metrics.TransfersFinished.WithLabelValues(f.outcome).Inc()
	}
	return 0, true
}

func (t *run) setLastErr(s string) {
	t.mu.Lock()
	t.lastErr = s
	t.mu.Unlock()
}

// notify tries tr's finishing event once on sink (and its dead-letter
// sink), after the tries its plan counts.
func (t *run) notify(ctx context.Context, tr *v1alpha1.Transfer, f facts, sink v1alpha1.Destination) (deliver.Result, string, error) {
	set, err := deliver.ReadSettings(ctx, t.r.Client, tr.Namespace, tr.Spec.Delivery, tr.Spec.SigningSecretRef)
	if err != nil {
		return deliver.Result{}, "", err
	}
	to := deliver.Targets{}
	if to.Sink, err = deliver.Resolve(ctx, t.r.Client, tr.Namespace, sink); err != nil {
		return deliver.Result{}, "", err
	}
	if dls := tr.Spec.Delivery.DeadLetterSink; dls != nil {
		if to.DeadLetter, err = deliver.Resolve(ctx, t.r.Client, tr.Namespace, *dls); err != nil {
			return deliver.Result{}, to.Sink, fmt.Errorf("the dead-letter sink: %w", err)
		}
	}
	e, err := finishEvent(tr, f)
	if err != nil {
		return deliver.Result{}, to.Sink, err
	}
	res := t.r.Sender.Try(ctx, t.key.Namespace, to, e, set, t.plan.EventAttempts)
	if res.Verdict == deliver.Denied {
		return res, to.Sink, fmt.Errorf("the sink's address is one the worker may not reach: %w", res.Err)
	}
	return res, to.Sink, nil
}
