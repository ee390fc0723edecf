package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
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
)

// The test kit's, as every test package has them.
var must = testkit.Must

const (
	// The scale: watches in namespaces of scaleWatchesPerNamespace (the
	// worker's default quota), and transfers in namespaces of
	// scaleTransfersPerNamespace, of which the worker runs 5 at once.
	scaleWatchesPerNamespace   = 100
	scaleTransfersPerNamespace = 100
	scaleReplicas              = 3
	// scalePoll is the watches' poll interval: the bench measures how the
	// replicas divide and hold the work, not how many polls one sshd on
	// the bench's cores answers.
	scalePoll = 5 * time.Minute
	// scaleRest is how long the writes at rest are counted.
	scaleRest = 2 * time.Minute
)

// scaleWatches is how many watches the scale bench runs: 10,000, or
// SFTPGATE_BENCH_SCALE (a multiple of 1,000); a tenth as many transfers.
var scaleWatches, scaleTransfers = func() (int, int) {
	n, err := strconv.Atoi(os.Getenv("SFTPGATE_BENCH_SCALE"))
	if err != nil || n < 1000 || n%1000 != 0 {
		n = 10_000
	}
	return n, n / 10
}()

// TestBenchmarkScale runs 10,000 watches and 1,000 transfers (all but 50
// queued) on three worker replicas against one API server, and measures
// the API writes per second at rest, each replica's memory, and how long
// the two survivors take to adopt the work of a replica killed.
func TestBenchmarkScale(t *testing.T) {
	binary := os.Getenv("SFTPGATE_BENCH_BINARY")
	if binary == "" {
		t.Fatal("run it with make bench, which builds the binary it measures")
	}
	ctx := t.Context()
	env, _, err := testcluster.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
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
	scaleObjects(t, k8s, sshd, tarpit, sink.URL)
	t.Logf("made %d watches and %d transfers in %s", scaleWatches, scaleTransfers, time.Since(start).Round(time.Second))

	workerNS := "sftpgate-scale-worker"
	must(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workerNS}}))
	replicas := map[string]*exec.Cmd{}
	for i := range scaleReplicas {
		name := fmt.Sprintf("replica-%d", i)
		w := exec.Command(binary, "worker", "--kubeconfig="+kubeconfig, "--namespace="+workerNS, "--identity="+name,
			"--metrics-address="+testhttp.FreeAddr(t), "--health-probe-bind-address=0", "--log-level=error",
			"--denied-networks="+testcluster.LoopbackNetworks,
			// It measures where the default total (what this bench
			// settled) would hold the rest back.
			"--max-watches-total="+strconv.Itoa(scaleWatches))
		w.Stderr = os.Stderr
		must(t, w.Start())
		t.Cleanup(func() { _ = w.Process.Kill(); _ = w.Wait() })
		replicas[name] = w
	}

	start = time.Now()
	settled := waitScale(t, k8s, func(s scaleCount) bool {
		return s.watching == scaleWatches && s.queued == scaleTransfers-scaleTransfers/scaleTransfersPerNamespace*5
	}, nil)
	settle := time.Since(start)

	writes := apiWrites(t, env.Config)
	time.Sleep(scaleRest)
	atRest := (apiWrites(t, env.Config) - writes) / scaleRest.Seconds()
	rss := map[string]int64{}
	for name, w := range replicas {
		rss[name], err = currentRSS(w.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
	}

	// Kill the replica that runs the most watches, as a node lost would.
	victim := ""
	for name := range replicas {
		if victim == "" || settled.byWorker[name] > settled.byWorker[victim] {
			victim = name
		}
	}
	must(t, replicas[victim].Process.Signal(syscall.SIGKILL))
	_ = replicas[victim].Wait()
	killed := time.Now()
	adopted := waitScale(t, k8s, func(s scaleCount) bool {
		return s.byWorker[victim] == 0 && s.watching == scaleWatches
	}, &victim)
	adoption := time.Since(killed)

	names := slices.Sorted(func(yield func(string) bool) {
		for n := range replicas {
			if !yield(n) {
				return
			}
		}
	})
	var b strings.Builder
	fmt.Fprintf(&b, "\n| scale: %d watches, %d transfers (%d running), %d replicas | figure |\n|---|---|\n",
		scaleWatches, scaleTransfers, scaleTransfers/scaleTransfersPerNamespace*5, scaleReplicas)
	fmt.Fprintf(&b, "| until every watch polled and every transfer queued or running | %s |\n", settle.Round(time.Second))
	fmt.Fprintf(&b, "| API writes per second at rest (over %s) | %.2f |\n", scaleRest, atRest)
	for _, n := range names {
		fmt.Fprintf(&b, "| %s: watches held, memory (RSS) at rest | %d, %d MiB |\n", n, settled.byWorker[n], rss[n]>>20)
	}
	fmt.Fprintf(&b, "| survivors adopt the %d watches of the replica killed | %s |\n", settled.byWorker[victim], adoption.Round(time.Second))
	fmt.Fprintf(&b, "| after: watches held by the survivors | %v |\n", adopted.byWorker)
	t.Log(b.String())
}

