package framework

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sftpgate/sftpgate/hack/fixtures/procs"
)

// APIServer is the control plane's kube-apiserver, which a test may
// restart: the same command on the same port and certificates, so every
// client's kubeconfig holds.
type APIServer struct {
	cfg    *rest.Config
	client *http.Client
	etcd   string // etcd's metrics URL

	mu      sync.Mutex
	pid     int
	args    []string
	dir     string
	again   *exec.Cmd // the process Restart started, which envtest does not know
	againCh chan struct{}
	logPath string // what the processes Restart started wrote
}

func findAPIServer(env *envtest.Environment, logPath string) (*APIServer, error) {
	c, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		return nil, err
	}
	a := &APIServer{cfg: env.Config, client: c, logPath: logPath}
	if e := env.ControlPlane.Etcd; e != nil && e.URL != nil {
		a.etcd = e.URL.JoinPath("metrics").String()
	}
	for _, pid := range procs.Descendants(os.Getpid()) {
		exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
		if err != nil || filepath.Base(exe) != "kube-apiserver" {
			continue
		}
		raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err != nil {
			return nil, err
		}
		a.pid, a.args = pid, strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		a.dir, _ = os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
		return a, nil
	}
	return nil, errNoAPIServer
}

// Restart kills the API server (SIGKILL: nothing answered after) and
// starts it again, waiting until it is ready; one that ends while
// starting is started again, within startupTimeout. Watches of every
// client break; etcd keeps what was written.
func (a *APIServer) Restart(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return startUntilReady(ctx, func() (<-chan struct{}, error) { return a.start(ctx) }, a.waitReady, func() string {
		return fmt.Sprintf("kube-apiserver not ready again within %v, ending at each start (its log: %s)", startupTimeout, a.logPath)
	})
}

// start ends the running API server, and runs its command once more, its
// output in its log.
func (a *APIServer) start(ctx context.Context) (exited <-chan struct{}, err error) {
	_ = syscall.Kill(a.pid, syscall.SIGKILL)
	if a.again != nil {
		<-a.againCh
	}
	// Its port is free once it is gone.
	for procs.Alive(a.pid) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	log, err := os.OpenFile(a.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "--- start at %s\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(a.args[0], a.args[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = a.dir, log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("starting kube-apiserver again: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = log.Close(); close(done) }()
	a.again, a.againCh, a.pid = cmd, done, cmd.Process.Pid
	return done, nil
}

func (a *APIServer) waitReady(ctx context.Context, exited <-chan struct{}) error {
	readyz, err := url.JoinPath(a.cfg.Host, "readyz")
	if err != nil {
		return err
	}
	for {
		if a.get(ctx, readyz, nil) == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("kube-apiserver %w", errEnded)
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver not ready again (its log: %s): %w", a.logPath, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (a *APIServer) stopRestarted() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.again != nil {
		_ = a.again.Process.Kill()
		<-a.againCh
		a.again = nil
	}
}

// Pid is the running API server's process id.
func (a *APIServer) Pid() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pid
}

// Writes is how many requests that change something the API server has
// answered since it (last) started.
func (a *APIServer) Writes(ctx context.Context) (float64, error) {
	metrics, err := url.JoinPath(a.cfg.Host, "metrics")
	if err != nil {
		return 0, err
	}
	var sum float64
	err = a.get(ctx, metrics, func(line string) {
		rest, ok := strings.CutPrefix(line, "apiserver_request_total{")
		if !ok {
			return
		}
		for _, verb := range []string{"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION", "CREATE", "UPDATE"} {
			if strings.Contains(rest, `verb="`+verb+`"`) {
				v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
				sum += v
				return
			}
		}
	})
	return sum, err
}

// EtcdBytes is the size of etcd's database file (before compaction and
// defragmentation, as it grows).
func (a *APIServer) EtcdBytes(ctx context.Context) (float64, error) {
	if a.etcd == "" {
		return 0, fmt.Errorf("no etcd URL")
	}
	return scrape(ctx, http.DefaultClient, a.etcd, "etcd_mvcc_db_total_size_in_bytes")
}

// get reads url with the administrator's credentials, giving each line of
// the answer to line.
func (a *APIServer) get(ctx context.Context, url string, line func(string)) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		if line != nil {
			line(s.Text())
		}
	}
	return s.Err()
}
