package bench

import (
	"bytes"
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

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/sftpgate/sftpgate/hack/fixtures/delayproxy"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/internal/tempname"
	"github.com/sftpgate/sftpgate/worker/transfers"
)

// longLinkDelays are the long links measured: each direction's delay,
// half the round trips SFTPGATE_BENCH_LINKS lists in milliseconds (by
// default 0,50,150), all at 1 Gbit/s.
func longLinkDelays(t *testing.T) []time.Duration {
	v := os.Getenv("SFTPGATE_BENCH_LINKS")
	if v == "" {
		v = "0,50,150"
	}
	var delays []time.Duration
	for _, ms := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(ms))
		if err != nil || n < 0 || n%2 != 0 {
			t.Fatalf("SFTPGATE_BENCH_LINKS=%q: round trips in milliseconds, even, separated by commas", v)
		}
		delays = append(delays, time.Duration(n/2)*time.Millisecond)
	}
	return delays
}

const (
	linkBytesPerSecond = 125_000_000
	// longBig is the large file; longSmallFiles of longSmallSize the batch.
	longBig        = 1 << 30
	longSmallFiles = 1000
	longSmallSize  = 64 << 10
	// sshWindow is what one SSH channel has in flight, OpenSSH's and
	// x/crypto/ssh's window: what bounds one ordered SFTP stream (rclone's
	// copy between two SFTP remotes is one too).
	sshWindow = 2 << 20
)

