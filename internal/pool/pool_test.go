package pool

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/internal/egress"
	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/recovery"
	"github.com/sftpgate/sftpgate/internal/sftpdial"
)

// newPool makes a pool of max sessions to an in-process SFTP server.
func newPool(t *testing.T, max int32) (*Pool, *testsftp.Server) {
	t.Helper()
	server := testsftp.Start(t)
	return poolTo(t, server, server.Port, max), server
}

// poolTo makes a pool of max sessions that dials port on server's host, with
// server's credentials and host key.
func poolTo(t *testing.T, server *testsftp.Server, port, max int32) *Pool {
	t.Helper()
	target := testsftp.Target(t, server.Host, port, server.User, server.Password, server.HostKeyLine())
	p := &Pool{target: (&sftpdial.Dialer{}).For(target), share: sessionShare, most: sessionMax, max: int(max), maxWaiting: DefaultMaxWaiting, wake: make(chan struct{}), lastUsed: time.Now()}
	t.Cleanup(p.Close)
	return p
}

// hold runs ops at once on p and returns when all have started, with a
// function that lets them finish and checks they succeeded.
func hold(t *testing.T, p *Pool, ops ...Op) (finish func()) {
	t.Helper()
	release := make(chan struct{})
	started := make(chan struct{}, len(ops))
	done := make(chan error, len(ops))
	for _, op := range ops {
		go func() {
			done <- p.Do(context.Background(), op, func(files.Session) error {
				started <- struct{}{}
				<-release
				return nil
			})
		}()
	}
	for range ops {
		<-started
	}
	return func() {
		close(release)
		for range ops {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestSmallOperationsShareASession(t *testing.T) {
	p, _ := newPool(t, 4)
	// A burst on a cold pool: one dial, which the others wait for.
	finish := hold(t, p, slices.Repeat([]Op{{}}, sessionShare)...)
	if n := p.Size(); n != 1 {
		t.Errorf("%d operations opened %d sessions, want 1", sessionShare, n)
	}
	finish()
	finish = hold(t, p, slices.Repeat([]Op{{}}, 2*sessionShare+1)...)
	if n := p.Size(); n != 3 {
		t.Errorf("%d operations have %d sessions, want 3", 2*sessionShare+1, n)
	}
	finish()
}

// TestBurstGetsTheFailedDialsError: requests that waited for a dial the
// server failed get its error at once, rather than dialling again one
// after the other.
func TestBurstGetsTheFailedDialsError(t *testing.T) {
	server := testsftp.Start(t)
	// Not an SSH server: it takes a connection, says nothing, and hangs up
	// once the whole burst waits for the dial.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	var accepted atomic.Int32
	conns := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			conns <- c
		}
	}()
	p := poolTo(t, server, int32(l.Addr().(*net.TCPAddr).Port), 4)
	errs := make(chan error, 8)
	for range 8 {
		go func() { errs <- p.Do(context.Background(), Op{}, func(files.Session) error { return nil }) }()
	}
	testkit.EventuallyFound(t, "8 operations wait for the dial", func() (bool, string) {
		p.mu.Lock()
		waiting := p.expecting
		p.mu.Unlock()
		return waiting == 8, fmt.Sprint(waiting)
	})
	_ = (<-conns).Close()
	for range 8 {
		var dialErr *egress.Error
		if err := <-errs; !errors.As(err, &dialErr) {
			t.Errorf("err = %v, want the dial's error", err)
		}
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("%d dials for one burst, want 1", n)
	}
}

func TestStreamsGetASessionEachUpToTheLimit(t *testing.T) {
	p, _ := newPool(t, 2)
	if err := p.Warm(context.Background()); err != nil {
		t.Fatal(err)
	}
	// All run at once: the third stream and the small operations share.
	finish := hold(t, p, Op{Stream: true}, Op{Stream: true}, Op{Stream: true}, Op{}, Op{})
	if n := p.Size(); n != 2 {
		t.Errorf("%d sessions, want the limit of 2", n)
	}
	finish()
}

func TestBrokenSessionIsReplacedAndIdempotentRetried(t *testing.T) {
	p, _ := newPool(t, 4)
	if err := p.Warm(context.Background()); err != nil {
		t.Fatal(err)
	}
	calls := 0
	err := p.Do(context.Background(), Op{Idempotent: true}, func(s files.Session) error {
		calls++
		if calls == 1 {
			_ = s.Close()
			return &BrokenError{Err: errors.New("connection lost")}
		}
		_, err := s.FS().RealPath(".")
		return err
	})
	if err != nil || calls != 2 {
		t.Fatalf("err %v after %d calls, want a retry that succeeds", err, calls)
	}
	calls = 0
	err = p.Do(context.Background(), Op{}, func(files.Session) error {
		calls++
		return &BrokenError{Err: errors.New("connection lost")}
	})
	if calls != 1 || err == nil {
		t.Fatalf("a non-idempotent operation ran %d times", calls)
	}
}

func TestTimeoutClosesTheSession(t *testing.T) {
	p, _ := newPool(t, 1)
	err := p.Do(context.Background(), Op{Idempotent: true, Timeout: 100 * time.Millisecond}, func(s files.Session) error {
		// A hung operation: it ends only when its session is closed.
		_ = s.(*sftpdial.Session).SSH.Wait()
		return &BrokenError{Err: errors.New("closed")}
	})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if err := p.Do(context.Background(), Op{Idempotent: true}, func(s files.Session) error {
		_, err := s.FS().RealPath(".")
		return err
	}); err != nil {
		t.Fatalf("the pool did not recover: %v", err)
	}
}

func TestIdleSessionsAreClosed(t *testing.T) {
	p, _ := newPool(t, 2)
	if err := p.Warm(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.tend(time.Hour)
	// Wait for the keepalive's answer, which frees the session again.
	testkit.Eventually(t, "the session is idle", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.sessions) != 1 || p.sessions[0].load == 0
	})
	if p.Size() != 1 {
		t.Fatalf("a live session was dropped")
	}
	p.tend(0)
	if p.Size() != 0 {
		t.Fatalf("an idle session was kept")
	}
}

