package bench

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jlaffaye/ftp"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/procs"
	"github.com/sftpgate/sftpgate/hack/fixtures/testftpd"
)

// TestBenchmarkFTP measures Transfers between an sshd and an FTPS server
// (vsftpd, explicit TLS) on this machine, run by the worker as its own
// process, against rclone copy between the same servers, in the same
// run: one large file each way, and a batch of small ones each way; with
// the worker's peak memory.
func TestBenchmarkFTP(t *testing.T) {
	binary, rclone := os.Getenv("SFTPGATE_BENCH_BINARY"), os.Getenv("SFTPGATE_BENCH_RCLONE")
	if binary == "" || rclone == "" {
		t.Fatal("run it with make bench, which builds the binary it measures and installs rclone")
	}
	const ns = "ftp"
	r := startRig(t, binary, ns, map[string]string{"src": ""}, os.Stderr)
	ftpd := testftpd.Start(t)
	conn, secret := ftpd.Connection(ns, "ftps")
	conn.Spec.Limits.MaxConnections = smallParallelism
	r.create(t, secret, conn)
	worker := r.startWorker(t, binary, "bench")
	waitReadyConnections(t, r.k8s, ns, "src")
	waitReadyObject(t, r.k8s, &v1alpha1.FtpConnection{}, ns, "ftps")
	pass, err := exec.Command(rclone, "obscure", ftpd.Password).Output()
	if err != nil {
		t.Fatalf("rclone obscure: %v", err)
	}
	remotes := append(rcloneSFTP(t, rclone, "SRC", r.sshd), "RCLONE_CONFIG=/dev/null",
		"RCLONE_CONFIG_FTPS_TYPE=ftp", "RCLONE_CONFIG_FTPS_HOST="+ftpd.Host, "RCLONE_CONFIG_FTPS_PORT="+strconv.Itoa(ftpd.Port),
		"RCLONE_CONFIG_FTPS_USER="+ftpd.User, "RCLONE_CONFIG_FTPS_PASS="+strings.TrimSpace(string(pass)),
		"RCLONE_CONFIG_FTPS_EXPLICIT_TLS=true", "RCLONE_CONFIG_FTPS_NO_CHECK_CERTIFICATE=true",
		// Without it, rclone's uploads to vsftpd fail (426): its data
		// connections close without TLS's close_notify after TLS 1.3.
		"RCLONE_CONFIG_FTPS_DISABLE_TLS13=true")

	ftp := v1alpha1.ConnectionReference{Kind: v1alpha1.KindFtpConnection, Name: "ftps"}
	sftp := sftpEnd("src")
	transfer := func(name string, from v1alpha1.ConnectionReference, path string, to v1alpha1.ConnectionReference, parallelism int32) time.Duration {
		return r.transfer(t, ns, name, from, path, to, parallelism)
	}
	var rcloneCPU time.Duration
	rcloneCopy := func(from, to string, args ...string) time.Duration {
		took, cpu := rcloneCopy(t, rclone, remotes, from, to, args...)
		rcloneCPU = cpu
		return took
	}
	onFTP := func(p string) string { return filepath.Join(ftpd.Dir, p) }
	onSFTP := func(p string) string { return filepath.Join(r.sshd.Dir, p) }

	// One large file, each way: one untimed turn each, then bigRounds
	// timed ones taking turns; the median counts.
	writeRandom(t, onSFTP("big.bin"), bigTransfer)
	if err := resetPeakRSS(worker.Process.Pid); err != nil {
		t.Fatal(err)
	}
	var upOurs, upRclone, downOurs, downRclone []time.Duration
	for round := range bigRounds + 1 {
		up := fmt.Sprintf("up-%d", round)
		took := transfer(up, sftp, "/big.bin", ftp, 1)
		sameFile(t, onSFTP("big.bin"), onFTP(up+"/big.bin"))
		took2 := rcloneCopy("src:"+onSFTP("big.bin"), "ftps:"+onFTP("rclone-up"))
		sameFile(t, onSFTP("big.bin"), onFTP("rclone-up/big.bin"))
		_ = os.RemoveAll(onFTP("rclone-up"))
		down := fmt.Sprintf("down-%d", round)
		took3 := transfer(down, ftp, "/"+up+"/big.bin", sftp, 1)
		sameFile(t, onSFTP("big.bin"), onSFTP(down+"/big.bin"))
		_ = os.RemoveAll(onSFTP(down))
		took4 := rcloneCopy("ftps:"+onFTP(up+"/big.bin"), "src:"+onSFTP("rclone-down"))
		sameFile(t, onSFTP("big.bin"), onSFTP("rclone-down/big.bin"))
		_ = os.RemoveAll(onSFTP("rclone-down"))
		_ = os.RemoveAll(onFTP(up))
		if round == 0 {
			continue
		}
		upOurs, upRclone = append(upOurs, took), append(upRclone, took2)
		downOurs, downRclone = append(downOurs, took3), append(downRclone, took4)
	}
	bigRSS, err := peakRSS(worker.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(onSFTP("big.bin"))

	// Many small files, each way.
	fill(t, r.sshd, "small", 0)
	payload := bytes.Repeat([]byte("x"), smallSize)
	for i := range smallFiles {
		if err := os.WriteFile(onSFTP(fmt.Sprintf("small/f-%05d.csv", i)), payload, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := resetPeakRSS(worker.Process.Pid); err != nil {
		t.Fatal(err)
	}
	cpu := func() [3]time.Duration {
		return [3]time.Duration{procs.TreeCPUTime(worker.Process.Pid), r.sshd.CPUTime(), procs.TreeCPUTime(ftpd.PID())}
	}
	before := cpu()
	oursUp := transfer("small", sftp, "/small", ftp, smallParallelism)
	after := cpu()
	if n := countFiles(t, onFTP("small")); n != smallFiles {
		t.Fatalf("%d files copied to FTPS of %d", n, smallFiles)
	}
	oursDown := transfer("small-back", ftp, "/small", sftp, smallParallelism)
	if n := countFiles(t, onSFTP("small-back")); n != smallFiles {
		t.Fatalf("%d files copied to SFTP of %d", n, smallFiles)
	}
	smallRSS, err := peakRSS(worker.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	before2 := cpu()
	rcloneUp := rcloneCopy("src:"+onSFTP("small"), "ftps:"+onFTP("rclone-small"))
	after2 := cpu()
	after2[0], before2[0] = rcloneCPU, 0
	rcloneDown := rcloneCopy("ftps:"+onFTP("rclone-small"), "src:"+onSFTP("rclone-small-back"))
	rcloneUp8 := rcloneCopy("src:"+onSFTP("small"), "ftps:"+onFTP("rclone-small-8"), "--transfers="+strconv.Itoa(smallParallelism))
	if n := countFiles(t, onFTP("rclone-small")); n != smallFiles {
		t.Fatalf("rclone copied %d files of %d", n, smallFiles)
	}

	mibps := func(d time.Duration) float64 { return bigTransfer / float64(1<<20) / d.Seconds() }
	fps := func(d time.Duration) float64 { return smallFiles / d.Seconds() }
	big := func(what string, ours, theirs time.Duration) string {
		return fmt.Sprintf("| %s | %.0f MiB/s (%.1f s) | %.0f MiB/s (%.1f s) | %.2f | >= 1.0 |", what,
			mibps(ours), ours.Seconds(), mibps(theirs), theirs.Seconds(), theirs.Seconds()/ours.Seconds())
	}
	small := func(what string, ours, theirs time.Duration) string {
		return fmt.Sprintf("| %s | %.0f files/s (%.1f s, parallelism %d) | %.0f files/s (%.1f s, --transfers 4) | %.2f | >= 2.0 |", what,
			fps(ours), ours.Seconds(), smallParallelism, fps(theirs), theirs.Seconds(), theirs.Seconds()/ours.Seconds())
	}
	fmt.Printf(`
transfers between an sshd and an FTPS server (vsftpd, explicit TLS) on loopback (make bench)
| measure | sftpgate Transfer | rclone copy (defaults) | ratio | target |
|---|---|---|---|---|
%s
%s
%s
%s
| the same, SFTP to FTPS, rclone --transfers %d | | %.0f files/s (%.1f s) | | |
| worker peak RSS | %.0f MB (1 GiB files), %.0f MB (10,000 files) | | | flat |
| CPU for the 10,000 files SFTP to FTPS: client, sshd, vsftpd | %.1f, %.1f, %.1f s | %.1f, %.1f, %.1f s | | |
`, big("1 GiB file, SFTP to FTPS, median of 3 turns", median(upOurs), median(upRclone)),
		big("1 GiB file, FTPS to SFTP, median of 3 turns", median(downOurs), median(downRclone)),
		small("10,000 files of 1 KiB, SFTP to FTPS", oursUp, rcloneUp),
		small("10,000 files of 1 KiB, FTPS to SFTP", oursDown, rcloneDown),
		smallParallelism, fps(rcloneUp8), rcloneUp8.Seconds(),
		float64(bigRSS)/1e6, float64(smallRSS)/1e6,
		(after[0] - before[0]).Seconds(), (after[1] - before[1]).Seconds(), (after[2] - before[2]).Seconds(),
		(after2[0] - before2[0]).Seconds(), (after2[1] - before2[1]).Seconds(), (after2[2] - before2[2]).Seconds())
}

// TestBenchmarkFTPGateway measures the gateway serving an FtpConnection of
// vsftpd (explicit TLS) on this machine against jlaffaye/ftp, a control
// connection per worker, on the same server in the same run:
// measureGateway's measures.
func TestBenchmarkFTPGateway(t *testing.T) {
	binary := os.Getenv("SFTPGATE_BENCH_BINARY")
	if binary == "" {
		t.Fatal("run it with make bench, which builds the binary it measures")
	}
	const ns = "ftp"
	r := startRig(t, binary, ns, map[string]string{}, io.Discard)
	ftpd := testftpd.Start(t)
	conn, secret := ftpd.Connection(ns, "ftps")
	conn.Spec.Slug = "ftps"
	// A session per worker of the small writes, as the direct client has
	// a control connection per worker: an FTP session runs one command
	// at a time.
	conn.Spec.Limits.MaxConnections = gatewayConcurrency
	r.create(t, secret, conn)
	waitReadyObject(t, r.k8s, &v1alpha1.FtpConnection{}, ns, conn.Name)
	g := r.client(&http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}, conn.Spec.Slug, r.token)
	waitServed(t, g)
	figures := measureGateway(t, g, dialFTP(t, ftpd, gatewayConcurrency), "ftp")
	var rows strings.Builder
	for _, row := range figures.rows() {
		fmt.Fprintf(&rows, "| %s |\n", row)
	}
	fmt.Printf(`
the gateway serving an FtpConnection of vsftpd (explicit TLS) on loopback, against jlaffaye/ftp with a control connection per worker (make bench)
| measure | direct client | gateway | ratio |
|---|---|---|---|
%s`, rows.String())
}

// ftpDirect is jlaffaye/ftp on the gateway's server, logged in to its
// root: the large file on the first control connection, small files each
// on its worker's.
type ftpDirect []*ftp.ServerConn

// dialFTP logs in n control connections to s, with explicit TLS and the
// FtpConnection's trust (s's certificate pinned), its data connections
// resuming TLS sessions as ftpdial's do. At most TLS 1.2, as rclone in
// TestBenchmarkFTP: under TLS 1.3, jlaffaye/ftp closes a data connection
// with the server's session tickets unread, the socket answers them with a
// reset, and vsftpd fails the upload (426).
func dialFTP(t *testing.T, s *testftpd.Server, n int) ftpDirect {
	t.Helper()
	pin, err := hex.DecodeString(s.Fingerprint)
	must(t, err)
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12, ServerName: s.Host,
		InsecureSkipVerify: true, // verified in VerifyConnection, as ftpdial does
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("no certificate")
			}
			if sum := sha256.Sum256(cs.PeerCertificates[0].Raw); !bytes.Equal(sum[:], pin) {
				return errors.New("not the pinned certificate")
			}
			return nil
		},
		ClientSessionCache: tls.NewLRUClientSessionCache(8),
	}
	conns := make(ftpDirect, n)
	for i := range conns {
		c, err := ftp.Dial(net.JoinHostPort(s.Host, strconv.Itoa(s.Port)), ftp.DialWithTimeout(10*time.Second), ftp.DialWithExplicitTLS(cfg))
		must(t, err)
		t.Cleanup(func() { _ = c.Quit() })
		must(t, c.Login(s.User, s.Password))
		conns[i] = c
	}
	return conns
}

func (d ftpDirect) upload(name string, size int64) error {
	return d[0].Stor(name, io.LimitReader(zeros{}, size))
}

func (d ftpDirect) download(name string, size int64) error { return d.retr(d[0], name, size) }

func (d ftpDirect) mkdir(dir string) error { return d[0].MakeDir(dir) }

func (d ftpDirect) write(op int, name, content string) error {
	return d[op%len(d)].Stor(name, strings.NewReader(content))
}

func (d ftpDirect) read(op int, name string, size int) error {
	return d.retr(d[op%len(d)], name, int64(size))
}

// retr reads name, of size bytes, to its end on c.
func (ftpDirect) retr(c *ftp.ServerConn, name string, size int64) error {
	r, err := c.Retr(name)
	if err != nil {
		return err
	}
	n, err := io.Copy(io.Discard, r)
	if closeErr := r.Close(); err == nil {
		err = closeErr
	}
	if err == nil && n != size {
		err = fmt.Errorf("%s: %d bytes read of %d", name, n, size)
	}
	return err
}
