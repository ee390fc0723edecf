package faults

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testproxy"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsink"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/internal/tempname"
	"github.com/sftpgate/sftpgate/test/framework"
)

// workers is every worker replica of the system, running or not, by its
// name (its identity, which a watch's or a transfer's status names).
func workers() map[string]*framework.Process {
	out := map[string]*framework.Process{}
	for _, p := range sys.Processes() {
		if strings.HasPrefix(p.Name, "worker-") {
			out[p.Name] = p
		}
	}
	return out
}

// restoreWorkers starts again, when the test ends, the system's workers
// it ended, for the tests after it.
func restoreWorkers(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		for _, p := range sys.Workers {
			if !p.Running() {
				must(t, p.Start(context.Background()))
			}
		}
	})
}

// deleteWhenDone deletes obj when the test ends, before its servers stop:
// a watch left behind would poll a server gone.
func deleteWhenDone(t *testing.T, obj client.Object) {
	t.Helper()
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
}

// TestWorkerKilledMidDelivery: two worker replicas; the one holding a
// watch is killed (SIGKILL) while the sink holds its delivery unanswered.
// The other takes the watch over and delivers every event; an event sent
// again has the id it had, so each file has exactly one id. Then the
// holder is stopped on purpose (SIGTERM) and hands the watch back at once,
// with nothing sent twice.
func TestWorkerKilledMidDelivery(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	restoreWorkers(t)
	sink := testsink.Start(t)
	must(t, os.Mkdir(filepath.Join(f.sshd.Dir, "in"), 0o755))
	must(t, os.Chown(filepath.Join(f.sshd.Dir, "in"), f.sshd.UID, f.sshd.GID))
	w := &v1alpha1.SftpWatch{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "incoming"}, Spec: v1alpha1.SftpWatchSpec{
		ConnectionRef: v1alpha1.ConnectionReference{Name: f.conn.Name}, Path: "/in",
		PollInterval: &metav1.Duration{Duration: 5 * time.Second}, Stability: v1alpha1.Stability{MinAge: &metav1.Duration{}},
		Sink: &v1alpha1.Destination{URI: sink.URL}, Delivery: v1alpha1.DeliverySpec{BackoffDelay: "PT0.2S"}}}
	must(t, k8s.Create(ctx, w))
	deleteWhenDone(t, w)
	status := func() v1alpha1.SftpWatchStatus {
		var got v1alpha1.SftpWatch
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(w), &got))
		return got.Status
	}
	eventually(t, "a replica polls the watch", func() bool { return status().LastPollTime != nil })

	held := sink.HoldNext(t)
	for i := range 5 {
		must(t, os.WriteFile(filepath.Join(f.sshd.Dir, "in", fmt.Sprintf("%d.csv", i)), []byte("x"), 0o644))
	}
	var first string
	select {
	case e := <-held.Arrived:
		first = e.ID()
	case <-time.After(time.Minute):
		t.Fatal("no event came")
	}
	holder := workers()[status().Worker]
	if holder == nil || !holder.Running() {
		t.Fatalf("the watch's status names no running replica: %q", status().Worker)
	}
	must(t, holder.Kill())
	held.Release()
	eventually(t, "every file's event is delivered", func() bool { return len(ids(sink)) == 5 })
	got := ids(sink)
	for subject, seen := range got {
		if len(seen) != 1 {
			t.Errorf("%s was sent with %d ids: %v", subject, len(seen), seen)
		}
	}
	if !slices.ContainsFunc(sink.Events(), func(e cloudevents.Event) bool { return e.ID() == first }) {
		t.Errorf("the event held when its sender died (%s) was never delivered", first)
	}
	var survivor *framework.Process
	eventually(t, "a survivor holds the watch", func() bool {
		survivor = workers()[status().Worker]
		return survivor != nil && survivor != holder && survivor.Running()
	})

	// A replica stopped on purpose stores what it holds and hands over:
	// a new replica takes the watch, and no event comes twice.
	next, err := sys.Add(ctx, "worker")
	must(t, err)
	t.Cleanup(func() { _ = next.Kill() })
	sent := len(sink.Events())
	must(t, survivor.Stop())
	must(t, os.WriteFile(filepath.Join(f.sshd.Dir, "in", "after.csv"), []byte("x"), 0o644))
	eventually(t, "the new replica delivers the next file", func() bool { return len(sink.Events()) > sent })
	eventually(t, "the new replica holds the watch", func() bool { return status().Worker == next.Name })
	if events := sink.Subjects()[sent:]; !slices.Equal(events, []string{"dev.sftpgate.file.created /in/after.csv"}) {
		t.Errorf("after the handover: %v", events)
	}
}

