// Package testsink is an event sink for tests: the CloudEvents SDK's own
// receiver on loopback, keeping what it got.
package testsink

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"

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
	failing bool
}

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
			if s.failing {
				return cehttp.NewResult(http.StatusServiceUnavailable, "down for a moment")
			}
			s.events = append(s.events, e)
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

// Subjects lists the events' types and subjects ("dev.sftpgate.file.created
// /in/a.csv"), in order of arrival.
func (s *Sink) Subjects() []string {
	var out []string
	for _, e := range s.Events() {
		out = append(out, e.Type()+" "+e.Subject())
	}
	return out
}

// SetFailing makes the sink answer 503 (true) or take events (false).
func (s *Sink) SetFailing(failing bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing = failing
}
