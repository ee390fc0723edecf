// Package testsink is an event sink for tests: the CloudEvents SDK's own
// receiver on loopback, keeping what it got.
package testsink

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/protocol"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
)

// Sink receives CloudEvents over HTTP at URL until its test ends,
// answering as SetAnswer says.
type Sink struct {
	URL      string
	mu       sync.Mutex
	requests []Request
	answer   int
	hold     *Held
}

// Request is an event the sink received, with its HTTP headers, when it
// came and the status it was answered with (0: taken, 200).
type Request struct {
	Event  cloudevents.Event
	Header http.Header
	At     time.Time
	Status int
}

// Held is an event the sink holds without answering, until Release.
type Held struct {
	// Arrived receives the event when it comes.
	Arrived chan cloudevents.Event
	release chan struct{}
	once    sync.Once
}

// Release answers the held event with 503 (its sender may be gone).
func (h *Held) Release() { h.once.Do(func() { close(h.release) }) }

// Start starts a sink on a free loopback port.
func Start(t testing.TB) *Sink {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Sink{URL: "http://" + l.Addr().String()}
	p, err := cehttp.New(cehttp.WithListener(l), cehttp.WithRequestDataAtContextMiddleware())
	if err != nil {
		t.Fatal(err)
	}
	c, err := cloudevents.NewClient(p)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		_ = c.StartReceiver(ctx, func(ctx context.Context, e cloudevents.Event) protocol.Result {
			s.mu.Lock()
			defer s.mu.Unlock()
			r := Request{Event: e, Header: cehttp.RequestDataFromContext(ctx).Header, At: time.Now(), Status: s.answer}
			if h := s.hold; h != nil {
				s.hold = nil
				s.mu.Unlock()
				h.Arrived <- e
				<-h.release
				s.mu.Lock()
				r.Status = http.StatusServiceUnavailable
			}
			s.requests = append(s.requests, r)
			if r.Status != 0 {
				return cehttp.NewResult(r.Status, "as the test says")
			}
			return nil
		})
	}()
	return s
}

// Requests are every event received, taken or not, in order of arrival.
func (s *Sink) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Taken are the events the sink took, in order of arrival.
func (s *Sink) Taken() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Status == 0 {
			out = append(out, r)
		}
	}
	return out
}

// Events are the events taken, in order of arrival.
func (s *Sink) Events() []cloudevents.Event {
	var out []cloudevents.Event
	for _, r := range s.Taken() {
		out = append(out, r.Event)
	}
	return out
}

// Subjects lists the taken events' types and subjects
// ("dev.sftpgate.file.created /in/a.csv"), in order of arrival.
func (s *Sink) Subjects() []string {
	var out []string
	for _, e := range s.Events() {
		out = append(out, e.Type()+" "+e.Subject())
	}
	return out
}

// HoldNext holds the next event that comes, unanswered, until the test
// releases it (or ends).
func (s *Sink) HoldNext(t testing.TB) *Held {
	h := &Held{Arrived: make(chan cloudevents.Event, 1), release: make(chan struct{})}
	t.Cleanup(h.Release)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold = h
	return h
}

// SetAnswer makes the sink answer status from now on (0: take the events).
func (s *Sink) SetAnswer(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answer = status
}