// ids maps each subject the sink received to the ids it came with.
func ids(s *testsink.Sink) map[string][]string {
	out := map[string][]string{}
	for _, e := range s.Events() {
		if !slices.Contains(out[e.Subject()], e.ID()) {
			out[e.Subject()] = append(out[e.Subject()], e.ID())
		}
	}
	return out
}

// TestWorkerKilledMidTransfer: two worker replicas; the one running a
// transfer is killed (SIGKILL) past the middle of a large file, slowed by
// a proxy in front of the destination's sshd. The other resumes the
// transfer within a lease period and sends only the rest of the file
// (counted by the proxy); the file lands whole and identical.
func TestWorkerKilledMidTransfer(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dst := testsshd.Start(t)
	proxy := testproxy.Start(t, fmt.Sprintf("%s:%d", dst.Host, dst.Port))
	viaProxy := dst.Login()
	viaProxy.Host, viaProxy.Port = proxy.Host, proxy.Port
	testkit.ReadyConnection(t, k8s, f.ns, "archive", viaProxy)
	const size = 48 << 20
	data := make([]byte, size)
	_, _ = rand.Read(data)
	must(t, os.WriteFile(filepath.Join(f.sshd.Dir, "big.bin"), data, 0o644))
	restoreWorkers(t)
	proxy.Limit(4 << 20)
	tr := &v1alpha1.Transfer{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "big"}, Spec: v1alpha1.TransferSpec{
		Source: v1alpha1.TransferSource{ConnectionRef: v1alpha1.ConnectionReference{Name: f.conn.Name}, Path: "/big.bin"},
		TransferOptions: v1alpha1.TransferOptions{
			Destination: v1alpha1.TransferDestination{ConnectionRef: v1alpha1.ConnectionReference{Name: "archive"}, Path: "/in"},
			Verify:      v1alpha1.VerifySHA256}}}
	must(t, k8s.Create(ctx, tr))
	deleteWhenDone(t, tr)
	status := func() v1alpha1.TransferStatus {
		var got v1alpha1.Transfer
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(tr), &got))
		return got.Status
	}
	partial := func() int64 {
		entries, _ := os.ReadDir(filepath.Join(dst.Dir, "in"))
		for _, e := range entries {
			if fi, err := e.Info(); err == nil && tempname.Is(e.Name()) {
				return fi.Size()
			}
		}
		return 0
	}
	eventually(t, "the copy is past its middle", func() bool { return partial() > size/2 && status().Worker != "" })
	holder := workers()[status().Worker]
	if holder == nil || !holder.Running() {
		t.Fatalf("the transfer's status names no running replica: %q", status().Worker)
	}
	must(t, holder.Kill())
	had, sentBefore := partial(), proxy.Sent()
	proxy.Limit(0)
	eventually(t, "the other replica finishes the transfer", func() bool { return status().CompletionTime != nil })
	got := status()
	if c := meta.FindStatusCondition(got.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != v1alpha1.ReasonSucceeded || got.Worker == holder.Name {
		t.Fatalf("status %+v", got)
	}
	copied, err := os.ReadFile(filepath.Join(dst.Dir, "in", "big.bin"))
	must(t, err)
	if !bytes.Equal(copied, data) {
		t.Fatal("the resumed copy differs from its source")
	}
	// What the dead replica's socket buffers held still reaches the
	// server after the kill, counted here: a few MiB on loopback.
	sent := proxy.Sent() - sentBefore
	t.Logf("the destination held %d of %d bytes when the replica died; %d bytes were sent after", had, size, sent)
	if sent > size-had+size/8 {
		t.Errorf("%d bytes sent after the kill, for the %d missing: the copy started over", sent, size-had)
	}
}
