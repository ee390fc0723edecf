package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/tempname"
	"github.com/sftpgate/sftpgate/test/framework"
)

// settle waits for what the system still owes once the load and the
// faults stopped, all of it within settleTimeout of the heal; it returns
// what was last found if it never came.
func (r *rig) settle(what string, cond func() (bool, string)) error {
	fmt.Printf("  settling: %s\n", what)
	return testkit.Wait(max(time.Until(r.settleBy), 10*time.Second), what, cond)
}

// checkWrites: every answer the gateway gave is one a possible content
// of the file explains, and every file on the server now holds one of
// the contents acknowledged writes may have left: whole, never half.
func (r *rig) checkWrites() check {
	c := check{name: "acknowledged writes whole and readable"}
	var requests, retryable, files int64
	for _, tn := range r.tenants {
		for _, gc := range tn.clients {
			requests += gc.stats.Requests.Load()
			retryable += gc.stats.Retryable.Load()
			for _, w := range gc.wrong {
				c.breach("%s: %s", tn.ns, w)
			}
			for name := range gc.model.Files {
				files++
				var got *string
				if b, err := os.ReadFile(filepath.Join(gc.dir, name)); err == nil {
					s := string(b)
					got = &s
				} else if !os.IsNotExist(err) {
					c.breach("%s: %v", name, err)
					continue
				}
				gc.model.Observe(name, got, func(format string, args ...any) {
					c.breach("%s %s/%s on the server: "+format, append([]any{tn.ns, gc.model.Dir, name}, args...)...)
				})
			}
		}
	}
	c.counts = fmt.Sprintf("%d commands, %d cut off by faults, %d files checked", requests, retryable, files)
	return c
}

// watchEvents is a sink's file events by path.
func watchEvents(tn *tenant) map[string][]eventSeen {
	out := map[string][]eventSeen{}
	for _, e := range tn.events.Events() {
		if !strings.HasPrefix(e.Type(), "dev.sftpgate.file.") {
			continue
		}
		var data struct {
			Path string `json:"path"`
			Size int64  `json:"size"`
		}
		_ = json.Unmarshal(e.Data(), &data)
		out[data.Path] = append(out[data.Path], eventSeen{id: e.ID(), kind: strings.TrimPrefix(e.Type(), "dev.sftpgate.file."), size: data.Size})
	}
	return out
}

type eventSeen struct {
	id, kind string
	size     int64
}

// checkWatchEvents: every file dropped whole into a watched folder has a
// created event at its final size; no event names a file that never
// existed; an event sent again has the id it had.
func (r *rig) checkWatchEvents() check {
	c := check{name: "watched files: created events, no strangers, ids kept"}
	var dropped, events, repeats int
	for _, tn := range r.tenants {
		d := tn.drops
		d.mu.Lock()
		want := map[string]int64{}
		for p, size := range d.dropped {
			want[p] = size
		}
		for p, m := range d.pgp {
			want[p] = int64(len(r.messageOf(m).cipher))
		}
		aborted := maps.Clone(d.aborted)
		d.mu.Unlock()
		dropped += len(want)
		var seen map[string][]eventSeen
		missing := func() []string {
			var out []string
			for p, size := range want {
				if !slices.ContainsFunc(seen[p], func(e eventSeen) bool { return e.kind == "created" && e.size == size }) {
					out = append(out, p)
				}
			}
			slices.Sort(out)
			return out
		}
		if err := r.settle("every dropped file's event at "+tn.ns, func() (bool, string) {
			seen = watchEvents(tn)
			m := missing()
			return len(m) == 0, fmt.Sprint(m)
		}); err != nil {
			c.breach("%v", err)
		}
		for p, es := range seen {
			events += len(es)
			if _, ok := want[p]; !ok && !aborted[p] {
				c.breach("%s: %d events for %s, which was never dropped", tn.ns, len(es), p)
			}
			ids := map[string]string{}
			for _, e := range es {
				key := fmt.Sprintf("%s %d", e.kind, e.size)
				if id, ok := ids[key]; ok {
					repeats++
					if id != e.id {
						c.breach("%s: %s %s sent again with another id", tn.ns, p, key)
					}
				}
				ids[key] = e.id
			}
			if size, ok := want[p]; ok && len(ids) > 1 && !aborted[p] {
				c.breach("%s: %s, dropped whole at %d bytes, has events of %d changes: %v", tn.ns, p, size, len(ids), es)
			}
		}
	}
	c.counts = fmt.Sprintf("%d files dropped whole, %d events, %d repeats (same id)", dropped, events, repeats)
	return c
}

