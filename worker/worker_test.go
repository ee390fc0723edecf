package worker_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsink"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/internal/egress"
	"github.com/sftpgate/sftpgate/test/framework"
	"github.com/sftpgate/sftpgate/worker"
	"github.com/sftpgate/sftpgate/worker/auditsinks"
	"github.com/sftpgate/sftpgate/worker/shard"
	"github.com/sftpgate/sftpgate/worker/statestore"
	"github.com/sftpgate/sftpgate/worker/watches"
)

// The test kit's, as every test package has them.
var (
	must       = testkit.Must
	eventually = testkit.Eventually
)

var (
	k8s        client.Client
	restConfig *rest.Config
)

func TestMain(m *testing.M) {
	testcluster.LogErrors()
	env, c, err := testcluster.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s, restConfig = c, env.Config
	ctx, cancel := context.WithCancel(context.Background())
	managerDir, err := os.MkdirTemp("", "sftpgate-manager-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	manager, err := framework.StartManager(ctx, env, managerDir, "--max-concurrent-tests=4")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	stopSharedWorker()
	cancel()
	_ = manager.Kill()
	_ = os.RemoveAll(managerDir)
	_ = env.Stop()
	os.Exit(code)
}

// tenant is a namespace with a Ready connection to a real sshd, rooted in
// its directory.
type tenant struct {
	ns   string
	sshd *testsshd.Server
	sftp *sftp.Client
}

func newTenant(t *testing.T) *tenant {
	t.Helper()
	sshd := testsshd.Start(t)
	ns := testkit.Namespace(t, k8s, "watch-")
	testkit.ReadyConnection(t, k8s, ns, "box", sshd.Login())
	must(t, os.Mkdir(filepath.Join(sshd.Dir, "in"), 0o755))
	must(t, os.Chown(filepath.Join(sshd.Dir, "in"), sshd.UID, sshd.GID))
	sshClient, err := ssh.Dial("tcp", net.JoinHostPort(sshd.Host, strconv.Itoa(int(sshd.Port))), &ssh.ClientConfig{
		User: testsshd.User, Auth: []ssh.AuthMethod{ssh.Password(sshd.Password)}, HostKeyCallback: ssh.FixedHostKey(sshd.HostKey)})
	must(t, err)
	c, err := sftp.NewClient(sshClient)
	must(t, err)
	t.Cleanup(func() { _ = c.Close(); _ = sshClient.Close() })
	return &tenant{ns: ns, sshd: sshd, sftp: c}
}

// put writes content to p (below the connection's root) as a plain SFTP
// client, in one go.
func (tn *tenant) put(t *testing.T, p, content string) {
	t.Helper()
	f, err := tn.sftp.Create(filepath.Join(tn.sshd.Dir, p))
	must(t, err)
	_, err = f.Write([]byte(content))
	must(t, err)
	must(t, f.Close())
}

// watchOf makes a watch of tenant's /in, polled every 5 seconds, that
// sends its events to sink.
func (tn *tenant) watch(t *testing.T, name, sink string, mutate ...func(*v1alpha1.SftpWatch)) *v1alpha1.SftpWatch {
	t.Helper()
	w := &v1alpha1.SftpWatch{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: name}, Spec: v1alpha1.SftpWatchSpec{
		ConnectionRef: v1alpha1.ConnectionReference{Name: "box"}, Path: "/in",
		PollInterval: &metav1.Duration{Duration: 5 * time.Second}, Stability: v1alpha1.Stability{MinAge: &metav1.Duration{}},
		Events: []v1alpha1.WatchEvent{v1alpha1.WatchCreated, v1alpha1.WatchModified, v1alpha1.WatchDeleted},
		Sink:   &v1alpha1.Destination{URI: sink}, Delivery: v1alpha1.DeliverySpec{BackoffDelay: "PT0.2S"}}}
	for _, m := range mutate {
		m(w)
	}
	must(t, k8s.Create(context.Background(), w))
	return w
}

// sharedWorker is the one worker replica of this package's tests, which
// run in parallel: a second replica would share their watches.
var (
	sharedWorker     sync.Once
	stopSharedWorker = func() {}
)

// startWorker starts the tests' worker replica, "w1", unless it runs.
func startWorker(t *testing.T) {
	t.Helper()
	sharedWorker.Do(func() { stopSharedWorker = runWorker(t, "w1") })
}

