package worker_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testftpd"
	"github.com/sftpgate/sftpgate/hack/fixtures/testgpg"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsink"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/internal/tempname"
)

// ftpServer is a vsftpd as a test puts files on it and reads them.
type ftpServer struct{ *testftpd.Server }

func (s ftpServer) file(t *testing.T, name string, data []byte) {
	t.Helper()
	p := filepath.Join(s.Dir, name)
	for dir := filepath.Dir(p); dir != s.Dir; dir = filepath.Dir(dir) {
		defer func() { must(t, os.Chown(dir, s.UID, s.GID)) }()
	}
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, data, 0o644))
	must(t, os.Chown(p, s.UID, s.GID))
}

func (s ftpServer) read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.Dir, name))
	must(t, err)
	return b
}

func (s ftpServer) has(name string) bool {
	_, err := os.Stat(filepath.Join(s.Dir, name))
	return err == nil
}

// sftpAndFTP starts an sshd and a vsftpd, and a worker, with a
// namespace whose connection "src" is the sshd and FtpConnection "ftps"
// the vsftpd.
func sftpAndFTP(t *testing.T) (server, ftpServer, string) {
	t.Helper()
	sftp := sshdServer(testsshd.Start(t))
	ftpd := ftpServer{testftpd.Start(t)}
	ns := transferNamespace(t, map[string]server{"src": sftp})
	conn, secret := ftpd.Connection(ns, "ftps")
	testkit.ReadyFtp(t, k8s, conn, secret)
	startWorker(t)
	return sftp, ftpd, ns
}

func ftpRef(name string) v1alpha1.ConnectionReference {
	return v1alpha1.ConnectionReference{Kind: v1alpha1.KindFtpConnection, Name: name}
}

// TestTransferFTP: files go SFTP to FTPS and back, whole and verified,
// with their times; with Move the FTPS source is removed; no temporary
// file is left on either server.
func TestTransferFTP(t *testing.T) {
	t.Parallel()
	sftp, ftpd, ns := sftpAndFTP(t)
	big := random(t, 3<<20+5)
	sftp.file(t, "in/big.bin", big)
	for i := range 12 {
		sftp.file(t, fmt.Sprintf("many/f%02d.csv", i), []byte(fmt.Sprint(i)))
	}
	when := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	must(t, os.Chtimes(sftp.dir+"/in/big.bin", when, when))

	up := transfer(t, ns, "up", "/in/big.bin", func(s *v1alpha1.TransferSpec) {
		s.Destination.ConnectionRef, s.Verify = ftpRef("ftps"), v1alpha1.VerifySHA256
	})
	many := transfer(t, ns, "many", "/many", func(s *v1alpha1.TransferSpec) {
		s.Destination.ConnectionRef, s.Parallelism = ftpRef("ftps"), 4
	})
	for _, tr := range []*v1alpha1.Transfer{up, many} {
		if got := finished(t, tr); readyReason(got) != "True/Succeeded" {
			t.Fatalf("%s: %s %+v", tr.Name, readyReason(got), got.Status)
		}
	}
	if !bytes.Equal(ftpd.read(t, "out/big.bin"), big) {
		t.Error("SFTP to FTPS: the copy differs")
	}
	if fi, err := os.Stat(filepath.Join(ftpd.Dir, "out/big.bin")); err != nil || !fi.ModTime().Equal(when) {
		t.Errorf("SFTP to FTPS: modification time %v, want %v", fi.ModTime(), when)
	}
	for i := range 12 {
		if string(ftpd.read(t, fmt.Sprintf("out/f%02d.csv", i))) != fmt.Sprint(i) {
			t.Errorf("f%02d.csv differs", i)
		}
	}

	down := transfer(t, ns, "down", "/out", func(s *v1alpha1.TransferSpec) {
		s.Source.ConnectionRef, s.Mode, s.Verify = ftpRef("ftps"), v1alpha1.TransferMove, v1alpha1.VerifySHA256
		s.Destination.ConnectionRef, s.Destination.Path = v1alpha1.ConnectionReference{Name: "src"}, "/back"
	})
	if got := finished(t, down); readyReason(got) != "True/Succeeded" || got.Status.Files.Done != 13 {
		t.Fatalf("down: %s %+v", readyReason(got), got.Status)
	}
	if !bytes.Equal(sftp.read(t, "back/big.bin"), big) || ftpd.has("out/big.bin") {
		t.Error("FTPS to SFTP with Move: the copy differs, or the source is left")
	}
	for _, dir := range []string{filepath.Join(ftpd.Dir, "out"), sftp.dir + "/back"} {
		entries, err := os.ReadDir(dir)
		must(t, err)
		for _, e := range entries {
			if tempname.Is(e.Name()) {
				t.Errorf("a temporary file is left: %s/%s", dir, e.Name())
			}
		}
	}
}