func (r *rig) messageOf(p pgpDrop) message {
	for _, m := range r.messages {
		if bytes.Equal(m.clear, p.clear) {
			return m
		}
	}
	return message{}
}

// checkDecryption: every encrypted file dropped whole ends decrypted
// (clear file, original filed as done) or failed (original in failedTo,
// no clear file); an untrusted signature always fails; the clear folder
// holds nothing else.
func (r *rig) checkDecryption() check {
	c := check{name: "triggered decryption: clear file or original in failedTo"}
	var decrypted, failed int
	for _, tn := range r.tenants {
		root := filepath.Join(r.near.Dir, tn.root)
		d := tn.drops
		d.mu.Lock()
		drops := map[string]pgpDrop{}
		for p, m := range d.pgp {
			drops[p] = m
		}
		d.mu.Unlock()
		if err := r.settle("every encrypted file filed at "+tn.ns, func() (bool, string) {
			var left []string
			for p := range drops {
				if exists(filepath.Join(root, p)) {
					left = append(left, p)
				}
			}
			return len(left) == 0, fmt.Sprint(left)
		}); err != nil {
			c.breach("%v", err)
		}
		expected := map[string][]byte{}
		for p, m := range drops {
			name := path.Base(p)
			stem := strings.TrimSuffix(name, ".pgp")
			clearFile, clearErr := os.ReadFile(filepath.Join(root, clear, stem))
			done, fail := exists(filepath.Join(root, pgpDone, name)), exists(filepath.Join(root, pgpFail, name))
			switch {
			case done && fail:
				c.breach("%s: %s filed both as done and as failed", tn.ns, p)
			case done && !m.good:
				c.breach("%s: %s, signed by an untrusted key, filed as done", tn.ns, p)
			case done && clearErr != nil:
				c.breach("%s: %s filed as done, but %s/%s: %v", tn.ns, p, clear, stem, clearErr)
			case done && !bytes.Equal(clearFile, m.clear):
				c.breach("%s: %s/%s holds %d bytes, not the clear text", tn.ns, clear, stem, len(clearFile))
			case done:
				decrypted++
				expected[stem] = m.clear
			case fail && clearErr == nil:
				c.breach("%s: %s filed as failed, yet its clear file is there", tn.ns, p)
			case fail:
				failed++
			default:
				c.breach("%s: %s neither decrypted nor in failedTo", tn.ns, p)
			}
		}
		entries, _ := os.ReadDir(filepath.Join(root, clear))
		for _, e := range entries {
			if _, ok := expected[e.Name()]; !ok {
				c.breach("%s: %s/%s, which no decryption that succeeded wrote", tn.ns, clear, e.Name())
			}
		}
	}
	c.counts = fmt.Sprintf("%d decrypted, %d failed (untrusted signer or faults)", decrypted, failed)
	return c
}

