package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/procs"
	"github.com/sftpgate/sftpgate/hack/fixtures/tests3"
)

// TestBenchmarkObjectStore measures Transfers between an sshd and an S3
// server (versitygw) on this machine, run by the worker as its own
// process, against rclone copy between the same endpoints, in the same
// run: one large file each way, and a batch of small ones into the
// bucket; with the worker's peak memory.
func TestBenchmarkObjectStore(t *testing.T) {
	binary, rclone := os.Getenv("SFTPGATE_BENCH_BINARY"), os.Getenv("SFTPGATE_BENCH_RCLONE")
	if binary == "" || rclone == "" || os.Getenv(tests3.Binary) == "" {
		t.Fatal("run it with make bench, which builds the binary it measures and installs rclone and versitygw")
	}
	const ns, bucket = "objects", "landing"
	r := startRig(t, binary, ns, map[string]string{"src": ""}, os.Stderr)
	s3 := tests3.Start(t)
	s3.Bucket(t, bucket)
	r.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s3"},
		StringData: map[string]string{v1alpha1.SecretKeyAccessKeyID: s3.AccessKey, v1alpha1.SecretKeySecretAccessKey: s3.SecretKey}},
		&v1alpha1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bucket"}, Spec: v1alpha1.ObjectStoreSpec{
			Endpoint: "http://" + s3.Endpoint, Bucket: bucket, Addressing: v1alpha1.AddressingPath,
			Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.LocalSecretReference{Name: "s3"}}}})
	worker := r.startWorker(t, binary, "bench")
	waitReadyConnections(t, r.k8s, ns, "src")
	waitReadyObject(t, r.k8s, &v1alpha1.ObjectStore{}, ns, "bucket")
	remotes := append(rcloneSFTP(t, rclone, "SRC", r.sshd), "RCLONE_CONFIG=/dev/null",
		"RCLONE_CONFIG_S3_TYPE=s3", "RCLONE_CONFIG_S3_PROVIDER=Other", "RCLONE_CONFIG_S3_ENDPOINT=http://"+s3.Endpoint,
		"RCLONE_CONFIG_S3_ACCESS_KEY_ID="+s3.AccessKey, "RCLONE_CONFIG_S3_SECRET_ACCESS_KEY="+s3.SecretKey,
		"RCLONE_CONFIG_S3_REGION="+s3.Region, "RCLONE_CONFIG_S3_FORCE_PATH_STYLE=true")

	store := v1alpha1.ConnectionReference{Kind: v1alpha1.KindObjectStore, Name: "bucket"}
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
	object := func(key string) string { return s3.Path(bucket, key) }

	// One large file, each way: one untimed turn each, then bigRounds
	// timed ones taking turns; the median counts.
	writeRandom(t, filepath.Join(r.sshd.Dir, "big.bin"), bigTransfer)
	if err := resetPeakRSS(worker.Process.Pid); err != nil {
		t.Fatal(err)
	}
	var upOurs, upRclone, downOurs, downRclone []time.Duration
	for round := range bigRounds + 1 {
		up := fmt.Sprintf("up-%d", round)
		took := transfer(up, sftp, "/big.bin", store, 1)
		sameFile(t, filepath.Join(r.sshd.Dir, "big.bin"), object(up+"/big.bin"))
		took2 := rcloneCopy("src:"+filepath.Join(r.sshd.Dir, "big.bin"), "s3:"+bucket+"/rclone-up")
		sameFile(t, filepath.Join(r.sshd.Dir, "big.bin"), object("rclone-up/big.bin"))
		_ = os.RemoveAll(object("rclone-up"))
		down := fmt.Sprintf("down-%d", round)
		took3 := transfer(down, store, "/"+up+"/big.bin", sftp, 1)
		sameFile(t, filepath.Join(r.sshd.Dir, "big.bin"), filepath.Join(r.sshd.Dir, down, "big.bin"))
		_ = os.RemoveAll(filepath.Join(r.sshd.Dir, down))
		took4 := rcloneCopy("s3:"+bucket+"/"+up+"/big.bin", "src:"+filepath.Join(r.sshd.Dir, "rclone-down"))
		sameFile(t, filepath.Join(r.sshd.Dir, "big.bin"), filepath.Join(r.sshd.Dir, "rclone-down", "big.bin"))
		_ = os.RemoveAll(filepath.Join(r.sshd.Dir, "rclone-down"))
		_ = os.RemoveAll(object(up))
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
	_ = os.Remove(filepath.Join(r.sshd.Dir, "big.bin"))

	// Many small files into the bucket.
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
	cpu := func() [3]time.Duration {
		return [3]time.Duration{procs.TreeCPUTime(worker.Process.Pid), r.sshd.CPUTime(), procs.TreeCPUTime(s3.PID)}
	}
	before := cpu()
	oursSmall := transfer("small", sftp, "/small", store, smallParallelism)
	after := cpu()
	smallRSS, err := peakRSS(worker.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if n := countFiles(t, object("small")); n != smallFiles {
		t.Fatalf("%d objects copied of %d", n, smallFiles)
	}
	before2 := cpu()
	rcloneSmall := rcloneCopy("src:"+filepath.Join(r.sshd.Dir, "small"), "s3:"+bucket+"/rclone-small")
	after2 := cpu()
	after2[0], before2[0] = rcloneCPU, 0
	rcloneSmall8 := rcloneCopy("src:"+filepath.Join(r.sshd.Dir, "small"), "s3:"+bucket+"/rclone-small-8", "--transfers="+strconv.Itoa(smallParallelism))
	if n := countFiles(t, object("rclone-small")); n != smallFiles {
		t.Fatalf("rclone copied %d objects of %d", n, smallFiles)
	}

	mibps := func(d time.Duration) float64 { return bigTransfer / float64(1<<20) / d.Seconds() }
	fps := func(d time.Duration) float64 { return smallFiles / d.Seconds() }
	row := func(what string, ours, theirs time.Duration) string {
		return fmt.Sprintf("| %s | %.0f MiB/s (%.1f s) | %.0f MiB/s (%.1f s) | %.2f | >= 1.0 |", what,
			mibps(ours), ours.Seconds(), mibps(theirs), theirs.Seconds(), theirs.Seconds()/ours.Seconds())
	}
	fmt.Printf(`
transfers between an sshd and an S3 server (versitygw, POSIX backend) on loopback (make bench)
| measure | sftpgate Transfer | rclone copy (defaults) | ratio | target |
|---|---|---|---|---|
%s
%s
| 10,000 files of 1 KiB, SFTP to bucket | %.0f files/s (%.1f s, parallelism %d) | %.0f files/s (%.1f s, --transfers 4); %.0f files/s with --transfers %d | %.2f | >= 2.0 |
| worker peak RSS | %.0f MB (1 GiB files), %.0f MB (10,000 files) | | | flat |
| CPU for the 10,000 files: client, sshd, S3 server | %.1f, %.1f, %.1f s | %.1f, %.1f, %.1f s | | |
`, row("1 GiB file, SFTP to bucket, median of 3 turns", median(upOurs), median(upRclone)),
		row("1 GiB file, bucket to SFTP, median of 3 turns", median(downOurs), median(downRclone)),
		fps(oursSmall), oursSmall.Seconds(), smallParallelism, fps(rcloneSmall), rcloneSmall.Seconds(), fps(rcloneSmall8), smallParallelism,
		rcloneSmall.Seconds()/oursSmall.Seconds(), float64(bigRSS)/1e6, float64(smallRSS)/1e6,
		(after[0] - before[0]).Seconds(), (after[1] - before[1]).Seconds(), (after[2] - before[2]).Seconds(),
		(after2[0] - before2[0]).Seconds(), (after2[1] - before2[1]).Seconds(), (after2[2] - before2[2]).Seconds())
}

// waitReadyObject waits until obj, of namespace ns and name, is Ready.
func waitReadyObject(t *testing.T, k8s client.Client, obj interface {
	client.Object
	GetConditions() *[]metav1.Condition
}, ns, name string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, obj); err == nil &&
			meta.IsStatusConditionTrue(*obj.GetConditions(), v1alpha1.ConditionReady) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%T %s is not Ready: %+v", obj, name, *obj.GetConditions())
		}
	}
}