// TestWatchFTP: a file dropped on an FTPS server is reported once at its
// final size, copied to SFTP and filed away there.
func TestWatchFTP(t *testing.T) {
	t.Parallel()
	sftp := sshdServer(testsshd.Start(t))
	ftpd := ftpServer{testftpd.Start(t)}
	ns := transferNamespace(t, map[string]server{"box": sftp})
	conn, secret := ftpd.Connection(ns, "ftps")
	testkit.ReadyFtp(t, k8s, conn, secret)
	r := testsink.Start(t)
	startWorker(t)
	w := &v1alpha1.SftpWatch{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "drop"}, Spec: v1alpha1.SftpWatchSpec{
		ConnectionRef: ftpRef("ftps"), Path: "/drop",
		PollInterval: &metav1.Duration{Duration: 5 * time.Second}, Stability: v1alpha1.Stability{MinAge: &metav1.Duration{}},
		Events: []v1alpha1.WatchEvent{v1alpha1.WatchCreated},
		Sink:   &v1alpha1.Destination{URI: r.URL}, Delivery: v1alpha1.DeliverySpec{BackoffDelay: "PT0.2S"},
		Transfer: &v1alpha1.TransferOptions{
			Destination: v1alpha1.TransferDestination{ConnectionRef: v1alpha1.ConnectionReference{Name: "box"}, Path: "/from-ftp"}},
		AfterDelivery: v1alpha1.AfterDelivery{Action: v1alpha1.AfterDeliveryMove, MoveTo: "/done"}}}
	ftpd.file(t, "drop/.keep", nil)
	must(t, k8s.Create(context.Background(), w))
	testkit.Polls(t, k8s, w)(1)
	ftpd.file(t, "drop/report.csv", []byte("figures"))
	eventually(t, "the file is reported, copied to SFTP and filed", func() bool {
		return len(r.Subjects()) >= 1 && sftp.has("from-ftp/report.csv") && ftpd.has("done/report.csv") && !ftpd.has("drop/report.csv")
	})
	if got := r.Subjects(); len(got) != 1 || got[0] != "dev.sftpgate.file.created /drop/report.csv" {
		t.Errorf("events %v", got)
	}
	if string(sftp.read(t, "from-ftp/report.csv")) != "figures" {
		t.Error("the copy differs")
	}
}

