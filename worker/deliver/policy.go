package deliver

import (
	"context"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
)

// Targets are where an event goes: its sink, and the dead-letter sink
// ("" for none).
type Targets struct{ Sink, DeadLetter string }

// Verdict is what became of an event after one try.
type Verdict string

// An event's verdicts, named as sftpgate_worker_events_total counts them.
const (
	// Delivered: the sink answered 2xx.
	Delivered Verdict = "delivered"
	// DeadLettered: the sink failed it for good, the dead-letter sink
	// took it.
	DeadLettered Verdict = "dead_lettered"
	// Dropped: the sink refused it for good and there is no dead-letter
	// sink. It is never dropped for failing to answer.
	Dropped Verdict = "dropped"
	// Waiting: it is tried again at Result.RetryAt.
	Waiting Verdict = "waiting"
	// Denied: the dial policy refuses the sink's address; no try is made
	// until the sink or the policy changes.
	Denied Verdict = "denied"
)

// Result is how one try of an event ended.
type Result struct {
	Verdict Verdict
	// Attempts counts the failed tries to the sink, this one included:
	// what the caller stores with the event.
	Attempts int32
	// RetryAt is when a Waiting event is tried again.
	RetryAt time.Time
	// Err says why it was not delivered; Unreachable, that the sink did
	// not answer at all.
	Err         error
	Unreachable bool
}

// Ended says the event needs no more tries.
func (r Result) Ended() bool {
	return r.Verdict == Delivered || r.Verdict == DeadLettered || r.Verdict == Dropped
}

// Try is the one delivery policy of the worker's events, a watch's or a
// transfer's finishing one: it sends e, an event of namespace's that
// failed attempts tries before (as stored with it), once to its sink.
// A try that gets no answer, 408, 429 or 5xx waits for the backoff and is
// tried again; after set.Retry tries, the event goes to the dead-letter
// sink, or, without one (or when that fails too), is tried again at the
// backoff's longest, until the sink takes it. A sink that refuses the
// event (another 4xx) refuses it for good: it goes to the dead-letter
// sink at once or is dropped.
func (s *Sender) Try(ctx context.Context, namespace string, to Targets, e cloudevents.Event, set Settings, attempts int32) Result {
	out := s.Send(ctx, namespace, to.Sink, e, set.Timeout, set.Signing)
	switch {
	case out.Delivered:
		return s.count(Result{Verdict: Delivered, Attempts: attempts})
	case out.Denied:
		return Result{Verdict: Denied, Attempts: attempts, Err: out.Err}
	}
	s.countTry()
	r := Result{Verdict: Waiting, Attempts: attempts + 1, Err: out.Err, Unreachable: out.Status == 0}
	if out.Retry && r.Attempts <= set.Retry {
		r.RetryAt = time.Now().Add(Backoff(set.Policy, set.Delay, r.Attempts))
		return r
	}
	if to.DeadLetter != "" {
		dl := s.Send(ctx, namespace, to.DeadLetter, e, set.Timeout, set.Signing)
		if dl.Delivered {
			r.Verdict = DeadLettered
			return s.count(r)
		}
		r.Err, r.Unreachable = fmt.Errorf("the sink failed every try, and so does the dead-letter sink: %w", out.Err), false
	} else if !out.Retry {
		r.Verdict, r.Err = Dropped, fmt.Errorf("the sink refused the event, which was dropped: %w", out.Err)
		return s.count(r)
	}
	r.RetryAt = time.Now().Add(Backoff(set.Policy, set.Delay, r.Attempts))
	return r
}

// count counts r's verdict, when a counter is set.
func (s *Sender) count(r Result) Result {
	if s.Outcomes != nil {
		s.Outcomes.WithLabelValues(string(r.Verdict)).Inc()
	}
	return r
}

// countTry counts a failed try.
func (s *Sender) countTry() {
	if s.Outcomes != nil {
		s.Outcomes.WithLabelValues("failed").Inc()
	}
}
