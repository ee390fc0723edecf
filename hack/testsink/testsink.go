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

// Sink receives CloudEvents over HTTP at URL until its test ends; while
// failing is set it answers 503 and keeps nothing.
type Sink struct {
	URL     string
	mu      sync.Mutex
	events  []cloudevents.Event
	at      []time.Time
	failing bool
	hold    *Held
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
	p, err := cehttp.New(cehttp.WithListener(l))
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
		_ = c.StartReceiver(ctx, func(e cloudevents.Event) protocol.Result {
			s.mu.Lock()
			defer s.mu.Unlock()
			if h := s.hold; h != nil {
				s.hold = nil
				s.mu.Unlock()
				h.Arrived <- e
				<-h.release
				s.mu.Lock()
				return cehttp.NewResult(http.StatusServiceUnavailable, "held")
			}
			if s.failing {
				return cehttp.NewResult(http.StatusServiceUnavailable, "down for a moment")
			}
			s.events, s.at = append(s.events, e), append(s.at, time.Now())
			return nil
		})
	}()
	return s
}

// Events are the events received, in order of arrival.
func (s *Sink) Events() []cloudevents.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]cloudevents.Event(nil), s.events...)
}

// Arrived is when each of Events arrived.
func (s *Sink) Arrived() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.at...)
}

// Subjects lists the events' types and subjects ("dev.sftpgate.file.created
// /in/a.csv"), in order of arrival.
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

// SetFailing makes the sink answer 503 (true) or take events (false).
func (s *Sink) SetFailing(failing bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing = failing
}