// TestTransferFTPAndStore: a partner's encrypted, signed file goes from
// an FTPS server into a bucket decrypted and verified, and back to the
// FTPS server encrypted for the partner, whose gpg reads it: ends of any
// two kinds, with OpenPGP between.
func TestTransferFTPAndStore(t *testing.T) {
	t.Parallel()
	ftpd := ftpServer{testftpd.Start(t)}
	bucket := newStore(t, "landing", "in/")
	ns := transferNamespace(t, nil)
	conn, secret := ftpd.Connection(ns, "ftps")
	testkit.ReadyFtp(t, k8s, conn, secret)
	testkit.ReadyStore(t, k8s, ns, "landing", bucket.Server, bucket.bucket, bucket.prefix)
	startWorker(t)
	ours := testgpg.Start(t, "ours", testgpg.Curve25519)
	partner := testgpg.Start(t, "partner", testgpg.RSA)
	partner.Trust(t, ours)
	ours.Trust(t, partner)
	keySecret(t, ns, "ours", ours.Private(t), testgpg.Passphrase)
	keySecret(t, ns, "partner", partner.Public(t, true), "")
	clear := random(t, 3<<20+5)
	ftpd.file(t, "drop/report.csv.pgp", partner.EncryptSign(t, clear, []*testgpg.Home{ours}))

	in := transfer(t, ns, "in", "/drop", func(s *v1alpha1.TransferSpec) {
		s.Source.ConnectionRef, s.Verify = ftpRef("ftps"), v1alpha1.VerifySHA256
		s.OpenPGP = &v1alpha1.TransferOpenPGP{Decrypt: &v1alpha1.OpenPGPDecrypt{
			KeySecretRef: v1alpha1.OpenPGPKeyRef{Name: "ours"}, VerifyWith: []v1alpha1.OpenPGPKeyRef{{Name: "partner"}}}}
	}, toStore("landing"))
	if got := finished(t, in); readyReason(got) != "True/Succeeded" || got.Status.Files.Done != 1 {
		t.Fatalf("FTPS to bucket: %s %+v", readyReason(got), got.Status)
	}
	if !bytes.Equal(bucket.read(t, "out/report.csv"), clear) {
		t.Fatal("FTPS to bucket: the decrypted object differs")
	}
	out := transfer(t, ns, "out", "/out/report.csv", fromStore("landing"), func(s *v1alpha1.TransferSpec) {
		s.Destination.ConnectionRef, s.Destination.Path = ftpRef("ftps"), "/outbox"
		s.OpenPGP = &v1alpha1.TransferOpenPGP{Encrypt: &v1alpha1.OpenPGPEncrypt{
			Recipients: []v1alpha1.OpenPGPKeyRef{{Name: "partner"}}, SignWith: &v1alpha1.OpenPGPKeyRef{Name: "ours"}}}
	})
	if got := finished(t, out); readyReason(got) != "True/Succeeded" {
		t.Fatalf("bucket to FTPS: %s %+v", readyReason(got), got.Status)
	}
	if plain := partner.DecryptVerify(t, ftpd.read(t, "outbox/report.csv.pgp"), ours); !bytes.Equal(plain, clear) {
		t.Error("bucket to FTPS: the partner's gpg reads other than what was encrypted")
	}
}

// TestTransferToFTPResumes: a copy to an FTPS server whose session ends
// mid-file continues from what the server holds (REST, then STOR from
// there), and the file arrives whole.
func TestTransferToFTPResumes(t *testing.T) {
	t.Parallel()
	sftp, ftpd, ns := sftpAndFTP(t)
	data := random(t, 96<<20+7)
	sftp.file(t, "in/big.bin", data)
	tr := transfer(t, ns, "cut", "/in/big.bin", func(s *v1alpha1.TransferSpec) {
		s.Destination.ConnectionRef, s.Verify = ftpRef("ftps"), v1alpha1.VerifySHA256
	})
	// The copy's temporary file, once it holds a sixth of the file.
	var partial string
	for partial == "" {
		entries, _ := os.ReadDir(filepath.Join(ftpd.Dir, "out"))
		for _, e := range entries {
			if fi, err := e.Info(); err == nil && tempname.Is(e.Name()) && fi.Size() >= int64(len(data))/6 {
				partial = e.Name()
			}
		}
		if partial == "" && ftpd.has("out/big.bin") {
			t.Fatal("the copy ended before it could be cut: the file is too small for this machine")
		}
	}
	ftpd.EndSessions()
	if got := finished(t, tr); readyReason(got) != "True/Succeeded" || !bytes.Equal(ftpd.read(t, "out/big.bin"), data) {
		t.Fatalf("%s %+v", readyReason(got), got.Status)
	}
	if !regexp.MustCompile(`"REST [1-9][0-9]*"`).MatchString(ftpd.Log()) {
		t.Errorf("the copy started over: no STOR continued from an offset (REST):\n%s", ftpd.Log())
	}
}