// runWorker runs a worker replica named identity until the program ends
// (or until it is stopped with the returned function).
func runWorker(t *testing.T, identity string, mutate ...func(*worker.Options)) (stop func()) {
	t.Helper()
	return runWorkerOn(t, restConfig, identity, mutate...)
}

// runWorkerOn is runWorker with the replica's own rest config (one that
// counts its requests).
func runWorkerOn(t *testing.T, cfg *rest.Config, identity string, mutate ...func(*worker.Options)) (stop func()) {
	t.Helper()
	opts := worker.Options{Namespace: workerNamespace(t), Identity: identity, Networks: egress.Networks{DeniedNetworks: testcluster.LoopbackNetworks},
		LeaseDuration: 3 * time.Second, Limits: watches.Limits{WriteEvery: 200 * time.Millisecond, PollTimeEvery: time.Nanosecond}, MetricsAddr: "0", ProbeAddr: "0",
		UploadSweepInterval: 200 * time.Millisecond, AuditSinks: auditsinks.Limits{Outbox: auditOutbox, Recent: 20}, Log: workerLog.tee(testcluster.Log("worker")),
		Clock: expectationClock.now}
	for _, m := range mutate {
		m(&opts)
	}
	w, err := worker.New(cfg, opts)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := w.Start(ctx); err != nil {
			t.Errorf("worker %s: %v", identity, err)
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { cancel(); <-done }) }
}

var (
	workerNS     string
	workerNSOnce sync.Once
)

// workerNamespace is the namespace of the tests' workers.
func workerNamespace(t *testing.T) string {
	workerNSOnce.Do(func() {
		must(t, testcluster.EnsureNamespace(context.Background(), restConfig, "sftpgate-worker-test"))
		workerNS = "sftpgate-worker-test"
	})
	return workerNS
}

// TestWatch: files that arrive, change and go, by a plain SFTP client and
// on the server's disk, are each reported once, in order, with ids that
// name the file and its state; the watch says it is Ready.
func TestWatch(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	r := testsink.Start(t)
	startWorker(t)
	w := tn.watch(t, "incoming", r.URL)
	var status v1alpha1.SftpWatchStatus
	defer func() {
		if t.Failed() {
			t.Logf("the watch's status: %+v", status)
		}
	}()
	eventually(t, "the watch is Ready", func() bool {
		var got v1alpha1.SftpWatch
		must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(w), &got))
		status = got.Status
		return meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady) && got.Status.SinkURI == r.URL
	})
	next := testkit.Polls(t, k8s, w)
	tn.put(t, "in/a.csv", "alpha")
	must(t, os.WriteFile(filepath.Join(tn.sshd.Dir, "in", "b.csv"), []byte("bravo"), 0o644))
	eventually(t, "both files are reported", func() bool { return len(r.Subjects()) >= 2 })
	tn.put(t, "in/a.csv", "alpha, longer")
	must(t, tn.sftp.Remove(filepath.Join(tn.sshd.Dir, "in", "b.csv")))
	eventually(t, "the change and the removal are reported", func() bool { return len(r.Subjects()) >= 4 })
	next(2) // no event comes twice
	// A removal is reported at the first poll that misses the file; a
	// change once a second poll saw it settled.
	want := []string{"dev.sftpgate.file.created /in/a.csv", "dev.sftpgate.file.created /in/b.csv",
		"dev.sftpgate.file.deleted /in/b.csv", "dev.sftpgate.file.modified /in/a.csv"}
	if got := r.Subjects(); !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	var got v1alpha1.SftpWatch
	must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(w), &got))
	if got.Status.Delivered != 4 || got.Status.Pending != 0 || got.Status.Files != 1 || got.Status.Worker != "w1" {
		t.Errorf("status %+v", got.Status)
	}
}

