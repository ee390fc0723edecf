package bench

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api"
	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/fixtures/testhttp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsink"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/worker/shard"
	"github.com/sftpgate/sftpgate/worker/watches"
)

// The test kit's, as every test package has them.
var must = testkit.Must

const (
	// The scale: watches in namespaces of scaleWatchesPerNamespace (the
	// worker's default quota), and transfers in namespaces of
	// scaleTransfersPerNamespace, of which the worker runs
	// scaleTransfersRunning at once.
	scaleWatchesPerNamespace   = 100
	scaleTransfersPerNamespace = 100
	scaleTransfersRunning      = 5
	scaleReplicas              = 3
	// scalePoll is the watches' poll interval: the bench measures how the
	// replicas divide and hold the work, not how many polls one sshd on
	// the bench's cores answers.
	scalePoll = 5 * time.Minute
	// scaleRest is how long the writes at rest are counted.
	scaleRest = 2 * time.Minute
	// scaleAfterFailover is how long the failover's writes are still
	// counted after the survivors report the last watch: a state is saved
	// up to a WriteEvery (5 s) after the poll that changed it.
	scaleAfterFailover = 30 * time.Second
	// scaleWait bounds each wait: for the replicas to settle, and for the
	// survivors to report a killed replica's watches.
	scaleWait = 30 * time.Minute
	// scaleCompactionInterval is how often the API server compacts etcd
	// (its default --etcd-compaction-interval): the first at its second
	// tick (the first only notes the revision), to the revision of the
	// tick before.
	scaleCompactionInterval = 5 * time.Minute
	// scaleListPage is the bench's page of a list: whole lists of 10,000
	// watches every 15 s would be load of the bench's own.
	scaleListPage = 500
)

// The targets of issue 56, for 10,000 watches and 1,000 transfers on
// three replicas against one API server.
const (
	scaleSettleTarget      = 10 * time.Minute
	scaleStartWritesTarget = 3.0 // API writes per watch started
	scaleRestWritesTarget  = 5.0 // API writes a second, all, at rest
	scaleEtcdTarget        = 1 << 30
	scaleRSSTarget         = 250e6 // each replica's RSS at rest, in bytes
)

// scale is one run's size: watches, and a tenth as many transfers.
type scale struct{ watches, transfers int }

func (sc scale) running() int {
	return sc.transfers / scaleTransfersPerNamespace * scaleTransfersRunning
}
func (sc scale) queued() int { return sc.transfers - sc.running() }

func (sc scale) transferNamespaces() []string {
	var names []string
	for n := range sc.transfers / scaleTransfersPerNamespace {
		names = append(names, fmt.Sprintf("scale-transfer-%03d", n))
	}
	return names
}

// scaleSizes are the runs of the scale bench, each on a control plane of
// its own: 3,000 and 10,000 watches, or those SFTPGATE_BENCH_SCALE lists
// (multiples of 1,000, separated by commas).
func scaleSizes() ([]scale, error) {
	v := os.Getenv("SFTPGATE_BENCH_SCALE")
	if v == "" {
		v = "3000,10000"
	}
	var sizes []scale
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1000 || n%1000 != 0 {
			return nil, fmt.Errorf("SFTPGATE_BENCH_SCALE=%q: watches, each a multiple of 1,000, separated by commas", v)
		}
		sizes = append(sizes, scale{n, n / 10})
	}
	return sizes, nil
}

// TestBenchmarkScale runs 3,000 watches and 300 transfers, then 10,000
// and 1,000 (all but 5 of each 100 queued), each on three worker replicas
// against one API server of its own, and prints each figure of issue 56
// beside its target: how long until they settle, the API writes a watch
// costs to start, at rest and in a failover (by resource, subresource and
// verb), the objects lists read, etcd's database after the API server's
// compaction, each replica's memory at rest, and how long the two
// survivors take to report the watches of a replica killed.
func TestBenchmarkScale(t *testing.T) {
	binary := os.Getenv("SFTPGATE_BENCH_BINARY")
	if binary == "" {
		t.Fatal("run it with make bench, which builds the binary it measures")
	}
	sizes, err := scaleSizes()
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range sizes {
		t.Run(strconv.Itoa(sc.watches), func(t *testing.T) { benchScale(t, binary, sc) })
	}
}

