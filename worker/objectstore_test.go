package worker_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testproxy"
	"github.com/sftpgate/sftpgate/hack/fixtures/tests3"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsink"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/internal/s3fs"
	"github.com/sftpgate/sftpgate/internal/tempname"
)

// store is a bucket on a test S3 server, as a test reads it.
type store struct {
	*tests3.Server
	bucket, prefix string
}

func (s store) read(t *testing.T, key string) []byte {
	t.Helper()
	b, err := os.ReadFile(s.Path(s.bucket, s.prefix+key))
	must(t, err)
	return b
}

func (s store) has(key string) bool {
	_, err := os.Stat(s.Path(s.bucket, s.prefix+key))
	return err == nil
}

func (s store) put(t *testing.T, key string, data []byte) {
	t.Helper()
	_, err := s.Client(t).PutObject(context.Background(), s.bucket, s.prefix+key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{})
	must(t, err)
}

// uploads are the multipart uploads the bucket holds unfinished.
func (s store) uploads(t *testing.T) []string {
	t.Helper()
	res, err := (&minio.Core{Client: s.Client(t)}).ListMultipartUploads(context.Background(), s.bucket, "", "", "", "", 1000)
	must(t, err)
	var keys []string
	for _, u := range res.Uploads {
		keys = append(keys, u.Key)
	}
	return keys
}

func newStore(t *testing.T, bucket, prefix string) store {
	s := tests3.Start(t)
	s.Bucket(t, bucket)
	return store{Server: s, bucket: bucket, prefix: prefix}
}

func toStore(name string) func(*v1alpha1.TransferSpec) {
	return func(s *v1alpha1.TransferSpec) {
		s.Destination.ConnectionRef = v1alpha1.ConnectionReference{Kind: v1alpha1.KindObjectStore, Name: name}
	}
}

func fromStore(name string) func(*v1alpha1.TransferSpec) {
	return func(s *v1alpha1.TransferSpec) {
		s.Source.ConnectionRef = v1alpha1.ConnectionReference{Kind: v1alpha1.KindObjectStore, Name: name}
	}
}