// TestWatchWaitsForTheSink: while the sink is down, events wait, in order,
// and the watch says DeliveryFailing; once it is back, it gets each of
// them once, in the order the files arrived, and each file moves to
// afterDelivery.moveTo.
func TestWatchWaitsForTheSink(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	r := testsink.Start(t)
	r.SetAnswer(http.StatusServiceUnavailable)
	startWorker(t)
	w := tn.watch(t, "incoming", r.URL, func(w *v1alpha1.SftpWatch) {
		w.Spec.AfterDelivery = v1alpha1.AfterDelivery{Action: v1alpha1.AfterDeliveryMove, MoveTo: "/done"}
		// Tries go on after the retries, until the sink is back: linear,
		// so that the test does not wait long for the last.
		w.Spec.Delivery.BackoffPolicy = v1alpha1.BackoffLinear
	})
	next := testkit.Polls(t, k8s, w)
	next(1)
	for i := range 3 {
		tn.put(t, fmt.Sprintf("in/%d.csv", i), "x")
		next(1)
	}
	eventually(t, "the watch says delivery fails", func() bool {
		var got v1alpha1.SftpWatch
		must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(w), &got))
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == v1alpha1.ReasonDeliveryFailing && got.Status.Pending == 3
	})
	r.SetAnswer(0)
	eventually(t, "every event is delivered", func() bool { return len(r.Subjects()) >= 3 })
	next(2)
	want := []string{"dev.sftpgate.file.created /in/0.csv", "dev.sftpgate.file.created /in/1.csv", "dev.sftpgate.file.created /in/2.csv"}
	if got := r.Subjects(); !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	for i := range 3 {
		if _, err := os.Stat(filepath.Join(tn.sshd.Dir, "done", fmt.Sprintf("%d.csv", i))); err != nil {
			t.Errorf("the delivered file %d was not moved: %v", i, err)
		}
	}
}

// TestWatchRetriesAfterDelivery: a file whose move after delivery failed
// (here, moveTo not writable) is moved at a later poll once it can be,
// and its event is not sent again. (make chaos, seed 1: a move cut by an
// sshd restart left the original in the inbox for good.)
func TestWatchRetriesAfterDelivery(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	sink := testsink.Start(t)
	startWorker(t)
	done := filepath.Join(tn.sshd.Dir, "done")
	must(t, os.Mkdir(done, 0o555))
	must(t, os.Chown(done, tn.sshd.UID, tn.sshd.GID))
	w := tn.watch(t, "incoming", sink.URL, func(w *v1alpha1.SftpWatch) {
		w.Spec.AfterDelivery = v1alpha1.AfterDelivery{Action: v1alpha1.AfterDeliveryMove, MoveTo: "/done"}
	})
	next := testkit.Polls(t, k8s, w)
	next(1)
	tn.put(t, "in/a.csv", "x")
	eventually(t, "the event is delivered", func() bool { return len(sink.Subjects()) == 1 })
	next(2)
	if _, err := os.Stat(filepath.Join(tn.sshd.Dir, "in", "a.csv")); err != nil {
		t.Fatalf("the file left the inbox though moveTo is not writable: %v", err)
	}
	must(t, os.Chmod(done, 0o755))
	eventually(t, "the file moves once it can", func() bool {
		_, err := os.Stat(filepath.Join(done, "a.csv"))
		return err == nil
	})
	next(1)
	if n := len(sink.Subjects()); n != 1 {
		t.Errorf("%d events, want the one", n)
	}
}

// TestWatchDeadLetters: an event the sink fails every try for goes to the
// dead-letter sink, and its file to afterDelivery.failedTo.
func TestWatchDeadLetters(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	sink, dead := testsink.Start(t), testsink.Start(t)
	sink.SetAnswer(http.StatusServiceUnavailable)
	startWorker(t)
	w := tn.watch(t, "incoming", sink.URL, func(w *v1alpha1.SftpWatch) {
		w.Spec.Delivery.Retry = ptr(int32(1))
		w.Spec.Delivery.DeadLetterSink = &v1alpha1.Destination{URI: dead.URL}
		w.Spec.AfterDelivery = v1alpha1.AfterDelivery{Action: v1alpha1.AfterDeliveryDelete, FailedTo: "/failed"}
	})
	testkit.Polls(t, k8s, w)(1)
	tn.put(t, "in/a.csv", "x")
	eventually(t, "the event reaches the dead-letter sink", func() bool { return len(dead.Subjects()) == 1 })
	eventually(t, "the file moves to failedTo", func() bool {
		_, err := os.Stat(filepath.Join(tn.sshd.Dir, "failed", "a.csv"))
		return err == nil
	})
	// The status follows, written at most every WriteEvery.
	eventually(t, "the status counts the dead-lettered event", func() bool {
		var got v1alpha1.SftpWatch
		must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(w), &got))
		return got.Status.DeadLettered == 1 && got.Status.Failed >= 2
	})
}

func ptr[T any](v T) *T { return &v }

// TestWatchSinkUnreachable: a sink that does not answer at all is told
// apart from one that answers with an error; the event waits for it.
func TestWatchSinkUnreachable(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	closed := "http://" + l.Addr().String()
	must(t, l.Close())
	startWorker(t)
	w := tn.watch(t, "incoming", closed)
	testkit.Polls(t, k8s, w)(1)
	tn.put(t, "in/a.csv", "x")
	eventually(t, "the watch says the sink is unreachable", func() bool {
		var got v1alpha1.SftpWatch
		must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(w), &got))
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == v1alpha1.ReasonSinkUnreachable && got.Status.Pending == 1
	})
}