// TestKeepalivesDoNotKeepASessionOpen: a session only kept alive is
// idle, and closes once idle for long enough; a keepalive every half of
// it had kept every session a burst opened for the pool's life (chaos
// seed 2: a worker's SSH connections grew at rest).
func TestKeepalivesDoNotKeepASessionOpen(t *testing.T) {
	p, _ := newPool(t, 2)
	if err := p.Warm(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	used := p.sessions[0].lastUsed
	p.mu.Unlock()
	p.tend(time.Hour)
	testkit.Eventually(t, "the keepalive is answered", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.sessions) != 1 || p.sessions[0].load == 0
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.sessions) != 1 || !p.sessions[0].lastUsed.Equal(used) {
		t.Fatalf("a keepalive counted as a use of the session")
	}
}

// TestPanicFailsOnlyItsOperation: an operation that panics returns
// recovery.ErrPanic, and its session is released for the next.
func TestPanicFailsOnlyItsOperation(t *testing.T) {
	p, _ := newPool(t, 1)
	err := p.Do(context.Background(), Op{}, func(files.Session) error { panic("a bug") })
	if !errors.Is(err, recovery.ErrPanic) {
		t.Fatalf("err = %v, want recovery.ErrPanic", err)
	}
	p.mu.Lock()
	load := p.sessions[0].load
	p.mu.Unlock()
	if load != 0 {
		t.Errorf("the session's load is %d after the panic, want 0", load)
	}
	if err := p.Do(context.Background(), Op{}, func(s files.Session) error {
		_, err := s.FS().RealPath(".")
		return err
	}); err != nil {
		t.Fatalf("the next operation: %v", err)
	}
}

// TestQueueIsBounded: with every session as busy as it may be, requests
// wait in a queue of MaxWaiting; past it they are refused at once, and a
// request whose client goes away leaves it.
func TestQueueIsBounded(t *testing.T) {
	p, _ := newPool(t, 1)
	p.maxWaiting = 1
	finish := hold(t, p, Op{Stream: true}, Op{Stream: true})
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan error)
	go func() { waited <- p.Do(ctx, Op{}, func(files.Session) error { return nil }) }()
	testkit.EventuallyFound(t, "a request waits in the queue", func() (bool, string) {
		p.mu.Lock()
		queued := p.waiting
		p.mu.Unlock()
		return queued == 1, fmt.Sprint(queued)
	})
	if err := p.Do(context.Background(), Op{}, func(files.Session) error { return nil }); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("a request past the queue: %v, want ErrQueueFull", err)
	}
	cancel()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Fatalf("a waiting request whose client went away: %v", err)
	}
	finish()
	if err := p.Do(context.Background(), Op{}, func(files.Session) error { return nil }); err != nil {
		t.Fatalf("once the session has room: %v", err)
	}
}

// TestSmallOperationsPackIntoOneSession: the sessions two streams left
// idle do not spread small operations: they share the busiest session.
func TestSmallOperationsPackIntoOneSession(t *testing.T) {
	p, _ := newPool(t, 2)
	hold(t, p, Op{Stream: true}, Op{Stream: true})()
	if n := p.Size(); n != 2 {
		t.Fatalf("%d sessions after two streams, want 2", n)
	}
	first := make(chan files.Session)
	release := make(chan struct{})
	go func() {
		_ = p.Do(context.Background(), Op{}, func(s files.Session) error {
			first <- s
			<-release
			return nil
		})
	}()
	busy := <-first
	var second files.Session
	if err := p.Do(context.Background(), Op{}, func(s files.Session) error { second = s; return nil }); err != nil {
		t.Fatal(err)
	}
	close(release)
	if second != busy {
		t.Error("a small operation went to an idle session, not the busy one with room")
	}
}

