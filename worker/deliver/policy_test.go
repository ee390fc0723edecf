package deliver

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/sftpgate/sftpgate/hack/fixtures/testsink"
	"github.com/sftpgate/sftpgate/internal/egress"
	"github.com/sftpgate/sftpgate/internal/tenants"
)

// TestTry: the one policy. A sink that fails is tried again after the
// backoff; after the tries, the dead-letter sink takes the event, or,
// without one, it waits at the longest backoff; a sink that refuses the
// event refuses it for good.
func TestTry(t *testing.T) {
	sink, dead := testsink.Start(t), testsink.Start(t)
	s, err := New(egress.Policy{}, tenants.Kinds{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	set := Settings{Retry: 2, Delay: time.Second, Timeout: 5 * time.Second}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	down := "http://" + l.Addr().String()
	_ = l.Close()

	if r := s.Try(ctx, "default", Targets{Sink: sink.URL}, event("ok"), set, 1); r.Verdict != Delivered || r.Attempts != 1 || !r.Ended() {
		t.Errorf("a sink that takes it: %+v", r)
	}
	for _, c := range []struct {
		name     string
		to       Targets
		answer   int
		attempts int32
		want     Verdict
		backoff  time.Duration
	}{
		{"first failure", Targets{Sink: down, DeadLetter: dead.URL}, 200, 0, Waiting, time.Second},
		{"second failure", Targets{Sink: sink.URL}, 503, 1, Waiting, 2 * time.Second},
		{"tries spent, to the dead letters", Targets{Sink: sink.URL, DeadLetter: dead.URL}, 503, 2, DeadLettered, 0},
		{"tries spent, nowhere else", Targets{Sink: sink.URL}, 503, 2, Waiting, 4 * time.Second},
		{"refused, to the dead letters", Targets{Sink: sink.URL, DeadLetter: dead.URL}, 400, 0, DeadLettered, 0},
		{"refused, nowhere else", Targets{Sink: sink.URL}, 400, 0, Dropped, 0},
		{"tries spent, the dead letters down too", Targets{Sink: sink.URL, DeadLetter: down}, 503, 2, Waiting, 4 * time.Second},
	} {
		sink.SetAnswer(c.answer)
		before := time.Now()
		r := s.Try(ctx, "default", c.to, event(c.name), set, c.attempts)
		if r.Verdict != c.want || r.Attempts != c.attempts+1 || r.Err == nil || r.Ended() == (c.want == Waiting) {
			t.Errorf("%s: %+v, want %s after %d tries", c.name, r, c.want, c.attempts+1)
		}
		if c.want == Waiting && (r.RetryAt.Before(before.Add(c.backoff)) || r.RetryAt.After(time.Now().Add(c.backoff))) {
			t.Errorf("%s: tried again in %s, want %s", c.name, r.RetryAt.Sub(before), c.backoff)
		}
	}
}