// TestTransferObjectStore: files go SFTP to bucket, bucket to SFTP and
// bucket to bucket, whole (a large file as a multipart upload of checked
// parts, completed at the end), verified, with their modification times,
// and with Move the source removed; nothing unfinished is left behind.
func TestTransferObjectStore(t *testing.T) {
	t.Parallel()
	sftp := sshdServer(testsshd.Start(t))
	bucket, other := newStore(t, "exchange", "feeds/"), newStore(t, "archive", "")
	ns := transferNamespace(t, map[string]server{"src": sftp})
	small := func(s *v1alpha1.ObjectStore) { s.Spec.Limits.PartSizeMiB, s.Spec.Limits.PartsInFlight = 5, 2 }
	testkit.ReadyStore(t, k8s, ns, "bucket", bucket.Server, bucket.bucket, bucket.prefix, small)
	testkit.ReadyStore(t, k8s, ns, "other", other.Server, other.bucket, other.prefix, small)
	startWorker(t)
	big := random(t, 13<<20)
	sftp.file(t, "in/big.bin", big)
	for i := range 20 {
		sftp.file(t, fmt.Sprintf("many/f%02d.csv", i), []byte(fmt.Sprint(i)))
	}
	sftp.file(t, "move/once.csv", []byte("once"))
	when := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	must(t, os.Chtimes(sftp.dir+"/in/big.bin", when, when))

	up := transfer(t, ns, "up", "/in/big.bin", toStore("bucket"), func(s *v1alpha1.TransferSpec) { s.Verify = v1alpha1.VerifySHA256 })
	many := transfer(t, ns, "many", "/many", toStore("bucket"), func(s *v1alpha1.TransferSpec) { s.Parallelism = 8 })
	moved := transfer(t, ns, "moved", "/move/once.csv", toStore("bucket"), func(s *v1alpha1.TransferSpec) { s.Mode = v1alpha1.TransferMove })
	for _, tr := range []*v1alpha1.Transfer{up, many, moved} {
		if got := finished(t, tr); readyReason(got) != "True/Succeeded" {
			t.Fatalf("%s: %s %+v", tr.Name, readyReason(got), got.Status)
		}
	}
	if !bytes.Equal(bucket.read(t, "out/big.bin"), big) {
		t.Error("the object differs from its source")
	}
	info, err := bucket.Client(t).StatObject(context.Background(), bucket.bucket, "feeds/out/big.bin", minio.StatObjectOptions{})
	must(t, err)
	if !strings.HasPrefix(info.UserMetadata["Mtime"], fmt.Sprint(when.Unix())) {
		t.Errorf("the object's mtime metadata: %q, want %d", info.UserMetadata["Mtime"], when.Unix())
	}
	for i := range 20 {
		if string(bucket.read(t, fmt.Sprintf("out/f%02d.csv", i))) != fmt.Sprint(i) {
			t.Errorf("f%02d.csv differs", i)
		}
	}
	if string(bucket.read(t, "out/once.csv")) != "once" || sftp.has("move/once.csv") {
		t.Error("moved: not in the bucket, or left at the source")
	}

	// Back, and across: bucket to SFTP, bucket to the same bucket, and
	// bucket to another store; the second run of the first skips what
	// is there already.
	down := transfer(t, ns, "down", "/out/big.bin", fromStore("bucket"), func(s *v1alpha1.TransferSpec) {
		s.Destination.Path, s.Verify = "/back", v1alpha1.VerifySHA256
		s.Destination.ConnectionRef = v1alpha1.ConnectionReference{Name: "src"}
	})
	within := transfer(t, ns, "within", "/out", fromStore("bucket"), toStore("bucket"), func(s *v1alpha1.TransferSpec) {
		s.Destination.Path, s.Source.Include = "/copies", []string{"f0*.csv"}
	})
	for _, tr := range []*v1alpha1.Transfer{down, within} {
		if got := finished(t, tr); readyReason(got) != "True/Succeeded" {
			t.Fatalf("%s: %s %+v", tr.Name, readyReason(got), got.Status)
		}
	}
	across := transfer(t, ns, "across", "/out/big.bin", fromStore("bucket"), toStore("other"), func(s *v1alpha1.TransferSpec) {
		s.Destination.Path, s.Mode = "/kept", v1alpha1.TransferMove
	})
	if got := finished(t, across); readyReason(got) != "True/Succeeded" {
		t.Fatalf("across: %s %+v", readyReason(got), got.Status)
	}
	if !bytes.Equal(sftp.read(t, "back/big.bin"), big) {
		t.Error("bucket to SFTP: the copy differs")
	}
	if fi, err := os.Stat(sftp.dir + "/back/big.bin"); err != nil || !fi.ModTime().Equal(when) {
		t.Errorf("bucket to SFTP: modification time %v, want %v", fi.ModTime(), when)
	}
	if string(bucket.read(t, "copies/f05.csv")) != "5" || bucket.has("copies/f10.csv") {
		t.Error("bucket to bucket: the filtered copies are not as asked")
	}
	if !bytes.Equal(other.read(t, "kept/big.bin"), big) || bucket.has("out/big.bin") {
		t.Error("store to store with Move: not copied, or left at the source")
	}
	// IfDifferent finds the copies the same (by the time the object keeps,
	// not the one it lists): nothing is written again.
	before, err := bucket.Client(t).StatObject(context.Background(), bucket.bucket, "feeds/out/f07.csv", minio.StatObjectOptions{})
	must(t, err)
	again := transfer(t, ns, "again", "/many", toStore("bucket"), func(s *v1alpha1.TransferSpec) { s.Overwrite = v1alpha1.OverwriteIfDifferent })
	if got := finished(t, again); readyReason(got) != "True/Succeeded" || got.Status.Files.Done != 20 {
		t.Errorf("again: %s %+v", readyReason(got), got.Status)
	}
	after, err := bucket.Client(t).StatObject(context.Background(), bucket.bucket, "feeds/out/f07.csv", minio.StatObjectOptions{})
	must(t, err)
	if !after.LastModified.Equal(before.LastModified) || after.ETag != before.ETag {
		t.Error("IfDifferent wrote an object that was the same again")
	}
	for _, s := range []store{bucket, other} {
		if left := s.uploads(t); len(left) > 0 {
			t.Errorf("unfinished uploads left in %s: %v", s.bucket, left)
		}
	}
}