// scaleObjects makes the namespaces, connections, watches and transfers:
// watches of empty folders on sshd, and transfers from a server that never
// answers a listing, so that the ones that run hold their places and the
// rest stay queued.
func scaleObjects(t *testing.T, k8s client.Client, sshd *testsshd.Server, tarpit *testsftp.Server, sink string) {
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
	for n := range scaleWatches / scaleWatchesPerNamespace {
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
	for n := range scaleTransfers / scaleTransfersPerNamespace {
		ns := fmt.Sprintf("scale-transfer-%03d", n)
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

// waitScale lists the watches and transfers every few seconds until done
// says so, and returns what it found then; gone names a replica whose
// watches do not count as watching. A list the API server, busy, does not
// answer is tried again. Past 30 minutes it fails, saying where things
// stand.
func waitScale(t *testing.T, k8s client.Client, done func(scaleCount) bool, gone *string) scaleCount {
	t.Helper()
	var s scaleCount
	for deadline, said := time.Now().Add(30*time.Minute), time.Now(); ; time.Sleep(15 * time.Second) {
		if time.Now().After(deadline) {
			t.Fatalf("after 30 minutes: %+v", s)
		}
		var err error
		if s, err = countScale(t.Context(), k8s, gone); err != nil {
			t.Logf("listing: %v", err)
			continue
		}
		if done(s) {
			return s
		}
		if time.Since(said) > time.Minute {
			t.Logf("%s: %d watching, %d queued, %d running, by replica %v", time.Now().Format(time.TimeOnly), s.watching, s.queued, s.running, s.byWorker)
			said = time.Now()
		}
	}
}

// countScale counts where the watches and transfers stand, as the API
// server's watch cache has them: a consistent list of thousands of
// objects, from etcd, is what a busy API server stops answering.
func countScale(ctx context.Context, k8s client.Client, gone *string) (scaleCount, error) {
	s := scaleCount{byWorker: map[string]int{}}
	var watches v1alpha1.SftpWatchList
	if err := k8s.List(ctx, &watches, fromWatchCache()); err != nil {
		return s, err
	}
	for i := range watches.Items {
		w := &watches.Items[i]
		s.byWorker[w.Status.Worker]++
		if meta.IsStatusConditionTrue(w.Status.Conditions, v1alpha1.ConditionReady) && w.Status.LastPollTime != nil &&
			(gone == nil || w.Status.Worker != *gone) {
			s.watching++
		}
	}
	var transfers v1alpha1.TransferList
	if err := k8s.List(ctx, &transfers, fromWatchCache()); err != nil {
		return s, err
	}
	for i := range transfers.Items {
		switch c := meta.FindStatusCondition(transfers.Items[i].Status.Conditions, v1alpha1.ConditionReady); {
		case c == nil:
		case c.Reason == v1alpha1.ReasonQueued:
			s.queued++
		default:
			s.running++
		}
	}
	return s, nil
}

// fromWatchCache is a list from the API server's watch cache (new each
// time: a List writes into its options).
func fromWatchCache() *client.ListOptions {
	return &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}}
}

// apiWrites is how many writes (creates, updates, patches, deletes) the
// API server has answered since it started, from its own metrics.
func apiWrites(t *testing.T, cfg *rest.Config) float64 {
	t.Helper()
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := url.JoinPath(cfg.Host, "metrics") // Host may end in a slash
	if err != nil {
		t.Fatal(err)
	}
	resp, err := httpClient.Get(metrics)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the API server's metrics: %s", resp.Status)
	}
	total := 0.0
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	for lines.Scan() {
		line := lines.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		verb := ""
		if _, rest, ok := strings.Cut(line, `verb="`); ok {
			verb, _, _ = strings.Cut(rest, `"`)
		}
		switch verb {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY":
			v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
			if err != nil {
				t.Fatal(err)
			}
			total += v
		}
	}
	return total
}