// checkTransfers: once the faults stopped, the schedules bring every
// file of the outbox to the bucket and back byte-identical; every
// Transfer finished, succeeded or failed with a reason; and no file a
// transfer wrote differs from its source.
func (r *rig) checkTransfers() check {
	c := check{name: "scheduled transfers SFTP to bucket to SFTP byte-identical"}
	ctx := context.Background()
	var files, transfers, failedTransfers int
	for _, tn := range r.tenants {
		root := filepath.Join(r.near.Dir, tn.root)
		bucket := fmt.Sprintf("chaos-%d", tn.i)
		differ := func() []string {
			var out []string
			entries, _ := os.ReadDir(filepath.Join(root, outbox))
			for _, e := range entries {
				if strings.HasSuffix(e.Name(), ".part") {
					continue
				}
				src, _ := os.ReadFile(filepath.Join(root, outbox, e.Name()))
				inBucket, _ := os.ReadFile(r.s3.Path(bucket, outbox+"/"+e.Name()))
				backHome, _ := os.ReadFile(filepath.Join(root, back, e.Name()))
				if !bytes.Equal(src, inBucket) || !bytes.Equal(src, backHome) {
					out = append(out, e.Name())
				}
			}
			return out
		}
		if err := r.settle("the outbox in the bucket and back at "+tn.ns, func() (bool, string) {
			d := differ()
			return len(d) == 0, fmt.Sprint(d)
		}); err != nil {
			c.breach("%v", err)
		}
		entries, _ := os.ReadDir(filepath.Join(root, outbox))
		files += len(entries)
		// Every file the transfers wrote is its source's bytes.
		for _, dir := range []string{r.s3.Path(bucket, outbox), filepath.Join(root, back)} {
			written, _ := os.ReadDir(dir)
			for _, e := range written {
				if strings.HasPrefix(e.Name(), tempname.Prefix) {
					continue // checkTemporaries' to count
				}
				src, err := os.ReadFile(filepath.Join(root, outbox, e.Name()))
				got, _ := os.ReadFile(filepath.Join(dir, e.Name()))
				if err != nil || !bytes.Equal(src, got) {
					c.breach("%s: %s differs from its source", tn.ns, filepath.Join(dir, e.Name()))
				}
			}
		}
		r.suspendSchedules(ctx, tn)
		var list v1alpha1.TransferList
		if err := r.settle("every transfer of "+tn.ns+" finished", func() (bool, string) {
			if err := r.sys.Client.List(ctx, &list, client.InNamespace(tn.ns)); err != nil {
				return false, err.Error()
			}
			var running []string
			for _, tr := range list.Items {
				if tr.Status.CompletionTime == nil {
					running = append(running, tr.Name)
				}
			}
			return len(running) == 0, fmt.Sprint(running)
		}); err != nil {
			c.breach("%v", err)
		}
		for _, tr := range list.Items {
			transfers++
			ready := meta.FindStatusCondition(tr.Status.Conditions, v1alpha1.ConditionReady)
			if ready != nil && ready.Status == "True" {
				continue
			}
			failedTransfers++
			if ready == nil || ready.Reason == "" || ready.Message == "" {
				c.breach("%s/%s failed without a reason: %+v", tn.ns, tr.Name, ready)
			}
			for _, f := range tr.Status.Failures {
				if f.Reason == "" {
					c.breach("%s/%s: %s failed without a reason", tn.ns, tr.Name, f.Path)
				}
			}
		}
	}
	c.counts = fmt.Sprintf("%d files sent, %d transfers (%d failed, each with a reason)", files, transfers, failedTransfers)
	return c
}

func (r *rig) suspendSchedules(ctx context.Context, tn *tenant) {
	for _, name := range []string{"to-bucket", "from-bucket"} {
		var s v1alpha1.TransferSchedule
		if err := r.sys.Client.Get(ctx, client.ObjectKey{Namespace: tn.ns, Name: name}, &s); err != nil {
			r.t.Errorf("%s/%s: %v", tn.ns, name, err)
			continue
		}
		patch := client.MergeFrom(s.DeepCopy())
		s.Spec.Suspend = true
		if err := r.sys.Client.Patch(ctx, &s, patch); err != nil {
			r.t.Errorf("%s/%s: %v", tn.ns, name, err)
		}
	}
}

// checkTemporaries: no temporary file (a gateway write's, an upload's, a
// transfer's) outlives the upload expiry once the faults stopped.
func (r *rig) checkTemporaries() check {
	c := check{name: "no temporary file outlives its expiry"}
	var found, killed []string
	err := r.settle("every temporary file removed", func() (bool, string) {
		found, killed = nil, nil
		for _, dir := range []string{r.near.Dir, r.far.Dir, r.s3.Dir} {
			_ = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
				if err != nil || !strings.HasPrefix(e.Name(), tempname.Prefix) {
					return nil
				}
				info, err := e.Info()
				switch {
				case err == nil && r.gatewayKills.inFlight(info.ModTime()):
					killed = append(killed, p)
				case err == nil:
					found = append(found, fmt.Sprintf("%s (written %s)", p, info.ModTime().Sub(r.began).Round(time.Second)))
				}
				return nil
			})
		}
		return len(found) == 0, fmt.Sprint(found)
	})
	if err != nil {
		for _, p := range found {
			c.breach("%s", p)
		}
	}
	c.counts = fmt.Sprintf("%d left %s after the faults stopped; %d excused, written in the last request time before a gateway was killed: %v",
		len(found), time.Since(r.healed).Round(time.Second), len(killed), killed)
	return c
}

