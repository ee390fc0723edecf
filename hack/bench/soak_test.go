package bench

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
	c := &soakClient{url: "http://" + addr + "/soak/", token: token,
		http: &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: soakClients}}}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if status, _, _ := c.do("ping", "", "application/json", strings.NewReader(`{}`), ""); status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the gateway does not serve the connection")
		}
	}

	var stats soakStats
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range soakClients {
		m := &model{dir: fmt.Sprintf("w%02d", w), files: map[string][]*string{}, rng: rand.New(rand.NewPCG(uint64(w), 1))}
		for status := 0; status != http.StatusOK; {
			status, _, _ = c.do("mkdir", "", "application/json", strings.NewReader(fmt.Sprintf(`{"path": %q}`, m.dir)), "")
		}
		for i := range soakFiles {
			m.files[fmt.Sprintf("f%d", i)] = []*string{nil}
		}
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				m.step(t, c, &stats)
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
			stats.restarts.Add(1)
		}
	}
	endRSS, endGoroutines := sample()
	close(stop)
	wg.Wait()

	fmt.Printf("\nsoak: %s at concurrency %d, sshd restarted %d times\n", soakDuration.String(), soakClients, stats.restarts.Load())
	fmt.Printf("  requests            %d\n", stats.requests.Load())
	fmt.Printf("  wrong answers       %d (must be 0)\n", stats.wrong.Load())
	fmt.Printf("  retryable errors    %d (502/503/504)\n", stats.retryable.Load())
	fmt.Printf("  gateway RSS         %d MB after the first %s, %d MB at the end\n", firstRSS>>20, soakRestarts.String(), endRSS>>20)
	fmt.Printf("  gateway goroutines  %d after the first %s, %d at the end\n\n", firstGoroutines, soakRestarts.String(), endGoroutines)
	if stats.wrong.Load() > 0 {
		t.Errorf("%d wrong answers", stats.wrong.Load())
	}
	// Flat: no more than the load's own share more at the end.
	if endGoroutines > firstGoroutines+2*soakClients || endRSS > 2*firstRSS {
		t.Errorf("the gateway grew: %d to %d goroutines, %d to %d MB", firstGoroutines, endGoroutines, firstRSS>>20, endRSS>>20)
	}
}

type soakStats struct {
	requests, wrong, retryable, restarts atomic.Int64
}

// model is what one client's files may hold: for each, the contents it
// may have (nil: absent). A command that failed on the server's side may
// or may not have taken effect: then both are possible until an answer
// says which.
type model struct {
	dir   string
	files map[string][]*string
	rng   *rand.Rand
}