// TestNoWaitTakesOnlyASessionAtHand: an operation that must not wait is
// refused at once where another would queue, and served where a session
// has room.
func TestNoWaitTakesOnlyASessionAtHand(t *testing.T) {
	p, _ := newPool(t, 1)
	finish := hold(t, p, Op{Stream: true}, Op{Stream: true})
	if err := p.Do(context.Background(), Op{Stream: true, NoWait: true}, func(files.Session) error { return nil }); !errors.Is(err, ErrBusy) {
		t.Fatalf("a stream with every session full: %v, want ErrBusy", err)
	}
	finish()
	if err := p.Do(context.Background(), Op{Stream: true, NoWait: true}, func(files.Session) error { return nil }); err != nil {
		t.Fatalf("once the session has room: %v", err)
	}
}

// TestOnePoolMetricPerConnection: a connection deleted and made again
// under its name has two pools for a while, reported as one connection:
// their sessions and queues added up, and the operations they share.
func TestOnePoolMetricPerConnection(t *testing.T) {
	ops := &opStats{}
	old, made := &Pool{namespace: "team", name: "box", sessions: []*session{{}}, ops: ops}, &Pool{namespace: "team", name: "box", waiting: 2, ops: ops}
	old.ops.observe(answered, false, 2*time.Millisecond)
	old.ops.observe(failed, false, time.Minute)
	made.ops.observe(answered, false, 50*time.Millisecond)
	made.ops.observe(answered, true, time.Hour) // a stream: counted, not timed
	made.ops.observe(uncounted, false, time.Second)
	p := &Pools{entries: map[types.UID]*entry{"old": {pool: old}, "new": {pool: made}}}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(p); err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP sftpgate_gateway_pool_operation_duration_seconds How long operations on each connection's server took, from the wait for a session to the answer.
# TYPE sftpgate_gateway_pool_operation_duration_seconds histogram
sftpgate_gateway_pool_operation_duration_seconds_bucket{name="box",namespace="team",le="0.0025"} 1
sftpgate_gateway_pool_operation_duration_seconds_bucket{name="box",namespace="team",le="0.01"} 1
sftpgate_gateway_pool_operation_duration_seconds_bucket{name="box",namespace="team",le="0.025"} 1
sftpgate_gateway_pool_operation_duration_seconds_bucket{name="box",namespace="team",le="0.1"} 2
sftpgate_gateway_pool_operation_duration_seconds_bucket{name="box",namespace="team",le="0.25"} 2
sftpgate_gateway_pool_operation_duration_seconds_bucket{name="box",namespace="team",le="1"} 2
sftpgate_gateway_pool_operation_duration_seconds_bucket{name="box",namespace="team",le="2.5"} 2
sftpgate_gateway_pool_operation_duration_seconds_bucket{name="box",namespace="team",le="10"} 2
sftpgate_gateway_pool_operation_duration_seconds_bucket{name="box",namespace="team",le="+Inf"} 3
sftpgate_gateway_pool_operation_duration_seconds_sum{name="box",namespace="team"} 60.052
sftpgate_gateway_pool_operation_duration_seconds_count{name="box",namespace="team"} 3
# HELP sftpgate_gateway_pool_operations_total Operations on each connection's server, by result: answered (whatever the server said), or failed without an answer (no session, one that broke, a timeout).
# TYPE sftpgate_gateway_pool_operations_total counter
sftpgate_gateway_pool_operations_total{name="box",namespace="team",result="answered"} 3
sftpgate_gateway_pool_operations_total{name="box",namespace="team",result="failed"} 1
# HELP sftpgate_gateway_pool_sessions Open sessions to each connection's server.
# TYPE sftpgate_gateway_pool_sessions gauge
sftpgate_gateway_pool_sessions{name="box",namespace="team"} 1
# HELP sftpgate_gateway_pool_waiting Operations waiting for a session of each connection, all of whose sessions are busy.
# TYPE sftpgate_gateway_pool_waiting gauge
sftpgate_gateway_pool_waiting{name="box",namespace="team"} 2
`)); err != nil {
		t.Error(err)
	}
}

// TestOperationsCounted: an operation the server answered counts as
// answered, whatever it said, and one whose session broke as failed;
// one the pool's bounds refused, or whose caller left while waiting, not
// at all. Streams are counted, not timed.
func TestOperationsCounted(t *testing.T) {
	p, _ := newPool(t, 1)
	p.ops = &opStats{}
	refused := errors.New("no such file")
	_ = p.Do(context.Background(), Op{}, func(files.Session) error { return nil })
	_ = p.Do(context.Background(), Op{}, func(files.Session) error { return refused })
	_ = p.Do(context.Background(), Op{}, func(files.Session) error { return &BrokenError{Err: refused} })
	finish := hold(t, p, Op{Stream: true}, Op{Stream: true})
	_ = p.Do(context.Background(), Op{Stream: true, NoWait: true}, func(files.Session) error { return nil })
	left, cancel := context.WithCancel(context.Background())
	cancel()
	_ = p.Do(left, Op{Stream: true}, func(files.Session) error { return nil })
	finish()
	timed := uint64(0)
	for i := range p.ops.under {
		timed += p.ops.under[i].Load()
	}
	if answered, failed := p.ops.answered.Load(), p.ops.failed.Load(); answered != 2+2 || failed != 1 || timed != 3 {
		t.Errorf("%d answered, %d failed, %d timed; want 4 (two, and the held streams), 1 and 3", answered, failed, timed)
	}
}