// checkAudit: every request the gateway answered has its record at the
// tenant's sink, but those a killed replica answered just before its
// kill (a gap: the chain is not closed); every chain verifies.
func (r *rig) checkAudit() check {
	c := check{name: "audit: every answered request at the sink, chains whole"}
	var answered, excused, chains, killedChains int
	for _, tn := range r.tenants {
		var want []string
		for _, gc := range tn.clients {
			for _, o := range gc.sent {
				if o.Status != http.StatusOK && o.Status != http.StatusCreated && o.Status != http.StatusNoContent {
					continue
				}
				answered++
				if r.gatewayKills.excused(o.URL, o.Answered) {
					excused++
					continue
				}
				want = append(want, o.RequestID)
			}
		}
		var records []audit.Record
		missing := func() []string {
			ids := map[string]bool{}
			for _, rec := range records {
				ids[rec.RequestID] = true
			}
			var out []string
			for _, id := range want {
				if !ids[id] {
					out = append(out, id)
				}
			}
			return out
		}
		if err := r.settle("every answered request's record at "+tn.ns, func() (bool, string) {
			records = tn.audits.AuditRecords(r.t)
			m := missing()
			return len(m) == 0, fmt.Sprintf("%d missing, the first %v", len(m), m[:min(len(m), 5)])
		}); err != nil {
			c.breach("%v", err)
		}
		for _, rep := range audit.Verify(records) {
			chains++
			if !rep.Closed {
				killedChains++
			}
			if len(rep.Broken) > 0 || len(rep.Missing) > 0 {
				c.breach("%s %s: missing %v, changed %v", rep.Namespace, rep.Replica, rep.Missing, rep.Broken)
			}
		}
	}
	c.counts = fmt.Sprintf("%d requests answered, %d excused (answered in the %s before a kill), %d chains (%d not closed: their replica was killed, or runs on)",
		answered, excused, auditStoreWindow, chains, killedChains)
	return c
}

// samples is each process's RSS and goroutines, by name, and where it
// has them its goroutines' stacks, counted.
type samples struct {
	use    map[string][2]float64
	stacks map[string]map[string]int
}

// sampleAtRest samples the processes after d of load, the load held back
// meanwhile: a comparison with the end, at rest too, then shows what
// stayed, not what was in flight.
func (r *rig) sampleAtRest(d time.Duration) samples {
	time.Sleep(d)
	r.gate.Lock()
	defer r.gate.Unlock()
	return r.sample("first")
}

// sample reads every process's RSS and goroutines; their profiles are
// kept beside its log as <process>-goroutines-<label>.txt, to be read
// when the run fails.
func (r *rig) sample(label string) samples {
	out := samples{use: map[string][2]float64{}, stacks: map[string]map[string]int{}}
	for _, p := range r.sys.Processes() {
		rss, err := p.RSS()
		if err != nil {
			continue // down at the moment
		}
		g, _ := p.Metric(context.Background(), "go_goroutines")
		out.use[p.Name] = [2]float64{float64(rss), g}
		out.stacks[p.Name] = goroutines(p, filepath.Join(r.sys.Dir, p.Name+"-goroutines-"+label+".txt"))
	}
	return out
}

// goroutines is p's goroutines counted by stack, from its pprof profile
// (--profiling), which it keeps at keep; or nil.
func goroutines(p *framework.Process, keep string) map[string]int {
	if p.MetricsURL == "" {
		return nil
	}
	resp, err := http.Get(strings.TrimSuffix(p.MetricsURL, "/metrics") + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return nil
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	b, _ := io.ReadAll(resp.Body)
	// Kept as debug=2 has them: each goroutine with where it was made.
	if full, err := http.Get(strings.TrimSuffix(p.MetricsURL, "/metrics") + "/debug/pprof/goroutine?debug=2"); err == nil {
		if raw, err := io.ReadAll(full.Body); err == nil {
			_ = os.WriteFile(keep, raw, 0o600)
		}
		_ = full.Body.Close()
	}
	out := map[string]int{}
	for block := range strings.SplitSeq(string(b), "\n\n") {
		head, frames, ok := strings.Cut(block, "\n")
		n, err := strconv.Atoi(strings.Fields(head + " x")[0])
		if !ok || err != nil {
			continue
		}
		var funcs []string
		for line := range strings.SplitSeq(frames, "\n") {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" {
				funcs = append(funcs, f[2])
			}
		}
		out[strings.Join(funcs, " < ")] += n
	}
	return out
}