// TestTransferToStoreResumes: an upload cut mid-file continues from the
// parts the store holds: only the missing parts (and those in flight at
// the cut) are sent again, counted through a proxy.
func TestTransferToStoreResumes(t *testing.T) {
	t.Parallel()
	sftp := sshdServer(testsshd.Start(t))
	s := newStore(t, "exchange", "")
	proxy := testproxy.Start(t, s.Endpoint)
	ns := transferNamespace(t, map[string]server{"src": sftp})
	via := *s.Server
	via.Endpoint = fmt.Sprintf("%s:%d", proxy.Host, proxy.Port)
	const part = 5 << 20
	testkit.ReadyStore(t, k8s, ns, "bucket", &via, s.bucket, "", func(st *v1alpha1.ObjectStore) {
		st.Spec.Limits.PartSizeMiB, st.Spec.Limits.PartsInFlight = 5, 1
	})
	startWorker(t)
	data := random(t, 5*part+123)
	sftp.file(t, "in/big.bin", data)
	proxy.Limit(8 << 20)
	tr := transfer(t, ns, "resumed", "/in/big.bin", toStore("bucket"), func(sp *v1alpha1.TransferSpec) { sp.Verify = v1alpha1.VerifySHA256 })
	eventually(t, "two parts are stored", func() bool { return proxy.Sent() > 2*part+part/2 })
	proxy.Cut()
	proxy.Limit(0)
	got := finished(t, tr)
	if readyReason(got) != "True/Succeeded" || !bytes.Equal(s.read(t, "out/big.bin"), data) {
		t.Fatalf("%s %+v", readyReason(got), got.Status)
	}
	// What was sent: the file, the part in flight at the cut, and the
	// requests' headers.
	if total := proxy.Sent(); total > int64(len(data))+part+1<<20 {
		t.Errorf("%d bytes sent for a file of %d in parts of %d: the upload started over", total, len(data), part)
	}
	if left := s.uploads(t); len(left) > 0 {
		t.Errorf("unfinished uploads left: %v", left)
	}
}

// TestWatchObjectStore: objects created, rewritten (the same size, within
// the second: the ETag tells) and deleted under a prefix are reported
// once each; a watch with a transfer copies each new object to an SFTP
// server and then files it in the bucket.
func TestWatchObjectStore(t *testing.T) {
	t.Parallel()
	s := newStore(t, "inbox", "partner/")
	sftp := sshdServer(testsshd.Start(t))
	ns := transferNamespace(t, map[string]server{"box": sftp})
	testkit.ReadyStore(t, k8s, ns, "bucket", s.Server, s.bucket, s.prefix)
	r := testsink.Start(t)
	startWorker(t)
	bucket := v1alpha1.ConnectionReference{Kind: v1alpha1.KindObjectStore, Name: "bucket"}
	w := &v1alpha1.SftpWatch{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "objects"}, Spec: v1alpha1.SftpWatchSpec{
		ConnectionRef: bucket, Path: "/in",
		PollInterval: &metav1.Duration{Duration: 5 * time.Second}, Stability: v1alpha1.Stability{MinAge: &metav1.Duration{}},
		Events: []v1alpha1.WatchEvent{v1alpha1.WatchCreated, v1alpha1.WatchModified, v1alpha1.WatchDeleted},
		Sink:   &v1alpha1.Destination{URI: r.URL}, Delivery: v1alpha1.DeliverySpec{BackoffDelay: "PT0.2S"}}}
	must(t, k8s.Create(context.Background(), w))
	drop := &v1alpha1.SftpWatch{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "drop"}, Spec: v1alpha1.SftpWatchSpec{
		ConnectionRef: bucket, Path: "/drop",
		PollInterval: &metav1.Duration{Duration: 5 * time.Second}, Stability: v1alpha1.Stability{MinAge: &metav1.Duration{}},
		Transfer: &v1alpha1.TransferOptions{
			Destination: v1alpha1.TransferDestination{ConnectionRef: v1alpha1.ConnectionReference{Name: "box"}, Path: "/from-bucket"}},
		AfterDelivery: v1alpha1.AfterDelivery{Action: v1alpha1.AfterDeliveryMove, MoveTo: "/done"}}}
	must(t, k8s.Create(context.Background(), drop))
	testkit.Polls(t, k8s, w)(1)
	testkit.Polls(t, k8s, drop)(1)

	s.put(t, "in/a.csv", []byte("alpha"))
	eventually(t, "the new object is reported", func() bool { return len(r.Subjects()) >= 1 })
	s.put(t, "in/a.csv", []byte("bravo"))
	eventually(t, "the rewritten object is reported", func() bool { return len(r.Subjects()) >= 2 })
	_, err := s.Client(t).StatObject(context.Background(), s.bucket, "partner/in/a.csv", minio.StatObjectOptions{})
	must(t, err)
	must(t, s.Client(t).RemoveObject(context.Background(), s.bucket, "partner/in/a.csv", minio.RemoveObjectOptions{}))
	eventually(t, "the removal is reported", func() bool { return len(r.Subjects()) >= 3 })
	testkit.Polls(t, k8s, w)(2) // no event comes twice
	want := []string{"dev.sftpgate.file.created /in/a.csv", "dev.sftpgate.file.modified /in/a.csv", "dev.sftpgate.file.deleted /in/a.csv"}
	if got := r.Subjects(); !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}

	s.put(t, "drop/report.csv", []byte("figures"))
	eventually(t, "the object is copied to SFTP and filed", func() bool {
		return sftp.has("from-bucket/report.csv") && s.has("done/report.csv") && !s.has("drop/report.csv")
	})
	if string(sftp.read(t, "from-bucket/report.csv")) != "figures" {
		t.Error("the copy differs")
	}
}