// scaleResult is what one run measured; a phase not reached (or whose
// metrics the API server did not answer) is missing.
type scaleResult struct {
	scale
	settled  bool
	settle   time.Duration
	atSettle scaleCount
	// start is the API server's counts from the replicas' start until they
	// settled, and startOK whether it answered; startTransferEvents the
	// writes of the transfers' events among them.
	start               apiCounts
	startOK             bool
	startTransferEvents int
	// rest is the counts over restFor at rest.
	rest    apiCounts
	restOK  bool
	restFor time.Duration
	rss     map[string]int64
	// heap is each replica's Go heap then, as heapOf says it.
	heap map[string]string
	// The replica killed, its watches, whether and when the survivors
	// reported them all, and the watches each held then.
	victim        string
	victimWatches int
	adopted       bool
	adoption      time.Duration
	afterFailover scaleCount
	// failover is the counts from the kill until scaleAfterFailover after
	// the survivors reported the last watch, less what the same time at
	// rest writes (each resource's at least zero).
	failover               apiCounts
	failoverOK             bool
	failoverTransferEvents int
	// etcd's database before the replicas started, when they settled (or
	// gave up), and after the API server's next compaction.
	etcdBefore, etcdSettle, etcdEnd etcdDB
	etcdSettleOK, etcdEndOK         bool
	compacted                       bool
}

func benchScale(t *testing.T, binary string, sc scale) {
	ctx := t.Context()
	controlPlaneStart := time.Now()
	env, _, err := testcluster.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	probe, err := newControlPlaneProbe(env)
	if err != nil {
		t.Fatal(err)
	}
	// The bench's own client writes the objects at once.
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 1000, 2000
	k8s, err := client.New(cfg, client.Options{Scheme: api.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	sshd, tarpit, sink := testsshd.Start(t), testsftp.Tarpit(t), testsink.Start(t)
	// The transfers' source folder exists; listing it never ends.
	must(t, os.Mkdir(filepath.Join(tarpit.Dir, "in"), 0o755))

	start := time.Now()
	scaleObjects(t, k8s, sc, sshd, tarpit, sink.URL)
	t.Logf("made %d watches and %d transfers in %s", sc.watches, sc.transfers, time.Since(start).Round(time.Second))

	workerNS := "sftpgate-scale-worker"
	must(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workerNS}}))
	r := scaleResult{scale: sc}
	// From here on every write is a worker's (or the API server's own,
	// its identity Lease every 10 s): the bench only reads.
	if r.etcdBefore, err = probe.etcdDB(ctx); err != nil {
		t.Fatal(err)
	}
	before, err := probe.apiCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	replicas := map[string]*scaleReplica{}
	for i := range scaleReplicas {
		name := fmt.Sprintf("replica-%d", i)
		metrics := testhttp.FreeAddr(t)
		w := exec.Command(binary, "worker", "--kubeconfig="+kubeconfig, "--namespace="+workerNS, "--identity="+name,
			"--metrics-address="+metrics, "--profiling", "--health-probe-bind-address=0", "--log-level=error",
			"--denied-networks="+testcluster.LoopbackNetworks,
			// It measures where the default total (what this bench
			// settled) would hold the rest back; the web UI accounts'
			// total must be below it (no account runs here).
			"--max-watches-total="+strconv.Itoa(sc.watches),
			"--max-account-watches-total="+strconv.Itoa(min(watches.DefaultLimits().MaxAccountWatchesTotal, sc.watches-1)))
		w.Stderr = os.Stderr
		must(t, w.Start())
		rep := &scaleReplica{cmd: w, exited: make(chan struct{}), metrics: metrics}
		go func() { _ = w.Wait(); close(rep.exited) }()
		t.Cleanup(func() { _ = w.Process.Kill(); <-rep.exited })
		replicas[name] = rep
	}

	start = time.Now()
	r.atSettle, r.settled = waitScale(t, k8s, replicas, func(s scaleCount) bool {
		return s.watching == sc.watches && s.queued == sc.queued()
	}, "")
	r.settle = time.Since(start)
	settleCounts, settleEvents, ok := scaleSnapshot(t, probe, k8s, sc)
	settleAt := time.Now()
	if ok {
		r.start, r.startTransferEvents, r.startOK = settleCounts.since(before), settleEvents, true
	}
	r.etcdSettle, err = probe.etcdDB(ctx)
	r.etcdSettleOK = err == nil

	if r.settled {
		time.Sleep(scaleRest)
		restCounts, restEvents, ok := scaleSnapshot(t, probe, k8s, sc)
		restAt := time.Now()
		r.restFor = restAt.Sub(settleAt)
		if ok && r.startOK {
			r.rest, r.restOK = restCounts.since(settleCounts), true
		}
		r.rss, r.heap = map[string]int64{}, map[string]string{}
		for name, w := range replicas {
			if r.rss[name], err = currentRSS(w.cmd.Process.Pid); err != nil {
				t.Fatal(err)
			}
			r.heap[name] = heapOf(t, w.metrics, name)
		}

		// Kill the replica that runs the most watches, as a node lost would.
		for name := range replicas {
			if r.victim == "" || r.atSettle.byWorker[name] > r.atSettle.byWorker[r.victim] {
				r.victim = name
			}
		}
		r.victimWatches = r.atSettle.byWorker[r.victim]
		must(t, replicas[r.victim].cmd.Process.Signal(syscall.SIGKILL))
		<-replicas[r.victim].exited
		killed := time.Now()
		r.afterFailover, r.adopted = waitScale(t, k8s, replicas, func(s scaleCount) bool {
			return s.byWorker[r.victim] == 0 && s.watching == sc.watches
		}, r.victim)
		r.adoption = time.Since(killed)
		time.Sleep(scaleAfterFailover)
		failCounts, failEvents, ok := scaleSnapshot(t, probe, k8s, sc)
		if ok && r.restOK {
			r.failover = failCounts.since(restCounts).lessRest(r.rest, r.restFor, time.Since(restAt))
			r.failoverTransferEvents, r.failoverOK = failEvents-restEvents, true
		}
	}

	since := r.etcdBefore
	if r.etcdSettleOK {
		since = r.etcdSettle
	}
	// The next compaction comes within an interval, or the first, two
	// intervals after the API server started.
	wait := max(scaleCompactionInterval, time.Until(controlPlaneStart.Add(2*scaleCompactionInterval))) + time.Minute
	r.etcdEnd, r.compacted, err = probe.afterCompaction(ctx, since, wait)
	r.etcdEndOK = err == nil

	names := slices.Sorted(maps.Keys(replicas))
	t.Log(r.table(names))
	if !r.settled {
		t.Errorf("not settled")
	} else if !r.adopted {
		t.Errorf("the survivors did not report the watches of %s", r.victim)
	}
}

