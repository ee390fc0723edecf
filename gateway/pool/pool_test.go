package pool

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/gateway/sftpdial"
	"github.com/sftpgate/sftpgate/hack/testsftp"
)

// newPool makes a pool of max sessions to an in-process SFTP server.
func newPool(t *testing.T, max int32) (*Pool, *testsftp.Server) {
	t.Helper()
	server := testsftp.Start(t)
	conn := &v1alpha1.SftpConnection{Spec: v1alpha1.SftpConnectionSpec{
		Host: server.Host, Port: server.Port, Username: server.User,
		HostKey: v1alpha1.HostKeyTrust{Trusted: []string{server.HostKeyLine()}},
		Limits:  v1alpha1.Limits{MaxConnections: max},
	}}
	secret := &corev1.Secret{Data: map[string][]byte{v1alpha1.SecretKeyPassword: []byte(server.Password)}}
	target, err := sftpdial.NewTarget(conn, secret)
	if err != nil {
		t.Fatal(err)
	}
	p := &Pool{dialer: &sftpdial.Dialer{}, target: target, max: int(max), wake: make(chan struct{}), lastUsed: time.Now()}
	t.Cleanup(p.Close)
	return p, server
}

func TestSessionsAreSharedUpToTheLimit(t *testing.T) {
	p, _ := newPool(t, 2)
	release := make(chan struct{})
	started := make(chan struct{}, 8)
	done := make(chan error, 8)
	for range 8 {
		go func() {
			done <- p.Do(context.Background(), true, func(*sftpdial.Session) error {
				started <- struct{}{}
				<-release
				return nil
			})
		}()
	}
	for range 8 {
		<-started // all eight run at once, on shared sessions
	}
	if n := p.Size(); n != 2 {
		t.Errorf("%d sessions, want the limit of 2", n)
	}
	close(release)
	for range 8 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func TestBrokenSessionIsReplacedAndIdempotentRetried(t *testing.T) {
	p, _ := newPool(t, 4)
	if err := p.Warm(context.Background()); err != nil {
		t.Fatal(err)
	}
	calls := 0
	err := p.Do(context.Background(), true, func(s *sftpdial.Session) error {
		calls++
		if calls == 1 {
			_ = s.Close()
			return &BrokenError{Err: errors.New("connection lost")}
		}
		_, err := s.SFTP.Getwd()
		return err
	})
	if err != nil || calls != 2 {
		t.Fatalf("err %v after %d calls, want a retry that succeeds", err, calls)
	}
	calls = 0
	err = p.Do(context.Background(), false, func(*sftpdial.Session) error {
		calls++
		return &BrokenError{Err: errors.New("connection lost")}
	})
	if calls != 1 || err == nil {
		t.Fatalf("a non-idempotent operation ran %d times", calls)
	}
}

func TestTimeoutClosesTheSession(t *testing.T) {
	p, _ := newPool(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := p.Do(ctx, true, func(s *sftpdial.Session) error {
		// A hung operation: it ends only when its session is closed.
		_ = s.SSH.Wait()
		return &BrokenError{Err: errors.New("closed")}
	})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if err := p.Do(context.Background(), true, func(s *sftpdial.Session) error {
		_, err := s.SFTP.Getwd()
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
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		p.mu.Lock()
		busy := len(p.sessions) == 1 && p.sessions[0].inflight > 0
		p.mu.Unlock()
		if !busy || time.Now().After(deadline) {
			break
		}
	}
	if p.Size() != 1 {
		t.Fatalf("a live session was dropped")
	}
	p.tend(0)
	if p.Size() != 0 {
		t.Fatalf("an idle session was kept")
	}
}
