package worker_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testproxy"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsink"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/internal/tempname"
)

// server is an SFTP server a test transfers to or from: where it keeps
// its files, and how to reach it.
type server struct {
	testkit.Login
	dir string
	// uid and gid own what the test makes in dir (the sshd's user).
	uid, gid int
}

func sshdServer(s *testsshd.Server) server {
	return server{Login: s.Login(), dir: s.Dir, uid: s.UID, gid: s.GID}
}

func inProcessServer(s *testsftp.Server) server {
	return server{Login: s.Login(), dir: s.Dir, uid: os.Getuid(), gid: os.Getgid()}
}

// via is srv reached through p.
func (s server) via(p *testproxy.Proxy) server {
	s.Host, s.Port = p.Host, p.Port
	return s
}

// file writes content at rel below the server's root, owned by its user.
func (s server) file(t *testing.T, rel string, content []byte) {
	t.Helper()
	p := filepath.Join(s.dir, rel)
	dir := s.dir
	for _, part := range strings.Split(filepath.Dir(rel), "/") {
		if dir = filepath.Join(dir, part); os.Mkdir(dir, 0o755) == nil {
			must(t, os.Chown(dir, s.uid, s.gid))
		}
	}
	must(t, os.WriteFile(p, content, 0o644))
	must(t, os.Chown(p, s.uid, s.gid))
}

func (s server) read(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dir, rel))
	must(t, err)
	return b
}

func (s server) has(rel string) bool {
	_, err := os.Stat(filepath.Join(s.dir, rel))
	return err == nil
}

// transferNamespace is a namespace with a Ready connection for each of
// servers, named by the map's keys.
func transferNamespace(t *testing.T, servers map[string]server) string {
	t.Helper()
	ns := testkit.Namespace(t, k8s, "transfer-")
	for name, s := range servers {
		testkit.ReadyConnection(t, k8s, ns, name, s.Login)
	}
	return ns
}

// transfer makes a Transfer in ns from src's path to dst's /out.
func transfer(t *testing.T, ns, name, path string, mutate ...func(*v1alpha1.TransferSpec)) *v1alpha1.Transfer {
	t.Helper()
	tr := &v1alpha1.Transfer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.TransferSpec{
		Source: v1alpha1.TransferSource{ConnectionRef: v1alpha1.ConnectionReference{Name: "src"}, Path: path},
		TransferOptions: v1alpha1.TransferOptions{
			Destination: v1alpha1.TransferDestination{ConnectionRef: v1alpha1.ConnectionReference{Name: "dst"}, Path: "/out"},
			Retry:       v1alpha1.TransferRetry{Backoff: &metav1.Duration{Duration: 1e9}}}}}
	for _, m := range mutate {
		m(&tr.Spec)
	}
	must(t, k8s.Create(context.Background(), tr))
	return tr
}

// finished waits until tr finished and returns it.
func finished(t *testing.T, tr *v1alpha1.Transfer) *v1alpha1.Transfer {
	t.Helper()
	var got v1alpha1.Transfer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s, last seen: %+v", tr.Name, got.Status)
		}
	})
	eventually(t, tr.Name+" finishes", func() bool {
		must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(tr), &got))
		return got.Status.CompletionTime != nil
	})
	return &got
}

func readyReason(tr *v1alpha1.Transfer) string {
	if c := meta.FindStatusCondition(tr.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		return string(c.Status) + "/" + c.Reason
	}
	return ""
}