// scaleSnapshot reads the API server's counts, and the writes of the
// transfers' events; ok is false (and logged) when the API server did not
// answer.
func scaleSnapshot(t *testing.T, probe *controlPlaneProbe, k8s client.Client, sc scale) (counts apiCounts, events int, ok bool) {
	t.Helper()
	counts, err := probe.apiCounts(t.Context())
	if err != nil {
		t.Logf("the API server's metrics: %v", err)
		return apiCounts{}, 0, false
	}
	if events, err = transferEventWrites(t.Context(), k8s, sc.transferNamespaces()); err != nil {
		t.Logf("the transfers' events: %v", err)
		return apiCounts{}, 0, false
	}
	return counts, events, true
}

// lessRest is c, counted over d, less what rest (counted over restFor)
// writes in that time, each resource's writes at least zero: what the
// failover wrote beyond the Leases' renewals and the rest.
func (c apiCounts) lessRest(rest apiCounts, restFor, d time.Duration) apiCounts {
	for k, v := range c.writes {
		c.writes[k] = max(0, v-rest.writes[k]*d.Seconds()/restFor.Seconds())
	}
	for k, v := range c.fetched {
		c.fetched[k] = max(0, v-rest.fetched[k]*d.Seconds()/restFor.Seconds())
	}
	return c
}

// lastPollTimePerHour is how many status writes a watch at rest makes an
// hour that the rest window cannot see: a watch writes a status in which
// only lastPollTime changed at its first poll past its least interval,
// which is between half of the worker's PollTimeEvery and all of it by
// the watch's UID (watches' pollTimeEvery); on average three quarters of
// it and half a poll. Its first such write comes half of PollTimeEvery
// after the watch first polled, past the end of the window whenever
// settling and the window take less.
func lastPollTimePerHour() (float64, time.Duration) {
	every := watches.DefaultLimits().PollTimeEvery
	return float64(time.Hour) / float64(every*3/4+scalePoll/2), every
}

