package framework

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is one component replica, run from the built binary as a
// deployment runs it: a test may kill it, stop it and start it again, with
// the same flags and addresses.
type Process struct {
	// Name is the replica's name, as in its logs and Leases: gateway-0.
	Name string
	// URL is where it serves its API (the gateway's and the web UI's), or
	// its probes (the manager's and the worker's).
	URL string
	// MetricsURL is its Prometheus endpoint, empty where it has none.
	MetricsURL string

	binary  string
	args    []string
	env     []string // added to the test's environment
	ready   string   // the path that answers 200 once it serves
	logPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	starts int
}

// errNotRunning is Kill's and Stop's answer for a process already ended.
var errNotRunning = errors.New("not running")

// Start runs the process and waits until it says it is ready. A process
// that ends while starting (its API server not answering yet, say) is
// started again after a backoff, as the kubelet restarts a container,
// within startupTimeout.
func (p *Process) Start(ctx context.Context) error {
	return startUntilReady(ctx, p.launch, p.waitReady, func() string {
		return fmt.Sprintf("%s not ready within %v, ending at each start:\n%s", p.Name, startupTimeout, p.LogTail(40))
	})
}

// startUntilReady launches a process and waits with ready until it says
// it is ready; one that ends while starting is launched again after a
// backoff, as the kubelet restarts a container, within startupTimeout,
// past which the error is what gaveUp says.
func startUntilReady(ctx context.Context, launch func() (<-chan struct{}, error), ready func(context.Context, <-chan struct{}) error,
	gaveUp func() string) error {
	ctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	for backoff := time.Second; ; backoff = min(2*backoff, 10*time.Second) {
		exited, err := launch()
		if err != nil {
			return err
		}
		if err := ready(ctx, exited); !errors.Is(err, errEnded) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.New(gaveUp())
		case <-time.After(backoff):
		}
	}
}

// launch starts the process once.
func (p *Process) launch() (exited <-chan struct{}, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running() {
		return nil, fmt.Errorf("%s: already running", p.Name)
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	p.starts++
	fmt.Fprintf(logFile, "--- start %d at %s\n", p.starts, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.binary, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group: a signal the test's terminal sends reaches
	// the test, which stops the system in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("%s: %w", p.Name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logFile.Close(); close(done) }()
	p.cmd, p.exited = cmd, done
	return done, nil
}

// startupTimeout bounds a replica's start: the time to load its caches
// from a control plane under load, on two cores, or for its API server
// to come back.
const startupTimeout = 2 * time.Minute

// errEnded is a process that ended while starting.
var errEnded = errors.New("ended while starting")

func (p *Process) waitReady(ctx context.Context, exited <-chan struct{}) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if answers(ctx, p.URL+p.ready) {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s %w", p.Name, errEnded)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready within %v:\n%s", p.Name, startupTimeout, p.LogTail(40))
		case <-tick.C:
		}
	}
}

func answers(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Kill ends the process at once (SIGKILL), as a node's failure would: no
// chance to store or hand over anything.
func (p *Process) Kill() error { return p.signal(syscall.SIGKILL) }

// Stop asks the process to end (SIGTERM), as a rollout does, and waits.
func (p *Process) Stop() error { return p.signal(syscall.SIGTERM) }

// stopTimeout bounds a graceful stop: the components' shutdown graces are
// shorter.
const stopTimeout = time.Minute

func (p *Process) signal(sig syscall.Signal) error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("%s: %w", p.Name, errNotRunning)
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(stopTimeout):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("%s did not end within %v of %v", p.Name, stopTimeout, sig)
	}
	p.mu.Lock()
	p.cmd, p.exited = nil, nil
	p.mu.Unlock()
	return nil
}

// Running reports whether the process runs: not once it was killed or
// stopped, nor once it ended on its own (as a manager does that lost its
// leadership), when Start may start it again.
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running()
}

// running is Running, with p.mu held.
func (p *Process) running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Pid is the running process's id, 0 when it does not run.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running() {
		return 0
	}
	return p.cmd.Process.Pid
}

// RSS is the running process's resident memory in bytes.
func (p *Process) RSS() (int64, error) {
	pid := p.Pid()
	if pid == 0 {
		return 0, fmt.Errorf("%s: %w", p.Name, errNotRunning)
	}
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("%s: no VmRSS in /proc", p.Name)
}

// Metric is the sum of a metric's samples, as its /metrics shows them.
func (p *Process) Metric(ctx context.Context, name string) (float64, error) {
	if p.MetricsURL == "" {
		return 0, fmt.Errorf("%s has no metrics", p.Name)
	}
	return scrape(ctx, http.DefaultClient, p.MetricsURL, name)
}

// scrape sums the samples of a metric from a Prometheus text endpoint.
func scrape(ctx context.Context, c *http.Client, url, name string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %s", url, resp.Status)
	}
	var sum float64
	found := false
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		line := s.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q: %w", url, line, err)
		}
		sum, found = sum+v, true
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("%s: no %s", url, name)
	}
	return sum, nil
}

// LogTail is the last lines the process (in all its starts) wrote, but
// its audit records: they are kept whatever the log's level, and would
// hide what went wrong.
func (p *Process) LogTail(lines int) string {
	b, _ := os.ReadFile(p.logPath)
	var all [][]byte
	for line := range bytes.SplitSeq(bytes.TrimRight(b, "\n"), []byte("\n")) {
		if !bytes.Contains(line, []byte(`"msg":"audit"`)) {
			all = append(all, line)
		}
	}
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return string(bytes.Join(all, []byte("\n")))
}

// LogPath is the file holding everything the process wrote.
func (p *Process) LogPath() string { return p.logPath }