// TestWatchReportsAFileOnceItSettles: a file that grows across polls is
// reported once, with its final size, after it stops; files whose client
// kept an old modification time are reported as created and as changed.
func TestWatchReportsAFileOnceItSettles(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	r := testsink.Start(t)
	startWorker(t)
	w := tn.watch(t, "incoming", r.URL)
	next := testkit.Polls(t, k8s, w)
	next(1)
	f, err := tn.sftp.Create(filepath.Join(tn.sshd.Dir, "in", "growing.csv"))
	must(t, err)
	for range 3 {
		_, err := f.Write([]byte("a line of a slow upload\n"))
		must(t, err)
		next(1)
	}
	must(t, f.Close())
	eventually(t, "the grown file is reported", func() bool { return len(r.Subjects()) >= 1 })

	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	tn.put(t, "in/old.csv", "from an old backup")
	must(t, tn.sftp.Chtimes(filepath.Join(tn.sshd.Dir, "in", "old.csv"), old, old))
	eventually(t, "the old file is reported", func() bool { return len(r.Subjects()) >= 2 })
	tn.put(t, "in/old.csv", "from an older backup, longer")
	must(t, tn.sftp.Chtimes(filepath.Join(tn.sshd.Dir, "in", "old.csv"), old, old))
	eventually(t, "its change is reported", func() bool { return len(r.Subjects()) >= 3 })
	next(2)
	want := []string{"dev.sftpgate.file.created /in/growing.csv", "dev.sftpgate.file.created /in/old.csv", "dev.sftpgate.file.modified /in/old.csv"}
	if got := r.Subjects(); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	var data struct{ Size int64 }
	must(t, r.Events()[0].DataAs(&data))
	if data.Size != 3*int64(len("a line of a slow upload\n")) {
		t.Errorf("the grown file was reported at %d bytes", data.Size)
	}
}

// TestWatchLargeFolder: a folder of 100,000 files, the default bound, is
// watched; one more file makes the watch DirectoryTooLarge, reporting
// nothing and losing nothing; once the folder shrinks below the bound
// again, what changed meanwhile is reported.
func TestWatchLargeFolder(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	r := testsink.Start(t)
	dir := filepath.Join(tn.sshd.Dir, "in")
	for i := range watches.DefaultLimits().MaxFiles {
		must(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f-%06d", i)), nil, 0o644))
	}
	startWorker(t)
	w := tn.watch(t, "incoming", r.URL)
	reason := func() (string, v1alpha1.SftpWatchStatus) {
		var got v1alpha1.SftpWatch
		must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(w), &got))
		if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); c != nil {
			return c.Reason, got.Status
		}
		return "", got.Status
	}
	eventually(t, "the watch tracks 100,000 files", func() bool {
		why, st := reason()
		return why == v1alpha1.ReasonWatching && st.Files == int32(watches.DefaultLimits().MaxFiles)
	})
	must(t, os.WriteFile(filepath.Join(dir, "extra.csv"), nil, 0o644))
	eventually(t, "the watch says the folder is too large", func() bool {
		why, _ := reason()
		return why == v1alpha1.ReasonDirectoryTooLarge
	})
	must(t, os.Remove(filepath.Join(dir, "f-000000")))
	must(t, os.Remove(filepath.Join(dir, "f-000001")))
	eventually(t, "the changes are reported", func() bool { return len(r.Subjects()) >= 3 })
	testkit.Polls(t, k8s, w)(1)
	// A removal is reported at the first poll that misses the file, a
	// new file once a second poll saw it settled.
	want := []string{"dev.sftpgate.file.deleted /in/f-000000", "dev.sftpgate.file.deleted /in/f-000001", "dev.sftpgate.file.created /in/extra.csv"}
	if got := r.Subjects(); !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	if why, _ := reason(); why != v1alpha1.ReasonWatching {
		t.Errorf("Ready's reason is %s", why)
	}
}

