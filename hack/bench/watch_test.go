package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/procs"
	"github.com/sftpgate/sftpgate/hack/fixtures/testhttp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsink"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
)

const (
	// The steady load: watches of folders of files each, in namespaces of
	// ten, polled every watchInterval.
	benchWatches  = 100
	filesPerWatch = 1000
	watchInterval = 10 * time.Second
	steadyFor     = time.Minute
	// latencyFiles are dropped one at a time into a folder watched every
	// 5 seconds, at random moments of its poll cycle.
	latencyFiles = 40
	// bigFolder is the folder of the supported size listed by one poll.
	bigFolder = 100_000
)

// TestBenchmarkWatches measures the worker, as its own process: its CPU
// and memory polling a hundred watches, the time from a file closed on
// the server to its event's arrival, and one poll of a folder of 100,000
// files.
func TestBenchmarkWatches(t *testing.T) {
	binary := os.Getenv("SFTPGATE_BENCH_BINARY")
	if binary == "" {
		t.Fatal("run it with make bench, which builds the binary it measures")
	}
	ctx := context.Background()
	// Namespace watch-<n> has a connection box-<n>: slugs are the
	// cluster's, one "box" each would conflict.
	r := startRig(t, binary, "watch-0", map[string]string{"box-0": ""}, io.Discard)
	for n := 1; n < benchWatches/10; n++ {
		r.addTenant(t, fmt.Sprintf("watch-%d", n), r.sshd, map[string]string{fmt.Sprintf("box-%d", n): ""})
	}
	for i := range benchWatches {
		fill(t, r.sshd, fmt.Sprintf("w-%03d", i), filesPerWatch)
	}
	sink := testsink.Start(t)
	// Each phase has a worker process of its own, so that one's memory
	// does not count in the next's.
	startWorker := func(identity string) (pid int, metricsAddr string, stop func()) {
		metricsAddr = testhttp.FreeAddr(t)
		worker := r.startWorker(t, binary, identity, "--metrics-address="+metricsAddr)
		return worker.Process.Pid, metricsAddr, func() { _ = worker.Process.Kill(); _ = worker.Wait() }
	}

	watch := func(ns, name, folder string, interval time.Duration, minAge *metav1.Duration) *v1alpha1.SftpWatch {
		w := &v1alpha1.SftpWatch{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.SftpWatchSpec{
			ConnectionRef: v1alpha1.ConnectionReference{Name: "box-" + strings.TrimPrefix(ns, "watch-")}, Path: "/" + folder,
			PollInterval: &metav1.Duration{Duration: interval}, Stability: v1alpha1.Stability{MinAge: minAge},
			Sink: &v1alpha1.Destination{URI: sink.URL}}}
		r.create(t, w)
		return w
	}
	// One poll of a folder of the supported size, by the worker alone.
	pid, metricsAddr, stop := startWorker("big")
	fill(t, r.sshd, "big", bigFolder)
	direct := directList(t, r.sshd, filepath.Join(r.sshd.Dir, "big"))
	sum, count := scrape(t, metricsAddr, "sftpgate_worker_poll_duration_seconds_sum"), scrape(t, metricsAddr, "sftpgate_worker_poll_duration_seconds_count")
	big := watch("watch-0", "big", "big", time.Hour, nil)
	waitWatching(t, r.k8s, big)
	polls := scrape(t, metricsAddr, "sftpgate_worker_poll_duration_seconds_count") - count
	pollTime := (scrape(t, metricsAddr, "sftpgate_worker_poll_duration_seconds_sum") - sum) / polls
	peak, err := peakRSS(pid)
	if err != nil {
		t.Fatal(err)
	}
	stateBytes, stateMaps := stateSize(t, r.k8s, benchWorkerNS, big)
	if err := r.k8s.Delete(ctx, big); err != nil {
		t.Fatal(err)
	}
	stop()

	pid, _, _ = startWorker("steady")

	var steady []*v1alpha1.SftpWatch
	for i := range benchWatches {
		steady = append(steady, watch(fmt.Sprintf("watch-%d", i/10), fmt.Sprintf("w-%03d", i), fmt.Sprintf("w-%03d", i), watchInterval, nil))
	}
	waitWatching(t, r.k8s, steady...)

	// Steady: a hundred watches polled, nothing changing.
	if err := resetPeakRSS(pid); err != nil {
		t.Fatal(err)
	}
	cpu := procs.TreeCPUTime(pid)
	time.Sleep(steadyFor)
	cores := (procs.TreeCPUTime(pid) - cpu).Seconds() / steadyFor.Seconds()
	steadyRSS, err := peakRSS(pid)
	if err != nil {
		t.Fatal(err)
	}

	// Latency, with the hundred watches still running.
	fill(t, r.sshd, "latency", 0)
	latency := watch("watch-0", "latency", "latency", 5*time.Second, &metav1.Duration{})
	waitWatching(t, r.k8s, latency)
	closed := map[string]time.Time{}
	for i := range latencyFiles {
		time.Sleep(mathrand.N(5 * time.Second))
		name := fmt.Sprintf("f-%02d.csv", i)
		if err := os.WriteFile(filepath.Join(r.sshd.Dir, "latency", name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		closed["/latency/"+name] = time.Now()
	}
	var delays []time.Duration
	for deadline := time.Now().Add(time.Minute); len(delays) < latencyFiles; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events arrived", len(delays), latencyFiles)
		}
		delays = delays[:0]
		for _, got := range sink.Taken() {
			if at, ok := closed[got.Event.Subject()]; ok {
				delays = append(delays, got.At.Sub(at))
			}
		}
	}
	slices.Sort(delays)

	fmt.Printf("\n%-58s %12s %12s\n", "worker", "measured", "target")
	fmt.Printf("%-58s %12.3f %12s\n", fmt.Sprintf("CPU, %d watches × %d files at a %s poll (cores)", benchWatches, filesPerWatch, watchInterval), cores, "< 0.2")
	fmt.Printf("%-58s %12.0f %12s\n", "peak RSS meanwhile (MB)", float64(steadyRSS)/1e6, "< 150")
	fmt.Printf("%-58s %12s %12s\n", "file closed → event received, 5 s poll, p50 / p99 (s)",
		fmt.Sprintf("%.1f / %.1f", delays[len(delays)/2].Seconds(), delays[len(delays)*99/100].Seconds()), "p99 <= 6.0")
	fmt.Printf("%-58s %12.2f %12s\n", fmt.Sprintf("one poll of %d files (s)", bigFolder), pollTime, "")
	fmt.Printf("%-58s %12.2f %12s\n", "  pkg/sftp ReadDir of the same folder (s)", direct.Seconds(), "")
	fmt.Printf("%-58s %12.0f %12s\n", "  the worker's peak RSS (MB)", float64(peak)/1e6, "")
	fmt.Printf("%-58s %12s %12s\n", "  its stored state (MB in ConfigMaps)", fmt.Sprintf("%.2f in %d", float64(stateBytes)/1e6, stateMaps), "")
}