// table is the run's figures beside their targets, then what the writes
// were for.
func (r *scaleResult) table(names []string) string {
	var b strings.Builder
	row := func(figure, value, target string, met *bool) {
		m := ""
		switch {
		case met == nil:
		case *met:
			m = "yes"
		default:
			m = "**no**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", figure, value, target, m)
	}
	is := func(b bool) *bool { return &b }
	unanswered := "(the API server did not answer)"
	fmt.Fprintf(&b, "\n| scale: %s watches, %s transfers (%d running), %d replicas | value | target | met |\n|---|---|---|---|\n",
		thousands(r.watches), thousands(r.transfers), r.running(), scaleReplicas)

	settled := fmt.Sprintf("until every watch polled and every transfer queued (%s) or running (%d), from the replicas' start", thousands(r.queued()), r.running())
	if r.settled {
		row(settled, minutes(r.settle), "≤ "+minutes(scaleSettleTarget), is(r.settle <= scaleSettleTarget))
	} else {
		row(settled, fmt.Sprintf("not after %s: %s watching, %s queued, %s running", minutes(r.settle),
			thousands(r.atSettle.watching), thousands(r.atSettle.queued), thousands(r.atSettle.running)), "≤ "+minutes(scaleSettleTarget), is(false))
	}

	// The Leases (each replica's membership, renewed every 5 s, and the
	// buckets' holders) cost the same whatever the watches: they are
	// counted apart from what a watch costs.
	watchStart := "API writes per watch started: all from the replicas' start until settled, but the transfers' and their events', and the Leases'"
	if r.startOK {
		w := r.start.total("transfers", "leases") - float64(r.startTransferEvents)
		per := w / float64(r.watches)
		row(watchStart, fmt.Sprintf("%.2f (%s writes; and %s to Leases)", per, thousands(int(w)), thousands(int(r.start.resource("leases")))),
			"≤ 3", is(r.settled && per <= scaleStartWritesTarget))
	} else {
		row(watchStart, unanswered, "≤ 3", is(false))
	}

	perHour, every := lastPollTimePerHour()
	hidden := float64(r.watches) * perHour / 3600
	if r.restOK {
		measured := r.rest.total() / r.restFor.Seconds()
		all := measured + hidden
		note := ""
		if r.settle+r.restFor >= every/2 {
			note = "; the window may hold some of them"
		}
		row(fmt.Sprintf("API writes a second at rest, all: over %s, and each watch's lastPollTime every %s or so (between %s and %s by its UID, and the next poll), computed%s",
			minutes(r.restFor), minutes(every*3/4+scalePoll/2), minutes(every/2), minutes(every), note),
			fmt.Sprintf("%.2f (%.2f measured + %.2f computed)", all, measured, hidden), "≤ 5", is(all <= scaleRestWritesTarget))
		leases := r.rest.resource("leases") / r.restFor.Seconds()
		row("API writes per watch per hour at rest (the same)", fmt.Sprintf("%.2f (%.2f measured, of them %.2f the Leases', + %.2f computed)",
			all*3600/float64(r.watches), measured*3600/float64(r.watches), leases*3600/float64(r.watches), perHour), "", nil)
	} else if r.settled {
		row("API writes a second at rest", unanswered, "≤ 5", is(false))
	}

	if r.failoverOK {
		w := max(0, r.failover.total("transfers", "leases")-float64(r.failoverTransferEvents))
		row(fmt.Sprintf("API writes per watch failed over: from the kill until %s after the survivors reported the last, less the same time at rest, but the transfers' and their events', and the Leases'",
			minutes(scaleAfterFailover)), fmt.Sprintf("%.2f (%s writes for %s watches; and %s to Leases)", w/float64(max(1, r.victimWatches)), thousands(int(w)),
			thousands(r.victimWatches), thousands(int(r.failover.resource("leases")))), "", nil)
	}

	// The database's size never shrinks without a defragmentation: under
	// the target before a compaction is under it after one.
	compaction := "after the API server's first compaction since they settled"
	if !r.compacted {
		compaction = "with no compaction seen since they settled"
	}
	if r.etcdEndOK {
		row("etcd's database (etcd_mvcc_db_total_size_in_bytes), "+compaction+"; in use (…_in_use_in_bytes)",
			megabytes(r.etcdEnd.total)+"; in use "+megabytes(r.etcdEnd.inUse), "< 1 GiB", is(r.etcdEnd.total < scaleEtcdTarget))
		row("etcd's database in use then, beyond what it held before the replicas started, per watch",
			fmt.Sprintf("%s bytes", thousands(int((r.etcdEnd.inUse-r.etcdBefore.inUse)/float64(r.watches)))), "", nil)
	} else {
		row("etcd's database (etcd_mvcc_db_total_size_in_bytes)", "(etcd did not answer)", "< 1 GiB", is(false))
	}
	settledDB := "(etcd did not answer)"
	if r.etcdSettleOK {
		settledDB = megabytes(r.etcdSettle.total) + "; in use " + megabytes(r.etcdSettle.inUse)
	}
	row("etcd's database before the replicas started (the objects alone); when they settled, before compaction",
		megabytes(r.etcdBefore.total)+"; in use "+megabytes(r.etcdBefore.inUse)+" · "+settledDB, "", nil)

	for _, n := range names {
		if rss, ok := r.rss[n]; ok {
			row(n+": watches held when settled, memory (RSS) at rest (its Go heap)", fmt.Sprintf("%s; %s (%s)", thousands(r.atSettle.byWorker[n]), megabytes(float64(rss)), r.heap[n]),
				"< 250 MB", is(float64(rss) < scaleRSSTarget))
		}
	}
	if r.victim != "" {
		target := shard.DefaultLeaseDuration + scalePoll
		value := minutes(r.adoption)
		if !r.adopted {
			value = fmt.Sprintf("not after %s: %s watching", minutes(r.adoption), thousands(r.afterFailover.watching))
		}
		row(fmt.Sprintf("the survivors report every watch of the replica killed (%s, SIGKILL, %s watches)", r.victim, thousands(r.victimWatches)),
			value, fmt.Sprintf("≤ the lease (%s) and one poll (%s)", minutes(shard.DefaultLeaseDuration), minutes(scalePoll)), is(r.adopted && r.adoption <= target))
		var held []string
		for _, n := range names {
			if n != r.victim {
				held = append(held, fmt.Sprintf("%s %s", n, thousands(r.afterFailover.byWorker[n])))
			}
		}
		row("the watches held by the survivors after", strings.Join(held, "; "), "even", nil)
	}

	// What each write was for: the API server's apiserver_request_total by
	// resource, subresource and verb, in each phase.
	for _, k := range sortedWriteKeys(r.start, r.rest, r.failover) {
		var parts []string
		if r.startOK {
			parts = append(parts, fmt.Sprintf("%s starting (%.2f a watch)", thousands(int(r.start.writes[k])), r.start.writes[k]/float64(r.watches)))
		}
		if r.restOK {
			parts = append(parts, fmt.Sprintf("%.2f/s at rest", r.rest.writes[k]/r.restFor.Seconds()))
		}
		if r.failoverOK {
			parts = append(parts, fmt.Sprintf("%s failing over (%.2f a watch)", thousands(int(r.failover.writes[k])), r.failover.writes[k]/float64(max(1, r.victimWatches))))
		}
		if c := r.start.conflicts[k] + r.rest.conflicts[k] + r.failover.conflicts[k]; c > 0 {
			parts = append(parts, fmt.Sprintf("of them %s conflicts (409)", thousands(int(c))))
		}
		row("writes: "+k.String(), strings.Join(parts, " · "), "", nil)
	}
	if r.startOK {
		value := thousands(r.startTransferEvents) + " starting"
		if r.failoverOK {
			value += " · " + thousands(r.failoverTransferEvents) + " failing over"
		}
		row("of the events' writes, the transfers' (from their Events: one each, one more for a series)", value, "", nil)
	}
	for _, k := range []listKey{{"configmaps", "etcd"}, {"configmaps", "watchcache"}, {"sftpwatches", "etcd"}, {"sftpwatches", "watchcache"}} {
		var parts []string
		if r.startOK {
			parts = append(parts, fmt.Sprintf("%s starting (%.1f a watch)", thousands(int(r.start.fetched[k])), r.start.fetched[k]/float64(r.watches)))
		}
		if r.restOK {
			parts = append(parts, fmt.Sprintf("%s/s at rest", thousands(int(r.rest.fetched[k]/r.restFor.Seconds()))))
		}
		if r.failoverOK {
			parts = append(parts, thousands(int(r.failover.fetched[k]))+" failing over")
		}
		if len(parts) > 0 {
			row(fmt.Sprintf("objects read for lists (apiserver_storage_list_fetched_objects_total): %s from %s", k.resource, k.storage), strings.Join(parts, " · "), "", nil)
		}
	}
	return b.String()
}

