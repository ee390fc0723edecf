package worker_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testproxy"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	copying "github.com/sftpgate/sftpgate/worker/transfer"
)

// TestTransferRangedCopy: a large file is copied in ranges (the worker's
// default, 4 at once, each on sessions of its own), whole, verified by
// SHA-256, with little more sent than the file.
func TestTransferRangedCopy(t *testing.T) {
	t.Parallel()
	dstServer := testsftp.Start(t)
	proxy := testproxy.Start(t, fmt.Sprintf("%s:%d", dstServer.Login().Host, dstServer.Login().Port))
	src, dst := inProcessServer(testsftp.Start(t)), inProcessServer(dstServer).via(proxy)
	ns := transferNamespace(t, map[string]server{"src": src, "dst": dst})
	startWorker(t)
	data := random(t, 96<<20+12345)
	src.file(t, "in/large.bin", data)
	tr := transfer(t, ns, "ranged", "/in/large.bin", func(s *v1alpha1.TransferSpec) { s.Verify = v1alpha1.VerifySHA256 })
	got := finished(t, tr)
	if readyReason(got) != "True/Succeeded" || !bytes.Equal(dst.read(t, "out/large.bin"), data) {
		t.Fatalf("%s %+v", readyReason(got), got.Status)
	}
	if sent := proxy.Sent(); sent > int64(len(data))*11/10 {
		t.Errorf("%d bytes sent for a file of %d", sent, len(data))
	}
}

// TestTransferRangedCopyResumes: a ranged copy cut mid-way (the
// destination's sshd restarted) continues each range from where the plan
// has it and the copy shows: the file arrives whole, with no more sent
// again than was in flight when cut.
func TestTransferRangedCopyResumes(t *testing.T) {
	t.Parallel()
	sshd := testsshd.Start(t)
	proxy := testproxy.Start(t, fmt.Sprintf("%s:%d", sshd.Host, sshd.Port))
	src, dst := inProcessServer(testsftp.Start(t)), sshdServer(sshd).via(proxy)
	ns := transferNamespace(t, map[string]server{"src": src, "dst": dst})
	startWorker(t)
	data := random(t, 96<<20+12345)
	src.file(t, "in/large.bin", data)
	proxy.Limit(1 << 20) // each connection's
	tr := transfer(t, ns, "ranged-resumed", "/in/large.bin")
	eventually(t, "the copy is well under way", func() bool { return proxy.Sent() > 40<<20 })
	// The plan (written every 5 s) has the ranges' progress by now.
	time.Sleep(6 * time.Second)
	before := proxy.Sent()
	sshd.Restart(t)
	proxy.Limit(0)
	got := finished(t, tr)
	if readyReason(got) != "True/Succeeded" || !bytes.Equal(dst.read(t, "out/large.bin"), data) {
		t.Fatalf("%s %+v", readyReason(got), got.Status)
	}
	sent := proxy.Sent()
	t.Logf("sent %d before the cut, %d in all, for %d", before, sent, len(data))
	// Sent again: at most what each of the 4 ranges had in flight when
	// cut (64 writes of 32 KiB); SSH's framing adds under 1%.
	if again := sent - int64(len(data))*101/100; again > 4*2<<20 {
		t.Errorf("%d bytes sent for a file of %d (%d before the cut): %d sent again", sent, len(data), before, again)
	}
}

// TestTransferRangedCopyFromStore: a large object copied to an SFTP
// server in ranges, each a ranged GET of its own, arrives whole.
func TestTransferRangedCopyFromStore(t *testing.T) {
	t.Parallel()
	dst := sshdServer(testsshd.Start(t))
	bucket := newStore(t, "ranged", "")
	ns := transferNamespace(t, map[string]server{"dst": dst})
	testkit.ReadyStore(t, k8s, ns, "bucket", bucket.Server, bucket.bucket, bucket.prefix)
	startWorker(t)
	data := random(t, copying.RangedFile+3<<20+777)
	bucket.put(t, "in/large.bin", data)
	tr := transfer(t, ns, "ranged-from-store", "/in/large.bin", fromStore("bucket"), func(s *v1alpha1.TransferSpec) {
		s.Verify = v1alpha1.VerifySHA256
	})
	if got := finished(t, tr); readyReason(got) != "True/Succeeded" || !bytes.Equal(dst.read(t, "out/large.bin"), data) {
		t.Fatalf("%s %+v", readyReason(got), got.Status)
	}
}