// TestWatchesWaitForRoomOnTheReplica: past the files a replica may
// track (its memory's bound), a watch that would track more waits
// (ReplicaAtCapacity) instead of growing the process, while the watch
// already held goes on reporting; once room is made, it runs. Not
// parallel: its replica is the only one.
func TestWatchesWaitForRoomOnTheReplica(t *testing.T) {
	ctx := context.Background()
	victim, attacker := newTenant(t), newTenant(t)
	for i := range 5 {
		victim.put(t, fmt.Sprintf("in/v-%d", i), "v")
	}
	for i := range 10 {
		attacker.put(t, fmt.Sprintf("in/a-%d", i), "a")
	}
	const ns = "sftpgate-held-files-test"
	must(t, testcluster.EnsureNamespace(ctx, restConfig, ns))
	stop := runWorker(t, "capped", func(o *worker.Options) { o.Namespace, o.Limits.MaxHeldFiles = ns, 12 })
	defer stop()
	r := testsink.Start(t)
	reason := func(w *v1alpha1.SftpWatch) string {
		var got v1alpha1.SftpWatch
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(w), &got))
		if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); c != nil {
			return c.Reason
		}
		return ""
	}
	mine := victim.watch(t, "mine", r.URL)
	eventually(t, "the victim's watch runs", func() bool { return reason(mine) == v1alpha1.ReasonWatching })
	theirs := attacker.watch(t, "theirs", r.URL)
	eventually(t, "the attacker's watch waits for room", func() bool { return reason(theirs) == v1alpha1.ReasonReplicaAtCapacity })
	victim.put(t, "in/new.csv", "meanwhile")
	eventually(t, "the victim's new file is reported", func() bool {
		return slices.Contains(r.Subjects(), "dev.sftpgate.file.created /in/new.csv")
	})
	must(t, k8s.Delete(ctx, mine))
	eventually(t, "the attacker's watch runs once there is room", func() bool { return reason(theirs) == v1alpha1.ReasonWatching })
	must(t, k8s.Delete(ctx, theirs))
}

// TestWhatDeletedWatchesLeaveIsSwept: a state and a Lease left by a watch
// deleted while no live replica held it (one that died holding it) are
// removed by a sweep; a live replica's are not.
func TestWhatDeletedWatchesLeaveIsSwept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	startWorker(t)
	ns := workerNamespace(t)
	states := &statestore.Store{Client: k8s, Namespace: ns, Kind: "sftpwatch"}
	var v statestore.Version
	must(t, states.Save(ctx, "gone-watch", "default", []byte("what it had seen"), &v))
	dead := &shard.Shard{Cache: k8s, Client: k8s, Namespace: ns, Kind: "sftpwatch", Identity: "dead-replica",
		LeaseDuration: time.Second, Clock: clocktesting.NewFakeClock(time.Now().Add(-time.Hour))}
	if _, _, err := dead.Sync(ctx, []string{"gone-watch"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the state and the Lease are swept", func() bool {
		keys, err := states.Keys(ctx)
		must(t, err)
		var lease coordinationv1.Lease
		err = k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "sftpwatch-gone-watch"}, &lease)
		return !slices.Contains(keys, "gone-watch") && apierrors.IsNotFound(err)
	})
}

// TestWatchOnTheInProcessServer: a watch works against the tests'
// in-process SFTP server (pkg/sftp's request server) as against OpenSSH;
// the demo server of make run is hack/dev's test's.
func TestWatchOnTheInProcessServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := testsftp.Start(t)
	must(t, os.Mkdir(filepath.Join(srv.Dir, "in"), 0o755))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "watch-"}}
	must(t, k8s.Create(ctx, ns))
	must(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "creds"},
		StringData: map[string]string{v1alpha1.SecretKeyPassword: srv.Password}}))
	must(t, k8s.Create(ctx, &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "box"}, Spec: v1alpha1.SftpConnectionSpec{
		Host: srv.Host, Port: srv.Port, Username: srv.User, Slug: "box-" + ns.Name,
		Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.LocalSecretReference{Name: "creds"}},
		HostKey:     v1alpha1.HostKeyTrust{Trusted: []string{srv.HostKeyLine()}}}}))
	r := testsink.Start(t)
	startWorker(t)
	tn := &tenant{ns: ns.Name}
	w := tn.watch(t, "incoming", r.URL)
	testkit.Polls(t, k8s, w)(1)
	must(t, os.WriteFile(filepath.Join(srv.Dir, "in", "b.csv"), []byte("x"), 0o644))
	eventually(t, "the file is reported", func() bool { return len(r.Subjects()) >= 1 })
	testkit.Polls(t, k8s, w)(2)
	if got := r.Subjects(); !slices.Equal(got, []string{"dev.sftpgate.file.created /in/b.csv"}) {
		t.Errorf("events %v", got)
	}
}