// scaleObjects makes the namespaces, connections, watches and transfers:
// watches of empty folders on sshd, and transfers from a server that never
// answers a listing, so that the ones that run hold their places and the
// rest stay queued.
func scaleObjects(t *testing.T, k8s client.Client, sc scale, sshd *testsshd.Server, tarpit *testsftp.Server, sink string) {
	t.Helper()
	ctx := t.Context()
	ready := func(c *v1alpha1.SftpConnection, root string) {
		must(t, k8s.Create(ctx, c))
		// No manager runs: the bench writes what its test would, so that
		// every write at rest is a worker's.
		c.Status.RootPath = root
		meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue,
			Reason: v1alpha1.ReasonConnected, Message: "set by the bench", ObservedGeneration: c.Generation})
		must(t, k8s.Status().Update(ctx, c))
	}
	var objects []client.Object
	for n := range sc.watches / scaleWatchesPerNamespace {
		ns := fmt.Sprintf("scale-watch-%03d", n)
		must(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
		must(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"},
			StringData: map[string]string{"password": sshd.Password}}))
		ready(&v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "box-" + ns}, Spec: v1alpha1.SftpConnectionSpec{
			Host: sshd.Host, Port: sshd.Port, Username: testsshd.User, RootPath: sshd.Dir,
			Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.LocalSecretReference{Name: "creds"}},
			HostKey:     v1alpha1.HostKeyTrust{Trusted: []string{sshd.HostKeyLine}},
		}}, sshd.Dir)
		for i := range scaleWatchesPerNamespace {
			folder := fmt.Sprintf("scale/%03d/%03d", n, i)
			must(t, os.MkdirAll(filepath.Join(sshd.Dir, folder), 0o755))
			objects = append(objects, &v1alpha1.SftpWatch{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("w-%03d", i)},
				Spec: v1alpha1.SftpWatchSpec{ConnectionRef: v1alpha1.ConnectionReference{Name: "box-" + ns}, Path: "/" + folder,
					PollInterval: &metav1.Duration{Duration: scalePoll}, Sink: &v1alpha1.Destination{URI: sink}}})
		}
	}
	for _, ns := range sc.transferNamespaces() {
		must(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
		must(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"},
			StringData: map[string]string{"password": tarpit.Password}}))
		ready(&v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tarpit-" + ns}, Spec: v1alpha1.SftpConnectionSpec{
			Host: tarpit.Host, Port: tarpit.Port, Username: tarpit.User,
			Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.LocalSecretReference{Name: "creds"}},
			HostKey:     v1alpha1.HostKeyTrust{Trusted: []string{tarpit.HostKeyLine()}},
		}}, "/")
		for i := range scaleTransfersPerNamespace {
			objects = append(objects, &v1alpha1.Transfer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("t-%03d", i)},
				Spec: v1alpha1.TransferSpec{
					Source: v1alpha1.TransferSource{ConnectionRef: v1alpha1.ConnectionReference{Name: "tarpit-" + ns}, Path: "/in"},
					TransferOptions: v1alpha1.TransferOptions{
						Destination: v1alpha1.TransferDestination{ConnectionRef: v1alpha1.ConnectionReference{Name: "tarpit-" + ns}, Path: "/out"}}}})
		}
	}
	var wg sync.WaitGroup
	next := make(chan client.Object)
	for range 32 {
		wg.Go(func() {
			for o := range next {
				must(t, k8s.Create(ctx, o))
			}
		})
	}
	for _, o := range objects {
		next <- o
	}
	close(next)
	wg.Wait()
}