func random(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// TestTransfer: one file, many files and a tree go from one sshd to
// another, whole and identical, under a temporary name first; Move (of one
// file, of a tree) removes the sources once their copies are in place;
// the sink gets one event when it finishes.
func TestTransfer(t *testing.T) {
	t.Parallel()
	src, dst := sshdServer(testsshd.Start(t)), sshdServer(testsshd.Start(t))
	ns := transferNamespace(t, map[string]server{"src": src, "dst": dst})
	sink := testsink.Start(t)
	startWorker(t)
	big := random(t, 5<<20)
	src.file(t, "one/big.bin", big)
	for i := range 50 {
		src.file(t, fmt.Sprintf("many/f%02d.csv", i), []byte(fmt.Sprint(i)))
	}
	src.file(t, "tree/a.txt", []byte("a"))
	src.file(t, "tree/sub/b.txt", []byte("b"))
	src.file(t, "tree/sub/deeper/c.txt", []byte("c"))
	src.file(t, "tree/sub/skip.part", []byte("partial"))
	src.file(t, "single/moved.csv", []byte("moved"))

	one := transfer(t, ns, "one", "/one/big.bin", func(s *v1alpha1.TransferSpec) {
		s.Verify = v1alpha1.VerifySHA256
		s.Sink = &v1alpha1.Destination{URI: sink.URL}
	})
	many := transfer(t, ns, "many", "/many", func(s *v1alpha1.TransferSpec) { s.Parallelism = 8 })
	tree := transfer(t, ns, "tree", "/tree", func(s *v1alpha1.TransferSpec) {
		s.Source.Recursive, s.Source.Exclude = true, []string{"*.part"}
		s.Destination.Path = "/archive"
		s.Mode = v1alpha1.TransferMove
	})
	moved := transfer(t, ns, "moved", "/single/moved.csv", func(s *v1alpha1.TransferSpec) { s.Mode = v1alpha1.TransferMove })
	got := finished(t, one)
	if readyReason(got) != "True/Succeeded" || got.Status.Files.Done != 1 || got.Status.Bytes.Done != int64(len(big)) || !got.Status.EventDelivered {
		t.Errorf("one: %s %+v", readyReason(got), got.Status)
	}
	if !bytes.Equal(dst.read(t, "out/big.bin"), big) {
		t.Error("the copy differs from its source")
	}
	got = finished(t, moved)
	if readyReason(got) != "True/Succeeded" || string(dst.read(t, "out/moved.csv")) != "moved" || src.has("single/moved.csv") {
		t.Errorf("moved: %s %+v; left at the source: %v", readyReason(got), got.Status, src.has("single/moved.csv"))
	}
	got = finished(t, many)
	if readyReason(got) != "True/Succeeded" || got.Status.Files.Done != 50 || got.Status.Progress != "50 of 50 files, 100%" {
		t.Errorf("many: %s %+v", readyReason(got), got.Status)
	}
	for i := range 50 {
		if string(dst.read(t, fmt.Sprintf("out/f%02d.csv", i))) != fmt.Sprint(i) {
			t.Errorf("f%02d.csv differs", i)
		}
	}
	got = finished(t, tree)
	if readyReason(got) != "True/Succeeded" || got.Status.Files.Done != 3 {
		t.Errorf("tree: %s %+v", readyReason(got), got.Status)
	}
	for _, rel := range []string{"a.txt", "sub/b.txt", "sub/deeper/c.txt"} {
		if !dst.has("archive/"+rel) || src.has("tree/"+rel) {
			t.Errorf("%s: moved %v, left at the source %v", rel, dst.has("archive/"+rel), src.has("tree/"+rel))
		}
	}
	if dst.has("archive/sub/skip.part") || !src.has("tree/sub/skip.part") {
		t.Error("an excluded file was moved")
	}
	for _, dir := range []string{"out", "archive", "archive/sub"} {
		entries, err := os.ReadDir(filepath.Join(dst.dir, dir))
		must(t, err)
		for _, e := range entries {
			if tempname.Is(e.Name()) {
				t.Errorf("a temporary file is left: %s/%s", dir, e.Name())
			}
		}
	}
	if got := sink.Subjects(); !slices.Equal(got, []string{"dev.sftpgate.transfer.succeeded one"}) {
		t.Errorf("events %v", got)
	}
}

// TestTransferOverwrite: a file already at the destination is left,
// replaced when different, or replaced, as the policy says; one that is
// the source's copy already is done without being sent.
func TestTransferOverwrite(t *testing.T) {
	t.Parallel()
	src, dst := sshdServer(testsshd.Start(t)), sshdServer(testsshd.Start(t))
	ns := transferNamespace(t, map[string]server{"src": src, "dst": dst})
	startWorker(t)
	for _, policy := range []v1alpha1.OverwritePolicy{v1alpha1.OverwriteNever, v1alpha1.OverwriteIfDifferent, v1alpha1.OverwriteAlways} {
		dir := strings.ToLower(string(policy))
		src.file(t, dir+"/new.txt", []byte("new"))
		src.file(t, dir+"/other.txt", []byte("source"))
		dst.file(t, "out/"+dir+"/other.txt", []byte("what was there"))
	}
	want := map[v1alpha1.OverwritePolicy]struct {
		other         string
		done, skipped int32
	}{
		v1alpha1.OverwriteNever:       {"what was there", 1, 1},
		v1alpha1.OverwriteIfDifferent: {"source", 2, 0},
		v1alpha1.OverwriteAlways:      {"source", 2, 0},
	}
	for policy, w := range want {
		dir := strings.ToLower(string(policy))
		got := finished(t, transfer(t, ns, dir, "/"+dir, func(s *v1alpha1.TransferSpec) {
			s.Overwrite, s.Destination.Path = policy, "/out/"+dir
		}))
		if readyReason(got) != "True/Succeeded" || got.Status.Files.Done != w.done || got.Status.Files.Skipped != w.skipped {
			t.Errorf("%s: %s %+v", policy, readyReason(got), got.Status.Files)
		}
		if other := string(dst.read(t, "out/"+dir+"/other.txt")); other != w.other || string(dst.read(t, "out/"+dir+"/new.txt")) != "new" {
			t.Errorf("%s: other.txt holds %q", policy, other)
		}
	}
	// Again with IfDifferent: every file is the source's copy already.
	got := finished(t, transfer(t, ns, "again", "/ifdifferent", func(s *v1alpha1.TransferSpec) {
		s.Overwrite, s.Destination.Path = v1alpha1.OverwriteIfDifferent, "/out/ifdifferent"
	}))
	if got.Status.Files.Done != 2 || got.Status.Files.Skipped != 0 {
		t.Errorf("again: %+v", got.Status.Files)
	}
}

// TestTransferVerificationFails: SHA256 verification catches a destination
// that corrupts what it is sent; the file is tried again as the retry
// policy says, never renamed into place, and the transfer ends Stalled
// with VerificationFailed, its failure listed, and a failed event.
func TestTransferVerificationFails(t *testing.T) {
	t.Parallel()
	src := sshdServer(testsshd.Start(t))
	dst := inProcessServer(testsftp.Corrupting(t))
	ns := transferNamespace(t, map[string]server{"src": src, "dst": dst})
	sink := testsink.Start(t)
	startWorker(t)
	src.file(t, "in/report.csv", []byte("a,b\n1,2\n"))
	got := finished(t, transfer(t, ns, "corrupt", "/in/report.csv", func(s *v1alpha1.TransferSpec) {
		s.Verify = v1alpha1.VerifySHA256
		s.Retry.Limit = ptr(int32(1))
		s.Sink = &v1alpha1.Destination{URI: sink.URL}
	}))
	stalled := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionStalled)
	if readyReason(got) != "False/VerificationFailed" || stalled == nil || got.Status.Files.Failed != 1 ||
		len(got.Status.Failures) != 1 || got.Status.Failures[0].Path != "/in/report.csv" {
		t.Errorf("%s %+v", readyReason(got), got.Status)
	}
	if dst.has("out/report.csv") {
		t.Error("a copy that failed verification took its name")
	}
	if got := sink.Subjects(); !slices.Equal(got, []string{"dev.sftpgate.transfer.failed corrupt"}) {
		t.Errorf("events %v", got)
	}
}

