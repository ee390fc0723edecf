package bench

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/procs"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
)

const (
	// bigTransfer is the large file's size; smallFiles of smallSize the
	// batch.
	bigTransfer = 1 << 30
	smallFiles  = 10_000
	smallSize   = 1 << 10
	// smallParallelism is the Transfer's for the batch: the worker's
	// default share of one namespace's streams.
	smallParallelism = 8
	// bigRounds is the timed turns of the large file.
	bigRounds = 3
)

// TestBenchmarkTransfers measures Transfers between two sshd on this
// machine, run by the worker as its own process, against rclone copy
// between two SFTP remotes of the same servers, in the same run: one
// large file, and a batch of small ones; with the worker's peak memory.
func TestBenchmarkTransfers(t *testing.T) {
	binary, rclone := os.Getenv("SFTPGATE_BENCH_BINARY"), os.Getenv("SFTPGATE_BENCH_RCLONE")
	if binary == "" || rclone == "" {
		t.Fatal("run it with make bench, which builds the binary it measures and installs rclone")
	}
	r := startRig(t, binary, "transfers", map[string]string{"src": ""}, io.Discard)
	dst := testsshd.Start(t)
	r.addConnections(t, "transfers", dst, map[string]string{"dst": dst.Dir})
	worker := r.startWorker(t, binary, "bench")
	waitReadyConnections(t, r.k8s, "transfers", "src", "dst")
	remotes := rcloneRemotes(t, rclone, r.sshd, dst)

	transfer := func(name, path string, parallelism int32) time.Duration {
		return r.transfer(t, "transfers", name, sftpEnd("src"), path, sftpEnd("dst"), parallelism)
	}
	var rcloneCPU time.Duration
	rcloneCopy := func(from, to string, args ...string) time.Duration {
		took, cpu := rcloneCopy(t, rclone, remotes, "src:"+filepath.Join(r.sshd.Dir, from), "dst:"+filepath.Join(dst.Dir, to), args...)
		rcloneCPU = cpu
		return took
	}

	// One large file.
	writeRandom(t, filepath.Join(r.sshd.Dir, "big.bin"), bigTransfer)
	if err := resetPeakRSS(worker.Process.Pid); err != nil {
		t.Fatal(err)
	}
	cpu := func() [3]time.Duration {
		return [3]time.Duration{procs.TreeCPUTime(worker.Process.Pid), r.sshd.CPUTime(), dst.CPUTime()}
	}
	// One untimed turn each, then bigRounds timed ones taking turns, as
	// the gateway's large transfers are measured: the median counts, and
	// the CPU is the timed turns' mean. (The first copy into fresh memory
	// costs more, whoever makes it.)
	var oursTimes, rcloneTimes []time.Duration
	var oursCPU, rcloneCPUs [3]time.Duration
	for round := range bigRounds + 1 {
		before := cpu()
		took := transfer(fmt.Sprintf("big-%d", round), "/big.bin", 1)
		after := cpu()
		sameFile(t, filepath.Join(r.sshd.Dir, "big.bin"), filepath.Join(dst.Dir, fmt.Sprintf("big-%d", round), "big.bin"))
		_ = os.RemoveAll(filepath.Join(dst.Dir, fmt.Sprintf("big-%d", round)))
		before2 := cpu()
		took2 := rcloneCopy("/big.bin", "/rclone-big")
		after2 := cpu()
		sameFile(t, filepath.Join(r.sshd.Dir, "big.bin"), filepath.Join(dst.Dir, "rclone-big", "big.bin"))
		_ = os.RemoveAll(filepath.Join(dst.Dir, "rclone-big"))
		if round == 0 {
			continue
		}
		oursTimes, rcloneTimes = append(oursTimes, took), append(rcloneTimes, took2)
		// The client's CPU is the worker's, or the rclone process's.
		after2[0], before2[0] = rcloneCPU, 0
		for i := range oursCPU {
			oursCPU[i] += (after[i] - before[i]) / bigRounds
			rcloneCPUs[i] += (after2[i] - before2[i]) / bigRounds
		}
	}
	bigRSS, err := peakRSS(worker.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	oursBig, rcloneBig := median(oursTimes), median(rcloneTimes)
	_ = os.Remove(filepath.Join(r.sshd.Dir, "big.bin"))

	// Many small files.
	fill(t, r.sshd, "small", 0)
	payload := bytes.Repeat([]byte("x"), smallSize)
	for i := range smallFiles {
		if err := os.WriteFile(filepath.Join(r.sshd.Dir, "small", fmt.Sprintf("f-%05d.csv", i)), payload, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := resetPeakRSS(worker.Process.Pid); err != nil {
		t.Fatal(err)
	}
	before := cpu()
	oursSmall := transfer("small", "/small", smallParallelism)
	after := cpu()
	smallRSS, err := peakRSS(worker.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if n := countFiles(t, filepath.Join(dst.Dir, "small")); n != smallFiles {
		t.Fatalf("%d files copied of %d", n, smallFiles)
	}
	before2 := cpu()
	rcloneSmall := rcloneCopy("/small", "/rclone-small")
	after2 := cpu()
	smallRcloneCPU := rcloneCPU
	rcloneSmall8 := rcloneCopy("/small", "/rclone-small-8", "--transfers="+strconv.Itoa(smallParallelism))
	if n := countFiles(t, filepath.Join(dst.Dir, "rclone-small")); n != smallFiles {
		t.Fatalf("rclone copied %d files of %d", n, smallFiles)
	}

	mibps := func(d time.Duration) float64 { return bigTransfer / float64(1<<20) / d.Seconds() }
	fps := func(d time.Duration) float64 { return smallFiles / d.Seconds() }
	fmt.Printf(`
transfers between two sshd on loopback (make bench)
| measure | sftpgate Transfer | rclone copy (defaults) | ratio | target |
|---|---|---|---|---|
| 1 GiB file, median of 3 turns | %.0f MiB/s (%.1f s) | %.0f MiB/s (%.1f s) | %.2f | >= 1.0 |
| 10,000 files of 1 KiB | %.0f files/s (%.1f s, parallelism %d) | %.0f files/s (%.1f s, --transfers 4); %.0f files/s with --transfers %d | %.2f | >= 2.0 |
| worker peak RSS | %.0f MB (1 GiB file), %.0f MB (10,000 files) | | | flat |
| CPU for the 1 GiB file (a turn's mean): client, source sshd, destination sshd | %.1f s, %.1f s, %.1f s | %.1f s, %.1f s, %.1f s | | |
| CPU for the 10,000 files: client, source sshd, destination sshd | %.1f s, %.1f s, %.1f s | %.1f s, %.1f s, %.1f s | | |
`, mibps(oursBig), oursBig.Seconds(), mibps(rcloneBig), rcloneBig.Seconds(), rcloneBig.Seconds()/oursBig.Seconds(),
		fps(oursSmall), oursSmall.Seconds(), smallParallelism, fps(rcloneSmall), rcloneSmall.Seconds(), fps(rcloneSmall8), smallParallelism,
		rcloneSmall.Seconds()/oursSmall.Seconds(), float64(bigRSS)/1e6, float64(smallRSS)/1e6,
		oursCPU[0].Seconds(), oursCPU[1].Seconds(), oursCPU[2].Seconds(), rcloneCPUs[0].Seconds(), rcloneCPUs[1].Seconds(), rcloneCPUs[2].Seconds(),
		(after[0] - before[0]).Seconds(), (after[1] - before[1]).Seconds(), (after[2] - before[2]).Seconds(),
		smallRcloneCPU.Seconds(), (after2[1] - before2[1]).Seconds(), (after2[2] - before2[2]).Seconds())
}

// sftpEnd names the SftpConnection name as a Transfer's end.
func sftpEnd(name string) v1alpha1.ConnectionReference {
	return v1alpha1.ConnectionReference{Name: name}
}

// transfer runs a Transfer in ns of path on from to the folder /name of
// to, and says how long it took to finish.
func (r *rig) transfer(t *testing.T, ns, name string, from v1alpha1.ConnectionReference, path string, to v1alpha1.ConnectionReference,
	parallelism int32) time.Duration {
	t.Helper()
	start := time.Now()
	r.waitTransfer(t, r.startTransfer(t, ns, name, from, path, to, parallelism))
	return time.Since(start)
}

// startTransfer makes a Transfer of path into /<name> at to.
func (r *rig) startTransfer(t *testing.T, ns, name string, from v1alpha1.ConnectionReference, path string, to v1alpha1.ConnectionReference,
	parallelism int32) *v1alpha1.Transfer {
	t.Helper()
	tr := &v1alpha1.Transfer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.TransferSpec{
		Source: v1alpha1.TransferSource{ConnectionRef: from, Path: path},
		TransferOptions: v1alpha1.TransferOptions{
			Destination: v1alpha1.TransferDestination{ConnectionRef: to, Path: "/" + name}, Parallelism: parallelism}}}
	r.create(t, tr)
	return tr
}

// waitTransfer waits until tr finished, which it must have done well.
func (r *rig) waitTransfer(t *testing.T, tr *v1alpha1.Transfer) {
	t.Helper()
	for {
		if err := r.k8s.Get(t.Context(), client.ObjectKeyFromObject(tr), tr); err != nil {
			t.Fatal(err)
		}
		if tr.Status.CompletionTime != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !meta.IsStatusConditionTrue(tr.Status.Conditions, v1alpha1.ConditionReady) {
		t.Fatalf("%s: %+v", tr.Name, tr.Status)
	}
}

// rcloneCopy runs rclone copy from to to (remote:path, an SFTP remote's
// path the server's real one: sftpgate's connections are rooted in the
// sshd's directories) with remotes, and says how long it took and the
// CPU rclone spent.
func rcloneCopy(t *testing.T, rclone string, remotes []string, from, to string, args ...string) (took, cpu time.Duration) {
	t.Helper()
	start := time.Now()
	cmd := exec.Command(rclone, append([]string{"copy", from, to}, args...)...)
	cmd.Env = append(os.Environ(), remotes...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("rclone copy: %v\n%s", err, out)
	}
	return time.Since(start), cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// rcloneRemotes are the environment variables that define rclone's
// remotes src and dst: the two sshd, logged in as the test user.
func rcloneRemotes(t *testing.T, rclone string, src, dst *testsshd.Server) []string {
	t.Helper()
	return rcloneRemotesAt(t, rclone, src, src.Host, src.Port, dst, dst.Host, dst.Port)
}

// rcloneRemotesAt is rcloneRemotes with the servers reached at the
// addresses given (delay proxies before them, say).
func rcloneRemotesAt(t *testing.T, rclone string, src *testsshd.Server, srcHost string, srcPort int32,
	dst *testsshd.Server, dstHost string, dstPort int32) []string {
	t.Helper()
	return append(append(rcloneSFTPAt(t, rclone, "SRC", src, srcHost, srcPort), rcloneSFTPAt(t, rclone, "DST", dst, dstHost, dstPort)...),
		"RCLONE_CONFIG=/dev/null")
}

// rcloneSFTP defines rclone's remote name: s, logged in as the test user.
func rcloneSFTP(t *testing.T, rclone, name string, s *testsshd.Server) []string {
	t.Helper()
	return rcloneSFTPAt(t, rclone, name, s, s.Host, s.Port)
}

// rcloneSFTPAt is rcloneSFTP with s reached at host:port.
func rcloneSFTPAt(t *testing.T, rclone, name string, s *testsshd.Server, host string, port int32) []string {
	t.Helper()
	out, err := exec.Command(rclone, "obscure", s.Password).Output()
	if err != nil {
		t.Fatalf("rclone obscure: %v", err)
	}
	known := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(known, fmt.Appendf(nil, "[%s]:%d %s\n", host, port, s.HostKeyLine), 0o600); err != nil {
		t.Fatal(err)
	}
	p := "RCLONE_CONFIG_" + name + "_"
	return []string{p + "TYPE=sftp", p + "HOST=" + host, p + "PORT=" + strconv.Itoa(int(port)), p + "USER=" + testsshd.User,
		p + "PASS=" + strings.TrimSpace(string(out)), p + "KNOWN_HOSTS_FILE=" + known, p + "SHELL_TYPE=none"}
}

func waitReadyConnections(t *testing.T, k8s client.Client, ns string, names ...string) {
	t.Helper()
	for _, name := range names {
		var c v1alpha1.SftpConnection
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
			if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &c); err == nil &&
				meta.IsStatusConditionTrue(c.Status.Conditions, v1alpha1.ConditionReady) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("connection %s is not Ready: %+v", name, c.Status.Conditions)
			}
		}
	}
}

func sameFile(t *testing.T, a, b string) {
	t.Helper()
	fa, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := os.Stat(b)
	if err != nil {
		t.Fatal(err)
	}
	if fa.Size() != fb.Size() {
		t.Fatalf("%s holds %d bytes, %s %d", a, fa.Size(), b, fb.Size())
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func countFiles(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}
