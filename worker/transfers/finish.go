package transfers

import (
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
		Source:      src.ConnectionRef.Name + ":" + src.What(),
		Destination: tr.Spec.Destination.ConnectionRef.Name + ":" + tr.Spec.Destination.Path})
	if err != nil {
		return e, err
	}
	return e, e.SetData(cloudevents.ApplicationJSON, data)
}

// finish reports the end of a transfer whose files all ended: it sends
// the event (when the transfer has a sink), then writes the status with
// its completion time, then removes the plan. It reports whether all of
// that is done; if not, the next step does it again, the event with the
// same id.
func (t *run) finish(ctx context.Context, tr *v1alpha1.Transfer) bool {
	f := facts{plan: t.plan, outcome: t.plan.Outcome, message: t.plan.Message}
	delivered := tr.Status.EventDelivered
	sinkURI := ""
	if sink := tr.Spec.Sink; sink != nil && !delivered {
		var err error
		if delivered, sinkURI, err = t.notify(ctx, tr, f, *sink); err != nil {
			t.mu.Lock()
			t.lastErr = "the finishing event: " + err.Error()
			t.mu.Unlock()
		}
	}
	f.finished, f.eventDelivered, f.sinkURI = true, delivered, sinkURI
	t.mu.Lock()
	t.moving, t.rate = nil, 0
	t.mu.Unlock()
	if !t.report(ctx, f) {
		return false
	}
	if err := t.r.States.Delete(ctx, string(t.uid)); err != nil {
		t.r.log().Error("removing a finished transfer's plan", "uid", t.uid, "error", err)
	}
	return true
}

// notify sends tr's finishing event to sink, trying as its delivery says,
// then to its dead-letter sink.
func (t *run) notify(ctx context.Context, tr *v1alpha1.Transfer, f facts, sink v1alpha1.Destination) (bool, string, error) {
	set, err := deliver.ReadSettings(ctx, t.r.Client, tr.Namespace, tr.Spec.Delivery, tr.Spec.SigningSecretRef)
	if err != nil {
		return false, "", err
	}
	uri, err := deliver.Resolve(ctx, t.r.Client, tr.Namespace, sink)
	if err != nil {
		return false, "", err
	}
	e, err := finishEvent(tr, f)
	if err != nil {
		return false, uri, err
	}
	var out deliver.Outcome
	for try := int32(0); try <= set.Retry; try++ {
		if try > 0 {
			select {
			case <-ctx.Done():
				return false, uri, ctx.Err()
			case <-time.After(deliver.Backoff(set.Policy, set.Delay, try)):
			}
		}
		out = t.r.Sender.Send(ctx, t.key.Namespace, uri, e, set.Timeout, set.Signing)
		if out.Delivered {
			t.r.Metrics.Events.WithLabelValues("delivered").Inc()
			return true, uri, nil
		}
		t.r.Metrics.Events.WithLabelValues("failed").Inc()
		if !out.Retry {
			break
		}
	}
	if dls := tr.Spec.Delivery.DeadLetterSink; dls != nil {
		if dl, err := deliver.Resolve(ctx, t.r.Client, tr.Namespace, *dls); err == nil {
			if t.r.Sender.Send(ctx, t.key.Namespace, dl, e, set.Timeout, set.Signing).Delivered {
				t.r.Metrics.Events.WithLabelValues("dead_lettered").Inc()
				return false, uri, fmt.Errorf("the sink failed every try; the event went to the dead-letter sink")
			}
		}
	}
	t.r.Metrics.Events.WithLabelValues("dropped").Inc()
	if out.Err != nil {
		return false, uri, fmt.Errorf("the sink failed every try: %w", out.Err)
	}
	return false, uri, fmt.Errorf("the sink failed every try (HTTP %d)", out.Status)
}