// TestTransferSourceNotFound: a source that is not there ends the
// transfer Stalled with SourceNotFound, at once.
func TestTransferSourceNotFound(t *testing.T) {
	t.Parallel()
	src, dst := sshdServer(testsshd.Start(t)), inProcessServer(testsftp.Start(t))
	ns := transferNamespace(t, map[string]server{"src": src, "dst": dst})
	startWorker(t)
	got := finished(t, transfer(t, ns, "missing", "/nowhere"))
	if readyReason(got) != "False/SourceNotFound" || !meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionStalled) {
		t.Errorf("%s %+v", readyReason(got), got.Status.Conditions)
	}
}

// TestTransferEventWaitsForItsSink: a finishing event is never given up
// for a sink that fails: the Transfer says its outcome and why the event
// waits, and finishes once the sink takes the event.
func TestTransferEventWaitsForItsSink(t *testing.T) {
	t.Parallel()
	src, dst := inProcessServer(testsftp.Start(t)), inProcessServer(testsftp.Start(t))
	ns := transferNamespace(t, map[string]server{"src": src, "dst": dst})
	sink := testsink.Start(t)
	sink.SetAnswer(http.StatusServiceUnavailable)
	startWorker(t)
	src.file(t, "in/a.csv", []byte("a"))
	tr := transfer(t, ns, "waits", "/in/a.csv", func(s *v1alpha1.TransferSpec) {
		s.Sink = &v1alpha1.Destination{URI: sink.URL}
		s.Delivery.Retry = ptr(int32(0))
	})
	var got v1alpha1.Transfer
	eventually(t, "the event waits, the outcome said", func() bool {
		must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(tr), &got))
		return readyReason(&got) == "True/Succeeded" && strings.Contains(got.Status.LastError, "the finishing event waits")
	})
	if got.Status.CompletionTime != nil || !meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReconciling) {
		t.Errorf("finished before its event went: %+v", got.Status)
	}
	sink.SetAnswer(0)
	if got := finished(t, tr); !got.Status.EventDelivered || len(sink.Events()) == 0 {
		t.Errorf("the event was not delivered once the sink came back: %+v", got.Status)
	}
}

