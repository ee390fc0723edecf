// Package testsshd starts a real OpenSSH sshd on loopback for a test: its own
// config, host key, authorized_keys file and a free high port. It never
// touches the system's ssh service.
//
// sshd authenticates system users, so the fixture logs in as a dedicated
// user, sftpgate-test, which it creates on first use with a random password
// kept in a root-only file (/var/lib/sftpgate-test). That needs root (as in
// CI); elsewhere the tests that use it fail, saying so: a test that cannot
// run is never a pass. Remove the user with: userdel -r sftpgate-test.
package testsshd

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/sftpgate/sftpgate/hack/procs"
)

const (
	// User is the account tests log in as.
	User = "sftpgate-test"
	// sshdPath is absolute because sshd re-executes itself and insists on it.
	sshdPath  = "/usr/sbin/sshd"
	stateDir  = "/var/lib/sftpgate-test"
	startWait = 10 * time.Second
)

// Server is one running sshd.
type Server struct {
	Host string
	Port int32
	// Password of User.
	Password string
	// HostKey is the server's public host key; HostKeyLine is the same in
	// authorized_keys format.
	HostKey     ssh.PublicKey
	HostKeyLine string
	// Dir is an empty directory owned by User, removed after the test.
	Dir string
	// UID and GID are User's.
	UID, GID int

	confDir        string
	hostKeyFile    string
	authorizedKeys string

	config []string // lines beyond the fixed ones

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start starts an sshd for t and stops it when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t)
}

// StartWith is Start with more sshd_config lines, such as "MaxSessions 1".
func StartWith(t testing.TB, config ...string) *Server {
	t.Helper()
	if _, err := os.Stat(sshdPath); err != nil {
		t.Fatal("OpenSSH's sshd is not installed (apt-get install openssh-server; make test does it)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("the tests need root: sshd can only log in as another user when they run as root (sudo make test)")
	}
	password, uid, gid, err := ensureUser()
	if err != nil {
		t.Fatalf("preparing user %s: %v", User, err)
	}
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil { // sshd's privilege separation directory
		t.Fatal(err)
	}

	// sshd reads authorized_keys as the user logging in, and the user works
	// in Dir: both directories must be open to it (t.TempDir's are not).
	s := &Server{Host: "127.0.0.1", Password: password, UID: uid, GID: gid, config: config}
	s.confDir = openTempDir(t, "sftpgate-sshd-conf-", 0, 0)
	s.Dir = openTempDir(t, "sftpgate-sshd-data-", uid, gid)

	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	hostKeyFile := filepath.Join(s.confDir, "ssh_host_ed25519_key")
	if err := os.WriteFile(hostKeyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	s.HostKey = signer.PublicKey()
	s.HostKeyLine = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.HostKey)))
	s.authorizedKeys = filepath.Join(s.confDir, "authorized_keys")
	if err := os.WriteFile(s.authorizedKeys, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	s.hostKeyFile = hostKeyFile
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			log, _ := os.ReadFile(s.logFile())
			t.Logf("sshd log:\n%s", log)
		}
	})
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err == nil {
			err = s.start(port)
		}
		if err == nil {
			s.Port = int32(port)
			return s
		}
		if attempt == 4 || !errors.Is(err, errPortTaken) {
			t.Fatal(err)
		}
	}
}

// AuthorizeKey lets key log in as User.
func (s *Server) AuthorizeKey(t testing.TB, key ssh.PublicKey) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := os.OpenFile(s.authorizedKeys, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Write(ssh.MarshalAuthorizedKey(key)); err != nil {
		t.Fatal(err)
	}
}

// Restart stops sshd, dropping every connection, and starts it again on
// the same port with the same host key, as a server reboot would.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.stop()
	if err := s.start(int(s.Port)); err != nil {
		t.Fatal(err)
	}
}

var errPortTaken = errors.New("port taken")