// scaleCount is where the watches and transfers stand.
type scaleCount struct {
	watching, queued, running int
	// byWorker counts the watches each replica says it runs.
	byWorker map[string]int
}

// scaleReplica is a worker replica's process, and closed once it exited.
type scaleReplica struct {
	cmd    *exec.Cmd
	exited chan struct{}
	// metrics is its metrics address, which serves pprof too.
	metrics string
}

// waitScale lists the watches and transfers every 15 s until done says
// so, and returns what it found then, with true; gone names a replica
// killed, whose watches do not count as watching. A list the API server,
// busy, does not answer is tried again. Past scaleWait, or once another
// replica exited, it returns where things stand, with false.
func waitScale(t *testing.T, k8s client.Client, replicas map[string]*scaleReplica, done func(scaleCount) bool, gone string) (scaleCount, bool) {
	t.Helper()
	var s scaleCount
	for deadline, said := time.Now().Add(scaleWait), time.Now(); ; time.Sleep(15 * time.Second) {
		if time.Now().After(deadline) {
			t.Logf("after %s: %d watching, %d queued, %d running, by replica %v", scaleWait, s.watching, s.queued, s.running, s.byWorker)
			return s, false
		}
		for name, rep := range replicas {
			select {
			case <-rep.exited:
				if name != gone {
					t.Logf("%s exited (%v): %d watching, %d queued, %d running, by replica %v", name, rep.cmd.ProcessState, s.watching, s.queued, s.running, s.byWorker)
					return s, false
				}
			default:
			}
		}
		next, err := countScale(t.Context(), k8s, gone)
		if err != nil {
			t.Logf("listing: %v", err)
			continue
		}
		if s = next; done(s) {
			return s, true
		}
		if time.Since(said) > time.Minute {
			t.Logf("%s: %d watching, %d queued, %d running, by replica %v", time.Now().Format(time.TimeOnly), s.watching, s.queued, s.running, s.byWorker)
			said = time.Now()
		}
	}
}