// fill makes a folder of n files below the server's directory.
func fill(t *testing.T, sshd *testsshd.Server, folder string, n int) {
	t.Helper()
	dir := filepath.Join(sshd.Dir, folder)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Names and sizes vary as a partner's files do, so that the stored
	// state is not smaller than it would be (sizes are sparse: no memory).
	for i := range n {
		name := filepath.Join(dir, fmt.Sprintf("%s-%06d.csv", strings.ToLower(rand.Text()[:8]), i))
		if err := os.WriteFile(name, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(name, mathrand.Int64N(1<<30)); err != nil {
			t.Fatal(err)
		}
	}
}

// waitWatching waits until each watch has been polled and is Ready.
func waitWatching(t *testing.T, c client.Client, watches ...*v1alpha1.SftpWatch) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(time.Second) {
		ready, why := 0, ""
		for _, w := range watches {
			var got v1alpha1.SftpWatch
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(w), &got); err != nil {
				t.Fatal(err)
			}
			c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
			switch {
			case c != nil && c.Status == metav1.ConditionTrue && got.Status.LastPollTime != nil:
				ready++
			case c != nil:
				why = fmt.Sprintf("%s/%s: %s %s", got.Namespace, got.Name, c.Reason, c.Message)
			}
		}
		if ready == len(watches) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d watches are Ready; %s", ready, len(watches), why)
		}
	}
}

// directList times pkg/sftp's ReadDir of dir over a connection of its own.
func directList(t *testing.T, sshd *testsshd.Server, dir string) time.Duration {
	t.Helper()
	conn, err := ssh.Dial("tcp", net.JoinHostPort(sshd.Host, strconv.Itoa(int(sshd.Port))), &ssh.ClientConfig{
		User: testsshd.User, Auth: []ssh.AuthMethod{ssh.Password(sshd.Password)}, HostKeyCallback: ssh.FixedHostKey(sshd.HostKey)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	c, err := sftp.NewClient(conn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	start := time.Now()
	if _, err := c.ReadDir(dir); err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}

// stateSize sums the stored state of watch w in the worker's namespace.
func stateSize(t *testing.T, c client.Client, ns string, w *v1alpha1.SftpWatch) (bytes, maps int) {
	t.Helper()
	var list corev1.ConfigMapList
	if err := c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, cm := range list.Items {
		if !strings.HasPrefix(cm.Name, "sftpwatch-"+string(w.UID)) {
			continue
		}
		for _, v := range cm.BinaryData {
			bytes += len(v)
		}
		for _, v := range cm.Data {
			bytes += len(v)
		}
		maps++
	}
	return bytes, maps
}
