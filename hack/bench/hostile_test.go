package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
)

// The hostile phase: what one tenant's load does to another's small writes
// and to the gateway's memory.
const (
	hostileReaders    = 8
	hostileWriters    = 4
	hostileAbandoners = 64
	// A read takes the whole file, the most a JSON read may return.
	hostileReadSize  = 16 << 20
	hostileWriteSize = 32 << 20
	// abandonAfter is how long a client waits for the frozen server
	// before it gives up on a request.
	abandonAfter = 200 * time.Millisecond
	// hostileWarmUp lets the large requests fill the gateway before the
	// well-behaved tenant is measured.
	hostileWarmUp = 2 * time.Second
)

// The groups of clients whose answers the phase counts, in the order
// printed.
const (
	groupReads  = "16 MiB reads"
	groupWrites = "32 MiB writes"
	groupFrozen = "frozen server"
	groupTenant = "tenant's writes"
)

// hostilePhase measures a second, well-behaved tenant's small writes
// alone, then while the rig's tenant reads and writes files of many MiB
// as JSON and sends requests to a frozen server that it abandons, all at
// once; and the gateway's peak RSS meanwhile. Speed and memory are
// reported; what fails the test is an answer that is neither a correct
// result nor a clear refusal (429 or 503 with its code), after printing.
func hostilePhase(t *testing.T, r *rig, httpClient *http.Client) {
	sshd := r.sshd
	tenantDir, hostileDir := filepath.Join(sshd.Dir, "tenant"), filepath.Join(sshd.Dir, "hostile")
	mkdirOwned(t, sshd, tenantDir, filepath.Join(tenantDir, "small"), hostileDir)
	if err := os.WriteFile(filepath.Join(hostileDir, "lt.txt"), bytes.Repeat(lt, hostileReadSize), 0o644); err != nil {
		t.Fatal(err)
	}
	// The well-behaved tenant: a namespace, key and connection of its
	// own, rooted in a directory of its own on the same sshd.
	tenantToken := r.addTenant(t, r.ns+"-tenant", sshd, map[string]string{"tenant": tenantDir})
	tenant := r.client(httpClient, "tenant", tenantToken)
	// The frozen server is an sshd of its own, frozen once its connection
	// is Ready and the gateway's pool to it open. Its requests use a key of
	// their own, so that the key's bound on requests in flight, which
	// they fill, does not hold back the same tenant's reads and writes.
	frozenSSHD := testsshd.Start(t)
	r.addConnections(t, r.ns, frozenSSHD, map[string]string{"frozen": ""})
	frozen := r.client(httpClient, "frozen", r.addKey(t, r.ns, "frozen"))
	waitServed(t, tenant, frozen)

	tenantLoad := newLoad(t, tenant.url+"write", tenantToken, "", newNames, jsonBody)
	var wrkCPU time.Duration
	measure := func() result {
		var all result
		for range rounds {
			phaseNumber.Add(1)
			lw, cpu := tenantLoad.run(t, 16)
			all.add(lw)
			wrkCPU += cpu
		}
		return all
	}
	alone := measure()

	// The peak from here on is the phase's, not the earlier transfers'.
	pid := r.gateway.Process.Pid
	if err := resetPeakRSS(pid); err != nil {
		t.Fatal(err)
	}
	thaw := frozenSSHD.Freeze(t)
	defer thaw()
	var tally answers
	stop := startHostile(r.client(httpClient, "box", r.token), frozen, &tally)
	time.Sleep(hostileWarmUp)
	// Who used the two cores while the tenant was measured: this process
	// is the hostile clients, and wrk the tenant's.
	start, gatewayCPU, selfCPU, sshdCPU := time.Now(), mustCPU(t, pid), mustCPU(t, os.Getpid()), sshd.CPUTime()
	wrkCPU = 0
	tenantLoad.tally = true
	// The hostile load's CPU profile goes next to the fast phases'.
	var profiled chan error
	if out := os.Getenv("SFTPGATE_BENCH_PROFILE"); out != "" {
		profiled = make(chan error, 1)
		go func() { profiled <- saveProfile("http://"+r.metricsAddr, out+".hostile", 3*time.Second) }()
	}
	loaded := measure()
	if profiled != nil {
		if err := <-profiled; err != nil {
			t.Error(err)
		}
	}
	cores := func(d time.Duration) float64 { return d.Seconds() / time.Since(start).Seconds() }
	gatewayCores, selfCores, sshdCores := cores(mustCPU(t, pid)-gatewayCPU), cores(mustCPU(t, os.Getpid())-selfCPU), cores(sshd.CPUTime()-sshdCPU)
	wrkCores := cores(wrkCPU)
	rss, err := peakRSS(pid)
	stop()
	thaw()
	if err != nil {
		t.Fatal(err)
	}
	tally.addLoad(groupTenant, loaded)

	fmt.Printf("\n%-34s %12s %9d MB %10s %10s\n", "hostile load: gateway peak RSS", "", rss>>20, "", "< 200 MB")
	fmt.Println("well-behaved tenant's small writes, under hostile load")
	fmt.Printf("%-34s %12s %9.0f/s\n", "  1 KiB, concurrency 16, alone", "", alone.rate())
	fmt.Printf("%-34s %12s %9.0f/s %10.2f %10s\n", "  the same, under the load", "", loaded.rate(), loaded.rate()/alone.rate(), ">= 0.80")
	fmt.Printf("%-34s %12s %s alone, %s under the load\n", "  p50 / p99 latency", "", alone.percentiles(), loaded.percentiles())
	fmt.Printf("%-34s %12s gateway %.2f, sshd %.2f, hostile clients %.2f, wrk %.2f\n", "  cores used under the load", "",
		gatewayCores, sshdCores, selfCores, wrkCores)
	tally.print()
	fmt.Println()
	tally.check(t)
}

