package bench

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sftpgate/sftpgate/hack/fixtures/filemodel"
)

var (
	soakDuration = flag.Duration("soak", 10*time.Minute, "How long TestSoak runs (make soak SOAK=...).")
	soakRestarts = flag.Duration("soak-restart-every", time.Minute, "How often TestSoak restarts sshd.")
)

// Soak load: this many clients, each with its own directory of files.
const (
	soakClients = 64
	soakFiles   = 6
)

// TestSoak drives the gateway with mixed commands, text and raw, at
// concurrency 64 against a real sshd restarted every minute, and checks
// every answer against a model of what the files hold: a command the
// server's failure cut off may or may not have taken effect, never half.
// It prints the requests, the wrong answers (none allowed), the retryable
// errors, and the gateway's RSS and goroutines after the first minute and
// at the end.
func TestSoak(t *testing.T) {
	binary := os.Getenv("SFTPGATE_BENCH_BINARY")
	if binary == "" {
		t.Fatal("run it with make soak, which builds the binary it drives")
	}
	// The gateway's warnings and errors, for a run that fails.
	gwLog, err := os.Create(filepath.Join(t.TempDir(), "gateway.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logged, _ := os.ReadFile(gwLog.Name())
			t.Logf("the gateway's warnings and errors:\n%s", logged)
		}
	})
	r := startRig(t, binary, "soak", map[string]string{"soak": ""}, &warnings{w: gwLog})
	sshd, token, gw, addr, metricsAddr := r.sshd, r.token, r.gateway, r.addr, r.metricsAddr
	c := &filemodel.Client{URLs: []string{"http://" + addr + "/soak/"}, Token: token, ID: "soak",
		HTTP: &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: soakClients}}}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if status, _ := c.JSON("ping", `{}`); status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the gateway does not serve the connection")
		}
	}

	var (
		stats    filemodel.Stats
		restarts int
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range soakClients {
		m := filemodel.New(fmt.Sprintf("w%02d", w), soakFiles, uint64(w))
		for status := 0; status != http.StatusOK; {
			status, _ = c.JSON("mkdir", fmt.Sprintf(`{"path": %q}`, m.Dir))
		}
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				m.Step(c, &stats, t.Errorf)
			}
		})
	}
	sample := func() (int64, int64) {
		rss, _ := currentRSS(gw.Process.Pid)
		return rss, int64(scrape(t, metricsAddr, "go_goroutines"))
	}
	start := time.Now()
	var firstRSS, firstGoroutines int64
	for n := 1; time.Since(start) < *soakDuration; n++ {
		time.Sleep(min(*soakRestarts, *soakDuration-time.Since(start)))
		if n == 1 {
			firstRSS, firstGoroutines = sample()
		}
		if time.Since(start) < *soakDuration {
			sshd.Restart(t)
			restarts++
		}
	}
	endRSS, endGoroutines := sample()
	close(stop)
	wg.Wait()

	fmt.Printf("\nsoak: %s at concurrency %d, sshd restarted %d times\n", soakDuration.String(), soakClients, restarts)
	fmt.Printf("  requests            %d\n", stats.Requests.Load())
	fmt.Printf("  wrong answers       %d (must be 0)\n", stats.Wrong.Load())
	fmt.Printf("  retryable errors    %d (502/503/504)\n", stats.Retryable.Load())
	fmt.Printf("  gateway RSS         %d MB after the first %s, %d MB at the end\n", firstRSS>>20, soakRestarts.String(), endRSS>>20)
	fmt.Printf("  gateway goroutines  %d after the first %s, %d at the end\n\n", firstGoroutines, soakRestarts.String(), endGoroutines)
	if stats.Wrong.Load() > 0 {
		t.Errorf("%d wrong answers", stats.Wrong.Load())
	}
	// Flat: no more than the load's own share more at the end.
	if endGoroutines > firstGoroutines+2*soakClients || endRSS > 2*firstRSS {
		t.Errorf("the gateway grew: %d to %d goroutines, %d to %d MB", firstGoroutines, endGoroutines, firstRSS>>20, endRSS>>20)
	}
}

// warnings passes on the lines of a JSON log that are not at level INFO.
type warnings struct {
	w    io.Writer
	line []byte
}

func (l *warnings) Write(b []byte) (int, error) {
	l.line = append(l.line, b...)
	for {
		i := bytes.IndexByte(l.line, '\n')
		if i < 0 {
			return len(b), nil
		}
		if !bytes.Contains(l.line[:i], []byte(`"level":"INFO"`)) {
			if _, err := l.w.Write(l.line[:i+1]); err != nil {
				return 0, err
			}
		}
		l.line = l.line[i+1:]
	}
}