// countScale counts where the watches and transfers stand, in pages of
// scaleListPage: the API server (1.37) serves a consistent list from its
// watch cache, and the pages after the first from the cache's snapshot
// (ListFromCacheSnapshot), so the bench's counting reads no watch from
// etcd and holds no list of 10,000 in one answer. (A list at
// resourceVersion 0 ignores the limit.)
func countScale(ctx context.Context, k8s client.Client, gone string) (scaleCount, error) {
	s := scaleCount{byWorker: map[string]int{}}
	for cont := ""; ; {
		var page v1alpha1.SftpWatchList
		if err := k8s.List(ctx, &page, client.Limit(scaleListPage), client.Continue(cont)); err != nil {
			return s, err
		}
		for i := range page.Items {
			w := &page.Items[i]
			s.byWorker[w.Status.Worker]++
			if meta.IsStatusConditionTrue(w.Status.Conditions, v1alpha1.ConditionReady) && w.Status.LastPollTime != nil &&
				(gone == "" || w.Status.Worker != gone) {
				s.watching++
			}
		}
		if cont = page.Continue; cont == "" {
			break
		}
	}
	for cont := ""; ; {
		var page v1alpha1.TransferList
		if err := k8s.List(ctx, &page, client.Limit(scaleListPage), client.Continue(cont)); err != nil {
			return s, err
		}
		for i := range page.Items {
			switch c := meta.FindStatusCondition(page.Items[i].Status.Conditions, v1alpha1.ConditionReady); {
			case c == nil:
			case c.Reason == v1alpha1.ReasonQueued:
				s.queued++
			default:
				s.running++
			}
		}
		if cont = page.Continue; cont == "" {
			break
		}
	}
	return s, nil
}

// heapOf is what a replica's Go heap holds, from the runtime's figures at
// the end of its heap profile: in use, where the next collection comes,
// and the goroutines' stacks. With SFTPGATE_BENCH_PROFILE set, the profile is saved
// as that file with ".heap.<name>" added.
func heapOf(t *testing.T, metrics, name string) string {
	t.Helper()
	resp, err := http.Get("http://" + metrics + "/debug/pprof/heap?debug=1")
	if err != nil {
		return "(unread: " + err.Error() + ")"
	}
	defer func() { _ = resp.Body.Close() }()
	text, err := io.ReadAll(resp.Body)
	if err != nil {
		return "(unread: " + err.Error() + ")"
	}
	stat := func(field string) float64 {
		m := regexp.MustCompile(`(?m)^# ` + field + ` = (\d+)`).FindSubmatch(text)
		if m == nil {
			return 0
		}
		n, _ := strconv.ParseFloat(string(m[1]), 64)
		return n
	}
	if out := os.Getenv("SFTPGATE_BENCH_PROFILE"); out != "" {
		if resp, err := http.Get("http://" + metrics + "/debug/pprof/heap"); err == nil {
			if b, err := io.ReadAll(resp.Body); err == nil {
				must(t, os.WriteFile(out+".heap."+name, b, 0o644))
			}
			_ = resp.Body.Close()
		}
	}
	return fmt.Sprintf("heap in use %s, next collection at %s; stacks %s", megabytes(stat("HeapInuse")), megabytes(stat("NextGC")), megabytes(stat("Stack")))
}