// lt is the content of the hostile reads and writes: '<', which a JSON
// encoder escaping for HTML would send as six bytes.
var lt = []byte("<")

// startHostile starts the hostile tenant's clients, each sending requests
// in a loop and tallying their answers, until stop: readers of the whole
// 16 MiB file of '<' as JSON text, writers of 32 MiB of it as JSON, each
// to a file of its own, and clients of box's tenant that stat the frozen
// server's root and abandon the request after abandonAfter.
func startHostile(box, frozen *gatewayClient, tally *answers) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	// A client sends at most one request per abandonAfter: refusals come
	// at once, and clients sending again as fast would measure this
	// process's CPU, which the two cores share with the gateway, rather
	// than the gateway's bounds.
	clients := func(n int, op func(ctx context.Context, i int)) {
		for i := range n {
			wg.Go(func() {
				for ctx.Err() == nil {
					next := time.After(abandonAfter)
					op(ctx, i)
					select {
					case <-ctx.Done():
					case <-next:
					}
				}
			})
		}
	}
	read := `{"path": "hostile/lt.txt"}`
	clients(hostileReaders, func(ctx context.Context, _ int) {
		status, answer, err := box.ask(ctx, "read", "application/json", strings.NewReader(read), int64(len(read)))
		tally.judge(ctx, groupReads, status, answer, err, readCorrect, http.StatusTooManyRequests, http.StatusServiceUnavailable)
	})
	text := bytes.Repeat(lt, hostileWriteSize)
	clients(hostileWriters, func(ctx context.Context, i int) {
		head, tail := fmt.Sprintf(`{"path": "hostile/w%d.txt", "file": {"text": "`, i), `"}}`
		body := io.MultiReader(strings.NewReader(head), bytes.NewReader(text), strings.NewReader(tail))
		status, answer, err := box.ask(ctx, "write", "application/json", body, int64(len(head)+len(text)+len(tail)))
		// A write the memory budget could never hold (its body and its
		// content together) is refused at once with 413, as
		// docs/gateway.md's Limits say: a clear answer too.
		tally.judge(ctx, groupWrites, status, answer, err, writeCorrect,
			http.StatusRequestEntityTooLarge, http.StatusTooManyRequests, http.StatusServiceUnavailable)
	})
	stat := `{"path": "."}`
	clients(hostileAbandoners, func(ctx context.Context, _ int) {
		ctx, cancel := context.WithTimeout(ctx, abandonAfter)
		defer cancel()
		status, answer, err := frozen.ask(ctx, "stat", "application/json", strings.NewReader(stat), int64(len(stat)))
		// The server that does not answer may be said so: 502 or 504.
		tally.judge(ctx, groupFrozen, status, answer, err, statCorrect, http.StatusTooManyRequests,
			http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout)
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

// readCorrect says whether a read's answer is the whole file of '<'. The
// run of '<' is counted and cut out before the rest is decoded: decoding
// 16 MiB of JSON string per answer would take this process's CPU from
// the gateway on the cores they share.
func readCorrect(answer []byte) bool {
	cut := false
	if i := bytes.IndexByte(answer, '<'); i >= 0 && len(answer)-i >= hostileReadSize &&
		bytes.Count(answer[i:i+hostileReadSize], lt) == hostileReadSize {
		answer, cut = slices.Concat(answer[:i], answer[i+hostileReadSize:]), true
	}
	var out struct {
		Read *struct {
			Size, Offset int64
			Content      string
		}
	}
	if json.Unmarshal(answer, &out) != nil || out.Read == nil || out.Read.Size != hostileReadSize || out.Read.Offset != 0 {
		return false
	}
	if cut {
		return out.Read.Content == ""
	}
	// Escaped, perhaps, but the same content.
	return len(out.Read.Content) == hostileReadSize && strings.Count(out.Read.Content, "<") == hostileReadSize
}

func writeCorrect(answer []byte) bool {
	var out struct{ Write *struct{ BytesWritten int64 } }
	return json.Unmarshal(answer, &out) == nil && out.Write != nil && out.Write.BytesWritten == hostileWriteSize
}

func statCorrect(answer []byte) bool {
	var out struct{ Stat *struct{ Type string } }
	return json.Unmarshal(answer, &out) == nil && out.Stat != nil && out.Stat.Type == "directory"
}

// answers counts the hostile phase's answers by group of clients and by
// kind: "correct", a clear refusal by status and code ("503 busy"),
// "abandoned" by the client, or "wrong"; it keeps the first wrong ones.
type answers struct {
	mu     sync.Mutex
	counts map[string]map[string]int
	wrong  []string
}

func (a *answers) add(group, kind string, n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.counts == nil {
		a.counts = map[string]map[string]int{}
	}
	if a.counts[group] == nil {
		a.counts[group] = map[string]int{}
	}
	a.counts[group][kind] += n
}

func (a *answers) addWrong(group string, n int, what string) {
	a.add(group, "wrong", n)
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.wrong) < 10 {
		a.wrong = append(a.wrong, group+": "+what)
	}
}

// judge counts the answer to a request of group sent with ctx: correct
// when correct says so of a 200's body, a refusal when its status is one
// of refusals and its body names an error code. A request that ctx ended
// has no answer: abandoned at its deadline, and not counted once the
// phase has ended.
func (a *answers) judge(ctx context.Context, group string, status int, body []byte, err error, correct func([]byte) bool, refusals ...int) {
	switch {
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		a.add(group, "abandoned", 1)
		return
	case err != nil && ctx.Err() != nil:
		return
	case err != nil:
		a.addWrong(group, 1, err.Error())
		return
	case status == http.StatusOK && correct(body):
		a.add(group, "correct", 1)
		return
	}
	var refusal struct{ Error struct{ Code string } }
	if slices.Contains(refusals, status) && json.Unmarshal(body, &refusal) == nil && refusal.Error.Code != "" {
		a.add(group, fmt.Sprintf("%d %s", status, refusal.Error.Code), 1)
		return
	}
	a.addWrong(group, 1, fmt.Sprintf("%d %.300s", status, body))
}

// addLoad counts the answers a wrk load tallied.
func (a *answers) addLoad(group string, l result) {
	a.add(group, "correct", l.ops)
	for kind, n := range l.refused {
		a.add(group, kind, n)
	}
	if l.failed > 0 {
		a.addWrong(group, l.failed, fmt.Sprintf("%d writes were not answered a result nor a clear refusal (wrk counts them)", l.failed))
	}
}

func (a *answers) print() {
	fmt.Println("  answers of the hostile phase (wrong: must be 0)")
	for _, group := range []string{groupReads, groupWrites, groupFrozen, groupTenant} {
		var kinds []string
		for _, kind := range slices.Sorted(maps.Keys(a.counts[group])) {
			kinds = append(kinds, fmt.Sprintf("%s %d", kind, a.counts[group][kind]))
		}
		fmt.Printf("    %-18s %s\n", group, cmp.Or(strings.Join(kinds, ", "), "none"))
	}
}

// check fails the test if any answer was wrong.
func (a *answers) check(t *testing.T) {
	wrong := 0
	for _, kinds := range a.counts {
		wrong += kinds["wrong"]
	}
	if wrong > 0 {
		t.Errorf("%d wrong answers in the hostile phase; the first:\n%s", wrong, strings.Join(a.wrong, "\n"))
	}
}

// mkdirOwned makes directories in the sshd's, owned by its user.
func mkdirOwned(t *testing.T, sshd *testsshd.Server, dirs ...string) {
	t.Helper()
	for _, dir := range dirs {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, sshd.UID, sshd.GID); err != nil {
			t.Fatal(err)
		}
	}
}