// TestTransferSurvivesSSHDRestarts: the destination's sshd restarted in
// the middle of a file: the copy goes on from what the destination holds,
// and the file lands whole.
func TestTransferSurvivesSSHDRestarts(t *testing.T) {
	t.Parallel()
	sshd := testsshd.Start(t)
	proxy := testproxy.Start(t, fmt.Sprintf("%s:%d", sshd.Host, sshd.Port))
	src, dst := inProcessServer(testsftp.Start(t)), sshdServer(sshd).via(proxy)
	ns := transferNamespace(t, map[string]server{"src": src, "dst": dst})
	startWorker(t)
	data := random(t, 16<<20)
	src.file(t, "in/big.bin", data)
	proxy.Limit(4 << 20)
	tr := transfer(t, ns, "restarted", "/in/big.bin")
	eventually(t, "the copy is under way", func() bool { return partialSize(dst.dir, "out") > 2<<20 })
	sshd.Restart(t)
	proxy.Limit(0)
	got := finished(t, tr)
	if readyReason(got) != "True/Succeeded" || !bytes.Equal(dst.read(t, "out/big.bin"), data) {
		t.Errorf("%s %+v", readyReason(got), got.Status)
	}
	if sent := proxy.Sent(); sent > int64(len(data))*13/10 {
		t.Errorf("%d bytes sent for a file of %d: the copy started over", sent, len(data))
	}
}

// partialSize is the size of the temporary file in dir (below root), or 0.
func partialSize(root, dir string) int64 {
	entries, _ := os.ReadDir(filepath.Join(root, dir))
	for _, e := range entries {
		if tempname.Is(e.Name()) {
			if fi, err := e.Info(); err == nil {
				return fi.Size()
			}
		}
	}
	return 0
}