// TestTransferFromStoreAgain: objects that keep their file's time apart
// (as sftpgate and rclone write it) copy from a bucket to SFTP on the
// first try, even with no retries: the time the listing gives is not a
// change. A second run (IfDifferent, SHA256) finds the copies the same
// and writes nothing again; neither leaves a temporary file. (make chaos,
// seed 2: every run left a temporary copy of each file.)
func TestTransferFromStoreAgain(t *testing.T) {
	t.Parallel()
	sftp := sshdServer(testsshd.Start(t))
	bucket := newStore(t, "exchange", "")
	ns := transferNamespace(t, map[string]server{"dst": sftp})
	testkit.ReadyStore(t, k8s, ns, "bucket", bucket.Server, bucket.bucket, bucket.prefix)
	startWorker(t)
	when := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	for i := range 5 {
		data := random(t, 300<<10+i)
		_, err := bucket.Client(t).PutObject(context.Background(), bucket.bucket, fmt.Sprintf("out/o%d.dat", i), bytes.NewReader(data), int64(len(data)),
			minio.PutObjectOptions{UserMetadata: map[string]string{s3fs.MetaModTime: fmt.Sprint(when.Unix())}})
		must(t, err)
	}
	inodes := map[string]uint64{}
	for _, name := range []string{"first", "second"} {
		tr := transfer(t, ns, name, "/out", fromStore("bucket"), func(s *v1alpha1.TransferSpec) {
			s.Destination.ConnectionRef = v1alpha1.ConnectionReference{Name: "dst"}
			s.Destination.Path, s.Overwrite, s.Verify, s.Parallelism = "/back", v1alpha1.OverwriteIfDifferent, v1alpha1.VerifySHA256, 2
			s.Retry.Limit = new(int32)
		})
		if got := finished(t, tr); readyReason(got) != "True/Succeeded" || got.Status.Files.Done != 5 {
			t.Fatalf("%s: %s %+v", name, readyReason(got), got.Status)
		}
		entries, err := os.ReadDir(sftp.dir + "/back")
		must(t, err)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), tempname.Prefix) {
				t.Errorf("after the %s run: %s left", name, e.Name())
				continue
			}
			fi, err := os.Stat(sftp.dir + "/back/" + e.Name())
			must(t, err)
			ino := fi.Sys().(*syscall.Stat_t).Ino
			if old, ok := inodes[e.Name()]; ok && old != ino {
				t.Errorf("the second run wrote %s again", e.Name())
			}
			inodes[e.Name()] = ino
			if !fi.ModTime().Equal(when) {
				t.Errorf("%s: modification time %v, want the object's own %v", e.Name(), fi.ModTime(), when)
			}
		}
	}
}