func (s *Server) start(port int) error {
	config := filepath.Join(s.confDir, "sshd_config")
	pidFile := filepath.Join(s.confDir, "sshd.pid")
	conf := strings.Join(append([]string{
		"ListenAddress " + net.JoinHostPort(s.Host, strconv.Itoa(port)),
		"HostKey " + s.hostKeyFile,
		"PidFile " + pidFile,
		"AuthorizedKeysFile " + s.authorizedKeys,
		"AllowUsers " + User,
		"UsePAM no",
		"StrictModes no",
		"PasswordAuthentication yes",
		"KbdInteractiveAuthentication no",
		"PubkeyAuthentication yes",
		"PermitRootLogin no",
		"MaxStartups 100:30:200",
		"LogLevel VERBOSE",
		"Subsystem sftp internal-sftp",
	}, s.config...), "\n") + "\n"
	if err := os.WriteFile(config, []byte(conf), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(sshdPath, "-D", "-f", config, "-E", s.logFile())
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()

	addr := net.JoinHostPort(s.Host, strconv.Itoa(port))
	deadline := time.Now().Add(startWait)
	for !sshdAnswers(addr) {
		select {
		case <-exited:
			log, _ := os.ReadFile(s.logFile())
			if strings.Contains(string(log), "Address already in use") {
				return errPortTaken
			}
			return fmt.Errorf("sshd exited (%w): %s", waitErr, log)
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("sshd did not listen on %s within %s", addr, startWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	return nil
}

// CPUTime is the CPU time the running sshd's processes have used (the
// per-connection ones, which serve SFTP, included, and those that ended).
func (s *Server) CPUTime() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return procs.TreeCPUTime(s.cmd.Process.Pid)
}

func (s *Server) logFile() string { return filepath.Join(s.confDir, "sshd.log") }

// Logins counts the successful logins so far, from sshd's log: tests see
// through it whether connections are reused.
func (s *Server) Logins(t testing.TB) int {
	t.Helper()
	log, err := os.ReadFile(s.logFile())
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(log), "Accepted ")
}

// Freeze stops sshd and the processes serving its connections, as a
// server that hangs would: they answer nothing, and a new connection is
// accepted but never greeted, until thaw (which may be called again).
func (s *Server) Freeze(t testing.TB) (thaw func()) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		t.Fatal("sshd is not running")
	}
	// sshd first, so that it forks no more; then its children until no
	// new one shows (one stopped while forking leaves a child to stop).
	main := s.cmd.Process.Pid
	halt(t, main)
	stopped := map[int]bool{main: true}
	for more := true; more; {
		more = false
		for _, pid := range procs.Descendants(main) {
			if !stopped[pid] {
				halt(t, pid)
				stopped[pid], more = true, true
			}
		}
	}
	return func() {
		for pid := range stopped {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
}

// KillSessions kills the processes serving sshd's connections, as a crash
// of the server would, mid-operation: every connection drops, and sshd
// goes on accepting new ones.
func (s *Server) KillSessions(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		t.Fatal("sshd is not running")
	}
	for _, pid := range procs.Descendants(s.cmd.Process.Pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// halt stops pid and waits until it has stopped: SIGSTOP is delivered
// after kill returns, and a process still running may fork again.
func halt(t testing.TB, pid int) {
	t.Helper()
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	for deadline := time.Now().Add(time.Minute); !procs.Stopped(pid); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d did not stop on SIGSTOP", pid)
		}
	}
}

// stop ends sshd and the sessions it forked.
func (s *Server) stop() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	// sshd leaves the connections it forked running when it ends, in
	// sessions of their own: end them first, as a reboot would.
	for _, pid := range procs.Descendants(cmd.Process.Pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	// A frozen sshd would not act on SIGTERM.
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// sshdAnswers reports whether an OpenSSH server greets on addr: another
// process may have taken the port between freePort and sshd's start.
func sshdAnswers(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer func() { _ = c.Close() }()
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	banner := make([]byte, len("SSH-2.0-OpenSSH"))
	_, err = io.ReadFull(c, banner)
	return err == nil && string(banner) == "SSH-2.0-OpenSSH"
}

// openTempDir makes a directory that uid and gid own and everyone may
// read, removed after the test.
func openTempDir(t testing.TB, pattern string, uid, gid int) string {
	t.Helper()
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ensureUser creates User with a random password the first time, under a
// lock so that test binaries running in parallel agree on it, and returns
// the password and the user's ids.
func ensureUser() (password string, uid, gid int, err error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return "", 0, 0, err
	}
	lock, err := os.OpenFile(filepath.Join(stateDir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", 0, 0, err
	}
	defer func() { _ = lock.Close() }()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", 0, 0, err
	}
	passwordFile := filepath.Join(stateDir, "password")
	b, readErr := os.ReadFile(passwordFile)
	u, lookupErr := user.Lookup(User)
	if readErr != nil || lookupErr != nil {
		if lookupErr != nil {
			if out, err := exec.Command("useradd", "--create-home", "--shell", "/bin/sh", User).CombinedOutput(); err != nil {
				return "", 0, 0, fmt.Errorf("useradd: %w: %s", err, out)
			}
		}
		random := make([]byte, 18)
		_, _ = rand.Read(random)
		b = []byte(hex.EncodeToString(random))
		chpasswd := exec.Command("chpasswd")
		chpasswd.Stdin = strings.NewReader(User + ":" + string(b) + "\n")
		if out, err := chpasswd.CombinedOutput(); err != nil {
			return "", 0, 0, fmt.Errorf("chpasswd: %w: %s", err, out)
		}
		if err := os.WriteFile(passwordFile, b, 0o600); err != nil {
			return "", 0, 0, err
		}
		if u, err = user.Lookup(User); err != nil {
			return "", 0, 0, err
		}
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return strings.TrimSpace(string(b)), uid, gid, nil
}