// linkTo starts a delay proxy before s with the one-way delay, at
// linkBytesPerSecond; it returns where to reach s through it, and it.
func linkTo(t *testing.T, s *testsshd.Server, delay time.Duration) (string, int32, *delayproxy.Proxy) {
	t.Helper()
	p, err := delayproxy.Start(delayproxy.Options{Target: net.JoinHostPort(s.Host, strconv.Itoa(int(s.Port))), Delay: delay,
		BytesPerSecond: linkBytesPerSecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	host, port, err := net.SplitHostPort(p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return host, int32(n), p
}

// TestBenchmarkLongLinks measures Transfers against rclone copy between
// the same two sshd, each behind a delay proxy of the same round trip
// (0, 50 and 150 ms) at 1 Gbit/s: a 1 GiB file, and 1,000 files of 64
// KiB. It prints each figure beside its target, and the limit one SSH
// channel's window sets at that round trip, and the worker's ranges.
func TestBenchmarkLongLinks(t *testing.T) {
	binary, rclone := os.Getenv("SFTPGATE_BENCH_BINARY"), os.Getenv("SFTPGATE_BENCH_RCLONE")
	if binary == "" || rclone == "" {
		t.Fatal("run it with make bench, which builds the binary it measures and installs rclone")
	}
	const ns = "links"
	r := startRig(t, binary, ns, map[string]string{}, io.Discard)
	dst := testsshd.Start(t)
	// A short lease: a worker killed has its transfer resumed soon.
	startWorker := func() *exec.Cmd { return r.startWorker(t, binary, "links", "--lease-duration=5s") }
	worker := startWorker()
	writeRandom(t, filepath.Join(r.sshd.Dir, "big.bin"), longBig)
	fill(t, r.sshd, "small", 0)
	payload := bytes.Repeat([]byte("x"), longSmallSize)
	for i := range longSmallFiles {
		if err := os.WriteFile(filepath.Join(r.sshd.Dir, "small", fmt.Sprintf("f-%04d.csv", i)), payload, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	mibps := func(d time.Duration) float64 { return longBig / float64(1<<20) / d.Seconds() }
	fps := func(d time.Duration) float64 { return longSmallFiles / d.Seconds() }
	linkMiBps := float64(linkBytesPerSecond) / (1 << 20)
	// limit is what in flight bytes allow over a round trip, at most the
	// link's bandwidth.
	limit := func(inFlight float64, rtt time.Duration) float64 {
		if rtt == 0 {
			return linkMiBps
		}
		return min(linkMiBps, inFlight/(1<<20)/rtt.Seconds())
	}
	// The worker copies a large file in this many ranges at once, each on
	// a channel of its own.
	ranges := transfers.DefaultLimits().RangesPerFile
	var rows strings.Builder
	for i, delay := range longLinkDelays(t) {
		rtt := 2 * delay
		srcHost, srcPort, _ := linkTo(t, r.sshd, delay)
		dstHost, dstPort, dstLink := linkTo(t, dst, delay)
		from, to := fmt.Sprintf("src-%d", i), fmt.Sprintf("dst-%d", i)
		r.addConnectionAt(t, ns, from, srcHost, srcPort, r.sshd, "")
		r.addConnectionAt(t, ns, to, dstHost, dstPort, dst, "")
		waitReadyConnections(t, r.k8s, ns, from, to)
		remotes := rcloneRemotesAt(t, rclone, r.sshd, srcHost, srcPort, dst, dstHost, dstPort)

		name := fmt.Sprintf("big-%d", i)
		oursBig := r.transfer(t, ns, name, sftpEnd(from), "/big.bin", sftpEnd(to), 1)
		sameFile(t, filepath.Join(r.sshd.Dir, "big.bin"), filepath.Join(dst.Dir, name, "big.bin"))
		_ = os.RemoveAll(filepath.Join(dst.Dir, name))
		rcloneBig, _ := rcloneCopy(t, rclone, remotes, "src:"+filepath.Join(r.sshd.Dir, "big.bin"), "dst:"+filepath.Join(dst.Dir, "rclone-"+name))
		sameFile(t, filepath.Join(r.sshd.Dir, "big.bin"), filepath.Join(dst.Dir, "rclone-"+name, "big.bin"))
		_ = os.RemoveAll(filepath.Join(dst.Dir, "rclone-"+name))

		name = fmt.Sprintf("small-%d", i)
		oursSmall := r.transfer(t, ns, name, sftpEnd(from), "/small", sftpEnd(to), smallParallelism)
		if n := countFiles(t, filepath.Join(dst.Dir, name)); n != longSmallFiles {
			t.Fatalf("%d files copied of %d", n, longSmallFiles)
		}
		rcloneSmall, _ := rcloneCopy(t, rclone, remotes, "src:"+filepath.Join(r.sshd.Dir, "small"), "dst:"+filepath.Join(dst.Dir, "rclone-"+name))
		if n := countFiles(t, filepath.Join(dst.Dir, "rclone-"+name)); n != longSmallFiles {
			t.Fatalf("rclone copied %d files of %d", n, longSmallFiles)
		}

		if rtt == 50*time.Millisecond {
			// A cut: the worker killed once half the file reached the
			// destination; another process resumes each range from
			// what the plan and the copy say was written.
			tr := r.startTransfer(t, ns, "resumed", sftpEnd(from), "/big.bin", sftpEnd(to), 1)
			base := dstLink.Sent()
			for deadline := time.Now().Add(5 * time.Minute); dstLink.Sent()-base < longBig/2; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the cut transfer's copy did not reach half the file")
				}
			}
			_ = worker.Process.Kill()
			_ = worker.Wait()
			// What the link still held reaches the server.
			time.Sleep(time.Second)
			missing := longBig - heldOf(t, filepath.Join(r.sshd.Dir, "big.bin"), filepath.Join(dst.Dir, "resumed"))
			atCut := dstLink.Sent()
			worker = startWorker()
			r.waitTransfer(t, tr)
			sameFile(t, filepath.Join(r.sshd.Dir, "big.bin"), filepath.Join(dst.Dir, "resumed", "big.bin"))
			_ = os.RemoveAll(filepath.Join(dst.Dir, "resumed"))
			sent := dstLink.Sent() - atCut
			fmt.Fprintf(&rows, "| %d ms | 1 GiB file, its worker killed halfway and another resuming it | %.0f MiB sent for %.0f MiB missing | | %.2f | <= 1.10 | |\n",
				rtt.Milliseconds(), float64(sent)/(1<<20), float64(missing)/(1<<20), float64(sent)/float64(missing))
		}

		bigTarget, smallTarget := "", ""
		switch rtt {
		case 50 * time.Millisecond:
			bigTarget = fmt.Sprintf(">= 1.5 and >= %.0f MiB/s (0.8 of the link)", 0.8*linkMiBps)
			smallTarget = ">= 5.0"
		case 150 * time.Millisecond:
			bigTarget = ">= 1.0"
		}
		fmt.Fprintf(&rows, "| %d ms | 1 GiB file | %.0f MiB/s (%.1f s) | %.0f MiB/s (%.1f s) | %.2f | %s | %.0f MiB/s (%d ranges: %.0f) |\n",
			rtt.Milliseconds(), mibps(oursBig), oursBig.Seconds(), mibps(rcloneBig), rcloneBig.Seconds(), rcloneBig.Seconds()/oursBig.Seconds(),
			bigTarget, limit(sshWindow, rtt), ranges, limit(float64(ranges)*sshWindow, rtt))
		fmt.Fprintf(&rows, "| %d ms | 1,000 files of 64 KiB | %.0f files/s (%.1f s, parallelism %d) | %.0f files/s (%.1f s, --transfers 4) | %.2f | %s | |\n",
			rtt.Milliseconds(), fps(oursSmall), oursSmall.Seconds(), smallParallelism, fps(rcloneSmall), rcloneSmall.Seconds(),
			rcloneSmall.Seconds()/oursSmall.Seconds(), smallTarget)
	}
	fmt.Printf(`
transfers over long links: two sshd, each behind a delay proxy of the round trip, at 1 Gbit/s (%.0f MiB/s) (make bench)
| round trip | measure | sftpgate Transfer | rclone copy (defaults) | ratio | target | what in-flight bytes allow: one SSH channel's 2 MiB window (the worker's ranges) |
|---|---|---|---|---|---|---|
%s`, linkMiBps, rows.String())
}

// heldOf is how many bytes of the source the temporary copy in dir holds
// at their places: its 32 KiB chunks equal to the source's (which, of
// random bytes, has no chunk of zeros a hole would pass for).
func heldOf(t *testing.T, source, dir string) int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var held int64
	for _, e := range entries {
		if !tempname.Is(e.Name()) {
			continue
		}
		src, err := os.ReadFile(source)
		must(t, err)
		tmp, err := os.ReadFile(filepath.Join(dir, e.Name()))
		must(t, err)
		const chunk = 32 << 10
		for off := 0; off < len(tmp); off += chunk {
			end := min(off+chunk, len(tmp), len(src))
			if bytes.Equal(src[off:end], tmp[off:end]) {
				held += int64(end - off)
			}
		}
	}
	return held
}

// TestBenchmarkLongLinksGateway measures the gateway, its sshd behind a
// delay proxy of each round trip at 1 Gbit/s, against pkg/sftp with its
// defaults over one SSH connection through the same link:
// measureGateway's measures at each round trip.
func TestBenchmarkLongLinksGateway(t *testing.T) {
	binary := os.Getenv("SFTPGATE_BENCH_BINARY")
	if binary == "" {
		t.Fatal("run it with make bench, which builds the binary it measures")
	}
	const ns = "links"
	r := startRig(t, binary, ns, map[string]string{}, io.Discard)
	var rows strings.Builder
	httpClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for i, delay := range longLinkDelays(t) {
		rtt := 2 * delay
		host, port, _ := linkTo(t, r.sshd, delay)
		slug := fmt.Sprintf("gw-%d", i)
		r.addConnectionAt(t, ns, slug, host, port, r.sshd, "")
		g := r.client(httpClient, slug, r.token)
		waitServed(t, g)
		figures := measureGateway(t, g, sftpDirect{directClient(t, r.sshd, host, port), r.sshd.Dir}, strconv.Itoa(i))
		// Targets of the upload, the download, the writes and the reads.
		var targets [4]string
		if rtt == 50*time.Millisecond {
			targets = [4]string{">= 0.80", ">= 0.80", ">= 0.95", ""}
		}
		for j, row := range figures.rows() {
			fmt.Fprintf(&rows, "| %d ms | %s | %s |\n", rtt.Milliseconds(), row, targets[j])
		}
	}
	fmt.Printf(`
the gateway over long links: sshd behind a delay proxy at 1 Gbit/s, against pkg/sftp over one SSH connection through it (make bench)
| round trip | measure | direct client | gateway | ratio | target |
|---|---|---|---|---|---|
%s`, rows.String())
}

const (
	// longPhase is how long measureGateway's small writes, and then its
	// reads, run.
	longPhase = 5 * time.Second
	// gatewayConcurrency is how many writes (or reads) run at once in
	// measureGateway's small writes and reads.
	gatewayConcurrency = 16
)

// directFS is a client of the server a gateway benchmark's connection
// reaches, used directly: what the gateway is measured against. Names are
// relative to the connection's root.
type directFS interface {
	// upload stores size zero bytes as name; download reads name, of size
	// bytes, whole.
	upload(name string, size int64) error
	download(name string, size int64) error
	mkdir(dir string) error
	// write stores content as the new file name, and read reads name, of
	// size bytes, as a user would: open, write or read, close. op is
	// runFor's operation, which runs in its worker op%gatewayConcurrency.
	write(op int, name, content string) error
	read(op int, name string, size int) error
}

// gatewayFigures are what measureGateway measured.
type gatewayFigures struct {
	upDirect, upGateway, downDirect, downGateway       time.Duration
	writeDirect, writeGateway, readDirect, readGateway result
}

// measureGateway measures the gateway, through g, against direct on the
// same server, with names ending in suffix: largeSize bytes uploaded and
// downloaded (one turn each, the direct client first), 1 KiB writes of new
// files at concurrency gatewayConcurrency for longPhase, then reads of
// them for longPhase.
func measureGateway(t *testing.T, g *gatewayClient, direct directFS, suffix string) gatewayFigures {
	t.Helper()
	var f gatewayFigures
	large := "large-" + suffix
	f.upDirect = timed(func() error { return direct.upload(large+"-direct", largeSize) })
	f.upGateway = timed(func() error {
		return g.call("write?path="+large, "application/octet-stream", io.LimitReader(zeros{}, largeSize), largeSize)
	})
	f.downDirect = timed(func() error { return direct.download(large+"-direct", largeSize) })
	f.downGateway = timed(func() error { return g.download(large, largeSize) })
	// A folder each: where a stat lists the folder (FTP's), neither pays
	// for the other's files.
	dirDirect, dirGateway := "writes-"+suffix+"-direct", "writes-"+suffix
	must(t, direct.mkdir(dirDirect))
	must(t, direct.mkdir(dirGateway))
	kib := strings.Repeat("x", 1024)
	f.writeDirect = runFor(longPhase, gatewayConcurrency, func(j int) error {
		return direct.write(j, fmt.Sprintf("%s/%d.txt", dirDirect, j), kib)
	})
	f.writeGateway = runFor(longPhase, gatewayConcurrency, func(j int) error {
		return g.call("write", "application/json", strings.NewReader(fmt.Sprintf(`{"path": "%s/%d.txt", "file": {"text": "%s"}}`, dirGateway, j, kib)), -1)
	})
	// Reads of the first files just written (each writer wrote one).
	f.readDirect = runFor(longPhase, gatewayConcurrency, func(j int) error {
		return direct.read(j, fmt.Sprintf("%s/%d.txt", dirDirect, j%gatewayConcurrency), len(kib))
	})
	f.readGateway = runFor(longPhase, gatewayConcurrency, func(j int) error {
		return g.call("read", "application/json", strings.NewReader(fmt.Sprintf(`{"path": "%s/%d.txt"}`, dirGateway, j%gatewayConcurrency)), -1)
	})
	return f
}

// rows are the figures' rows of a table, cells of measure, direct client,
// gateway and ratio (the gateway's rate over the direct client's), without
// the outer bars: the upload, the download, the writes and the reads.
func (f gatewayFigures) rows() [4]string {
	big := func(what string, direct, gateway time.Duration) string {
		return fmt.Sprintf("%s | %.0f MB/s | %.0f MB/s | %.2f", what, mbps(direct), mbps(gateway), direct.Seconds()/gateway.Seconds())
	}
	small := func(what string, direct, gateway result) string {
		return fmt.Sprintf("%s, concurrency %d | %.0f/s (%s) | %.0f/s (%s) | %.2f", what, gatewayConcurrency,
			direct.rate(), direct.percentiles(), gateway.rate(), gateway.percentiles(), gateway.rate()/direct.rate())
	}
	return [4]string{
		big("256 MiB upload", f.upDirect, f.upGateway),
		big("256 MiB download", f.downDirect, f.downGateway),
		small("1 KiB writes", f.writeDirect, f.writeGateway),
		small("1 KiB reads", f.readDirect, f.readGateway),
	}
}

// sftpDirect is pkg/sftp on the gateway's server, its names below root.
type sftpDirect struct {
	c    *sftp.Client
	root string
}

func (d sftpDirect) upload(name string, size int64) error {
	f, err := d.c.OpenFile(filepath.Join(d.root, name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return err
	}
	if _, err := f.ReadFromWithConcurrency(io.LimitReader(zeros{}, size), 0); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func (d sftpDirect) download(name string, size int64) error {
	f, err := d.c.Open(filepath.Join(d.root, name))
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	n, err := f.WriteTo(io.Discard)
	if err == nil && n != size {
		err = fmt.Errorf("%s: %d bytes downloaded of %d", name, n, size)
	}
	return err
}

func (d sftpDirect) mkdir(dir string) error { return d.c.MkdirAll(filepath.Join(d.root, dir)) }

// write and read share the one SSH connection among the workers.
func (d sftpDirect) write(_ int, name, content string) error {
	return writeFile(d.c, filepath.Join(d.root, name), content)
}

func (d sftpDirect) read(_ int, name string, size int) error {
	return readFile(d.c, filepath.Join(d.root, name), size)
}

// directClient is pkg/sftp with its defaults over one SSH connection to s,
// reached at host:port.
func directClient(t *testing.T, s *testsshd.Server, host string, port int32) *sftp.Client {
	t.Helper()
	conn, err := ssh.Dial("tcp", net.JoinHostPort(host, strconv.Itoa(int(port))), &ssh.ClientConfig{User: testsshd.User,
		Auth: []ssh.AuthMethod{ssh.Password(s.Password)}, HostKeyCallback: ssh.FixedHostKey(s.HostKey)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c, err := sftp.NewClient(conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// readFile reads a file of size bytes as a user of pkg/sftp would: open,
// read, close.
func readFile(c *sftp.Client, name string, size int) error {
	f, err := c.Open(name)
	if err != nil {
		return err
	}
	n, err := io.ReadFull(f, make([]byte, size))
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err == nil && n != size {
		err = fmt.Errorf("%s: %d bytes read of %d", name, n, size)
	}
	return err
}

// writeFile writes content into a new file name, as a user of pkg/sftp
// would: open, write, close.
func writeFile(c *sftp.Client, name, content string) error {
	f, err := c.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte(content))
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	return err
}