// grown is the stacks with more goroutines in last than in first, the
// most grown first.
func grown(first, last map[string]int) []string {
	type g struct {
		stack string
		by    int
	}
	var all []g
	for stack, n := range last {
		if d := n - first[stack]; d > 0 {
			all = append(all, g{stack, d})
		}
	}
	slices.SortFunc(all, func(a, b g) int { return b.by - a.by })
	var out []string
	for _, x := range all[:min(len(all), 5)] {
		out = append(out, fmt.Sprintf("+%d %.300s", x.by, x.stack))
	}
	return out
}

// checkGrowth: each component's RSS and goroutines at rest at the end,
// its replicas' summed, within growthBound of theirs at rest after the
// first minute. Summed, since work moves between a component's replicas
// (a worker that took over a killed one's watches holds their sessions
// too): a leak in any replica still grows the sum by what it leaked.
func (r *rig) checkGrowth(first, last samples) check {
	c := check{name: fmt.Sprintf("RSS and goroutines at the end within %d%% of the first minute", int(growthBound*100-100))}
	var (
		parts      []string
		components []string
		use        = map[string][2][2]float64{} // component: first, last
	)
	for _, p := range r.sys.Processes() {
		component, _, _ := strings.Cut(p.Name, "-")
		if _, ok := use[component]; !ok {
			components = append(components, component)
		}
		u := use[component]
		for i, s := range []samples{first, last} {
			u[i][0] += s.use[p.Name][0]
			u[i][1] += s.use[p.Name][1]
		}
		use[component] = u
	}
	for _, component := range components {
		f, l := use[component][0], use[component][1]
		parts = append(parts, fmt.Sprintf("%s %d→%d MB %d→%d", component, int(f[0])>>20, int(l[0])>>20, int(f[1]), int(l[1])))
		if f[0] > 0 && l[0] > f[0]*growthBound {
			c.breach("%s: RSS %d MB → %d MB", component, int(f[0])>>20, int(l[0])>>20)
		}
		if f[1] > 0 && l[1] > f[1]*growthBound {
			var stacks []string
			for _, p := range r.sys.Processes() {
				if strings.HasPrefix(p.Name, component) {
					stacks = append(stacks, p.Name+": "+strings.Join(grown(first.stacks[p.Name], last.stacks[p.Name]), "; "))
				}
			}
			c.breach("%s: goroutines %d → %d; grown: %s", component, int(f[1]), int(l[1]), strings.Join(stacks, " | "))
		}
	}
	c.counts = strings.Join(parts, ", ")
	return c
}

// checkControlPlane: the API server's writes a second at rest (load
// stopped, schedules suspended) and etcd's database after the run.
func (r *rig) checkControlPlane() check {
	c := check{name: "control plane: writes at rest, etcd size"}
	ctx := context.Background()
	before, err1 := r.sys.APIServer.Writes(ctx)
	const window = 30 * time.Second
	time.Sleep(window)
	after, err2 := r.sys.APIServer.Writes(ctx)
	size, err3 := r.sys.APIServer.EtcdBytes(ctx)
	for _, err := range []error{err1, err2, err3} {
		if err != nil {
			c.breach("%v", err)
		}
	}
	rate := (after - before) / window.Seconds()
	if rate > writesAtRestMax {
		c.breach("%.2f writes a second at rest, bound %.0f", rate, writesAtRestMax)
	}
	if size > etcdBytesMax {
		c.breach("etcd %d MB, bound %d MB", int(size)>>20, etcdBytesMax>>20)
	}
	c.counts = fmt.Sprintf("%.2f writes/s at rest (bound %.0f), etcd %d MB (bound %d MB)", rate, writesAtRestMax, int(size)>>20, etcdBytesMax>>20)
	return c
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