// step sends one command, chosen at random, and checks its answer.
func (m *model) step(t *testing.T, c *soakClient, stats *soakStats) {
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range m.files {
			if !yield(n) {
				return
			}
		}
	})
	i := m.rng.IntN(len(names))
	name, other := names[i], names[(i+1+m.rng.IntN(len(names)-1))%len(names)]
	p, q := m.dir+"/"+name, m.dir+"/"+other
	content := strings.Repeat(fmt.Sprintf("%s-%d ", name, m.rng.Int64()), 1+m.rng.IntN(3000))
	stats.requests.Add(1)
	var (
		status      int
		answer      map[string]any
		raw         []byte
		contentType string
	)
	wrong := func(format string, args ...any) {
		stats.wrong.Add(1)
		t.Errorf("%s: "+format, append([]any{p}, args...)...)
	}
	kind := m.rng.IntN(10)
	switch kind {
	case 0, 1: // write, JSON
		status, answer = c.json("write", fmt.Sprintf(`{"path": %q, "file": {"text": %q}}`, p, content))
	case 2: // write, raw
		status, _, raw = c.do("write", "path="+p, "application/octet-stream", strings.NewReader(content), "")
		_ = json.Unmarshal(raw, &answer)
	case 3: // append
		content = content[:min(len(content), 200)]
		status, answer = c.json("append", fmt.Sprintf(`{"path": %q, "file": {"base64": %q}}`, p, base64.StdEncoding.EncodeToString([]byte(content))))
	case 4, 5: // read, JSON
		status, answer = c.json("read", fmt.Sprintf(`{"path": %q}`, p))
	case 6: // read, raw
		status, contentType, raw = c.do("read", "", "application/json", strings.NewReader(fmt.Sprintf(`{"path": %q}`, p)), "application/octet-stream")
		if contentType != "application/octet-stream" {
			_ = json.Unmarshal(raw, &answer) // the envelope of a refusal
		}
	case 7: // unlink
		status, answer = c.json("unlink", fmt.Sprintf(`{"path": %q}`, p))
	case 8: // copy
		status, answer = c.json("copy", fmt.Sprintf(`{"from": %q, "to": %q, "overwrite": true}`, q, p))
	case 9: // stat
		status, answer = c.json("stat", fmt.Sprintf(`{"path": %q}`, p))
	}
	switch {
	case status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout:
		stats.retryable.Add(1)
		// A change may or may not have been made.
		switch kind {
		case 0, 1, 2:
			m.files[name] = union(m.files[name], []*string{&content})
		case 3:
			m.files[name] = union(m.files[name], appended(m.files[name], content))
		case 7:
			m.files[name] = union(m.files[name], []*string{nil})
		case 8:
			m.files[name] = union(m.files[name], m.files[other])
		}
		time.Sleep(10 * time.Millisecond) // as a client backs off
		return
	case status != http.StatusOK:
		wrong("%d answered %d %v %.200s", kind, status, answer, raw)
		return
	}
	errCode := ""
	if e, ok := answer["error"].(map[string]any); ok {
		errCode, _ = e["code"].(string)
	}
	possible := m.files[name]
	switch kind {
	case 0, 1, 2:
		if errCode != "" {
			wrong("write failed: %v", answer)
		}
		m.files[name] = []*string{&content}
	case 3:
		result, _ := answer["append"].(map[string]any)
		next := appended(possible, content)
		if errCode != "" || result == nil {
			wrong("append failed: %v", answer)
			return
		}
		// The size says which of the possible contents it was.
		m.files[name] = nil
		for _, c := range next {
			if float64(len(*c)) == result["size"] {
				m.files[name] = []*string{c}
			}
		}
		if m.files[name] == nil {
			wrong("append answered size %v, want one of %d possible", result["size"], len(next))
			m.files[name] = next
		}
	case 4, 5, 6:
		var got *string
		switch {
		case kind == 6 && contentType == "application/octet-stream":
			s := string(raw)
			got = &s
		case errCode == "":
			result, _ := answer["read"].(map[string]any)
			s, _ := result["content"].(string)
			got = &s
		}
		if got == nil && errCode != "not_found" {
			wrong("read: %v %.200s", answer, raw)
			return
		}
		m.observe(name, got, wrong)
	case 7:
		switch errCode {
		case "":
			m.files[name] = []*string{nil}
		case "not_found":
			m.observe(name, nil, wrong)
		default:
			wrong("unlink: %v", answer)
		}
	case 8:
		switch errCode {
		case "":
			m.files[name] = m.files[other]
		case "not_found":
			m.observe(other, nil, wrong)
		default:
			wrong("copy: %v", answer)
		}
	case 9:
		switch errCode {
		case "":
			result, _ := answer["stat"].(map[string]any)
			var match []*string
			for _, c := range possible {
				if c != nil && float64(len(*c)) == result["size"] {
					match = append(match, c)
				}
			}
			if len(match) == 0 {
				wrong("stat answered size %v, none of the %d possible", result["size"], len(possible))
				return
			}
			m.files[name] = match
		case "not_found":
			m.observe(name, nil, wrong)
		default:
			wrong("stat: %v", answer)
		}
	}
}

// observe narrows a file's possible contents to what an answer showed.
func (m *model) observe(name string, got *string, wrong func(string, ...any)) {
	for _, c := range m.files[name] {
		if (c == nil) == (got == nil) && (c == nil || *c == *got) {
			m.files[name] = []*string{got}
			return
		}
	}
	what := "absent"
	if got != nil {
		what = fmt.Sprintf("%d bytes (%.30q)", len(*got), *got)
	}
	wrong("found %s, none of the %d possible", what, len(m.files[name]))
	m.files[name] = []*string{got}
}

// appended is each possible content with s appended (to nothing, for an
// absent file).
func appended(possible []*string, s string) []*string {
	var out []*string
	for _, c := range possible {
		next := s
		if c != nil {
			next = *c + s
		}
		out = append(out, &next)
	}
	return out
}

// union is a and b without repeats.
func union(a, b []*string) []*string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.ContainsFunc(out, func(y *string) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }) {
			out = append(out, x)
		}
	}
	return out
}

// soakClient sends commands to one connection.
type soakClient struct {
	url, token string
	http       *http.Client
}

func (c *soakClient) json(command, body string) (int, map[string]any) {
	status, _, raw := c.do(command, "", "application/json", strings.NewReader(body), "")
	var answer map[string]any
	_ = json.Unmarshal(raw, &answer)
	return status, answer
}

// do sends a command and returns the answer's status, Content-Type and
// body; a request that fails on the way counts as a 502.
func (c *soakClient) do(command, query, contentType string, body io.Reader, accept string) (int, string, []byte) {
	req, err := http.NewRequest(http.MethodPost, c.url+command+"?"+query, body)
	if err != nil {
		return 0, "", nil
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", contentType)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return http.StatusBadGateway, "", []byte(err.Error())
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return http.StatusBadGateway, "", []byte(err.Error()) // cut off: the server broke midway
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), raw
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
