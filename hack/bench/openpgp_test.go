package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/procs"
	"github.com/sftpgate/sftpgate/hack/fixtures/testgpg"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/internal/pgp"
	"github.com/sftpgate/sftpgate/internal/tempname"
)

// pgpSize is the large file encrypted and decrypted; triggeredFiles the
// files dropped into the watched inbox.
const (
	pgpSize        = 1 << 30
	triggeredFiles = 20
)

// TestBenchmarkOpenPGP measures Transfers that encrypt and sign, and
// decrypt and verify, a 1 GiB file between two sshd, against gpg doing
// the same to the file on this machine's disk with the same key; the
// worker's peak RSS meanwhile; what a cut in the middle of the file
// costs; and, for files dropped into a watched inbox at a 5 s poll, the
// time from a file's close to its decrypted copy in place.
func TestBenchmarkOpenPGP(t *testing.T) {
	binary := os.Getenv("SFTPGATE_BENCH_BINARY")
	if binary == "" {
		t.Fatal("run it with make bench, which builds the binary it measures")
	}
	ctx := context.Background()
	const ns = "openpgp"
	r := startRig(t, binary, ns, map[string]string{"src": ""}, io.Discard)
	dst := testsshd.Start(t)
	r.addConnections(t, ns, dst, map[string]string{"dst": dst.Dir})
	startWorker := func() *exec.Cmd { return r.startWorker(t, binary, "bench", "--lease-duration=5s") }
	worker := startWorker()
	waitReadyConnections(t, r.k8s, ns, "src", "dst")

	// One key pair, gpg's and sftpgate's: it encrypts to itself and signs.
	key := testgpg.Start(t, "bench", testgpg.Curve25519)
	r.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "private"},
		Data: map[string][]byte{"key": key.Private(t), "passphrase": []byte(testgpg.Passphrase)}})
	r.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "public"}, Data: map[string][]byte{"key": key.Public(t, false)}})

	clear := filepath.Join(r.sshd.Dir, "big.bin")
	writeRandom(t, clear, pgpSize)
	gpgTimed := func(args ...string) time.Duration {
		start := time.Now()
		key.Must(t, nil, args...)
		return time.Since(start)
	}
	sealedByGPG := filepath.Join(r.sshd.Dir, "gpg", "big.bin.pgp")
	must(t, os.MkdirAll(filepath.Dir(sealedByGPG), 0o755))
	gpgEncrypt := gpgTimed("--encrypt", "--sign", "--local-user", key.Fingerprint, "--recipient", key.Email, "--output", sealedByGPG, clear)
	gpgEncryptPlain := gpgTimed("--encrypt", "--sign", "--compress-algo", "none", "--local-user", key.Fingerprint, "--recipient", key.Email,
		"--output", sealedByGPG+".uncompressed", clear)
	_ = os.Remove(sealedByGPG + ".uncompressed")
	gpgDecrypt := gpgTimed("--decrypt", "--output", filepath.Join(r.sshd.Dir, "gpg", "big.bin"), sealedByGPG)
	_ = os.Remove(filepath.Join(r.sshd.Dir, "gpg", "big.bin"))

	transfer := func(name, path string, p *v1alpha1.TransferOpenPGP) *v1alpha1.Transfer {
		tr := &v1alpha1.Transfer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.TransferSpec{
			Source: v1alpha1.TransferSource{ConnectionRef: v1alpha1.ConnectionReference{Name: "src"}, Path: path},
			TransferOptions: v1alpha1.TransferOptions{
				Destination: v1alpha1.TransferDestination{ConnectionRef: v1alpha1.ConnectionReference{Name: "dst"}, Path: "/" + name},
				OpenPGP:     p}}}
		r.create(t, tr)
		return tr
	}
	finished := func(tr *v1alpha1.Transfer) {
		for ; ; time.Sleep(20 * time.Millisecond) {
			must(t, r.k8s.Get(ctx, client.ObjectKeyFromObject(tr), tr))
			if tr.Status.CompletionTime != nil {
				break
			}
		}
		if !meta.IsStatusConditionTrue(tr.Status.Conditions, v1alpha1.ConditionReady) {
			t.Fatalf("%s: %+v", tr.Name, tr.Status)
		}
	}
	encrypt := &v1alpha1.TransferOpenPGP{Encrypt: &v1alpha1.OpenPGPEncrypt{
		Recipients: []v1alpha1.OpenPGPKeyRef{{Name: "public"}}, SignWith: &v1alpha1.OpenPGPKeyRef{Name: "private"}}}
	decrypt := &v1alpha1.TransferOpenPGP{Decrypt: &v1alpha1.OpenPGPDecrypt{
		KeySecretRef: v1alpha1.OpenPGPKeyRef{Name: "private"}, VerifyWith: []v1alpha1.OpenPGPKeyRef{{Name: "public"}}}}
	// sftpgate's OpenPGP stream alone, in this process: the file read
	// from disk, the result thrown away.
	engineEncrypt, engineDecrypt := engine(t, key, clear, sealedByGPG)
	cpu := func() [3]time.Duration {
		return [3]time.Duration{procs.TreeCPUTime(worker.Process.Pid), r.sshd.CPUTime(), dst.CPUTime()}
	}
	must(t, resetPeakRSS(worker.Process.Pid))
	before := cpu()
	start := time.Now()
	enc := transfer("enc", "/big.bin", encrypt)
	finished(enc)
	oursEncrypt := time.Since(start)
	encCPU := sub(cpu(), before)
	// What sftpgate wrote, gpg reads; what gpg wrote, sftpgate reads.
	sealedByUs := filepath.Join(dst.Dir, "enc", "big.bin.pgp")
	key.Must(t, nil, "--decrypt", "--output", filepath.Join(r.sshd.Dir, "check.bin"), sealedByUs)
	sameFile(t, clear, filepath.Join(r.sshd.Dir, "check.bin"))
	_ = os.Remove(filepath.Join(r.sshd.Dir, "check.bin"))
	before = cpu()
	start = time.Now()
	dec := transfer("dec", "/gpg/big.bin.pgp", decrypt)
	finished(dec)
	oursDecrypt := time.Since(start)
	decCPU := sub(cpu(), before)
	sameFile(t, clear, filepath.Join(dst.Dir, "dec", "big.bin"))
	_ = os.RemoveAll(filepath.Join(dst.Dir, "dec"))
	rss, err := peakRSS(worker.Process.Pid)
	must(t, err)

	// A cut: the worker killed once half the file is written (its
	// temporary copy at the destination holds half); another process of
	// it writes the file again from its start.
	start = time.Now()
	cut := transfer("cut", "/big.bin", encrypt)
	atCut := int64(0)
	for ; atCut < pgpSize/2; time.Sleep(10 * time.Millisecond) {
		entries, _ := os.ReadDir(filepath.Join(dst.Dir, "cut"))
		for _, e := range entries {
			if fi, err := e.Info(); err == nil && tempname.Is(e.Name()) {
				atCut = fi.Size()
			}
		}
		if time.Since(start) > 5*time.Minute {
			t.Fatal("the cut transfer's copy did not reach half the file")
		}
	}
	cutAt := time.Since(start)
	_ = worker.Process.Kill()
	_ = worker.Wait()
	startWorker()
	finished(cut)
	cutTook := time.Since(start)
	_ = os.RemoveAll(filepath.Join(dst.Dir, "cut"))
	_ = os.RemoveAll(filepath.Join(dst.Dir, "enc"))

	// Files dropped into a watched inbox, decrypted on arrival.
	must(t, os.MkdirAll(filepath.Join(r.sshd.Dir, "inbox"), 0o755))
	w := &v1alpha1.SftpWatch{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "inbox"}, Spec: v1alpha1.SftpWatchSpec{
		ConnectionRef: v1alpha1.ConnectionReference{Name: "src"}, Path: "/inbox",
		PollInterval: &metav1.Duration{Duration: 5 * time.Second}, Stability: v1alpha1.Stability{MinAge: &metav1.Duration{}},
		Transfer: &v1alpha1.TransferOptions{Destination: v1alpha1.TransferDestination{
			ConnectionRef: v1alpha1.ConnectionReference{Name: "dst"}, Path: "/clear"}, OpenPGP: decrypt}}}
	r.create(t, w)
	waitWatching(t, r.k8s, w)
	sealed := make([][]byte, triggeredFiles)
	for i := range sealed {
		sealed[i] = key.Must(t, fmt.Appendf(nil, "id,amount\n%d,100.00\n", i), "--encrypt", "--sign", "--local-user", key.Fingerprint, "--recipient", key.Email)
	}
	// Each file's arrival is looked for every 20 ms while the others are
	// dropped, one at a random moment of each 5 s.
	var (
		mu     sync.Mutex
		closed = map[string]time.Time{}
		delays []time.Duration
	)
	looked := make(chan struct{})
	go func() {
		defer close(looked)
		seen := map[string]bool{}
		for deadline := time.Now().Add(3 * time.Minute); len(seen) < triggeredFiles && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			mu.Lock()
			for name, at := range closed {
				if _, err := os.Stat(filepath.Join(dst.Dir, "clear", name)); err == nil && !seen[name] {
					seen[name], delays = true, append(delays, time.Since(at))
				}
			}
			mu.Unlock()
		}
	}()
	for i := range triggeredFiles {
		time.Sleep(mathrand.N(5 * time.Second))
		name := fmt.Sprintf("f-%02d.csv", i)
		must(t, os.WriteFile(filepath.Join(r.sshd.Dir, "inbox", name+".pgp"), sealed[i], 0o644))
		mu.Lock()
		closed[name] = time.Now()
		mu.Unlock()
	}
	<-looked
	if len(delays) < triggeredFiles {
		t.Fatalf("%d of %d files decrypted in place", len(delays), triggeredFiles)
	}
	slices.Sort(delays)

	mibps := func(d time.Duration) float64 { return pgpSize / float64(1<<20) / d.Seconds() }
	fmt.Printf(`
OpenPGP (make bench): a 1 GiB file of random bytes, Curve25519 key, sshd to sshd for sftpgate, disk to disk for gpg
| measure | sftpgate | gpg | ratio | target |
|---|---|---|---|---|
| encrypt and sign, a Transfer sshd to sshd | %.0f MiB/s (%.1f s) | %.0f MiB/s (%.1f s); %.0f MiB/s with --compress-algo none | %.2f | >= 1.0 |
| decrypt and verify gpg's message, a Transfer sshd to sshd | %.0f MiB/s (%.1f s) | %.0f MiB/s (%.1f s) | %.2f | >= 1.0 |
| the OpenPGP stream alone, in process, disk to nothing: encrypt and sign / decrypt and verify | %.0f / %.0f MiB/s | | | |
| CPU of the Transfers, encrypting / decrypting: worker, source sshd, destination sshd | %.1f, %.1f, %.1f s / %.1f, %.1f, %.1f s | | | |
| the worker's peak RSS over both Transfers | %.0f MB | | | flat |
| the worker killed %.1f s in, its copy at %d MiB: the file again from its start | %.1f s in all (%.1f s uncut) | | | |
| a file closed in a watched inbox (5 s poll, minAge 0) -> decrypted in place, p50 / p99 | %.1f / %.1f s | | | |
`, mibps(oursEncrypt), oursEncrypt.Seconds(), mibps(gpgEncrypt), gpgEncrypt.Seconds(), mibps(gpgEncryptPlain),
		gpgEncrypt.Seconds()/oursEncrypt.Seconds(),
		mibps(oursDecrypt), oursDecrypt.Seconds(), mibps(gpgDecrypt), gpgDecrypt.Seconds(), gpgDecrypt.Seconds()/oursDecrypt.Seconds(),
		mibps(engineEncrypt), mibps(engineDecrypt),
		encCPU[0].Seconds(), encCPU[1].Seconds(), encCPU[2].Seconds(), decCPU[0].Seconds(), decCPU[1].Seconds(), decCPU[2].Seconds(),
		float64(rss)/1e6, cutAt.Seconds(), atCut>>20, cutTook.Seconds(), oursEncrypt.Seconds(),
		delays[len(delays)/2].Seconds(), delays[len(delays)*99/100].Seconds())
}

func sub(a, b [3]time.Duration) [3]time.Duration {
	return [3]time.Duration{a[0] - b[0], a[1] - b[1], a[2] - b[2]}
}

// engine times internal/pgp alone on this machine: clear encrypted and
// signed with key's, and sealed (gpg's message of it) decrypted and
// verified, each read from disk and the result thrown away.
func engine(t *testing.T, key *testgpg.Home, clear, sealed string) (encrypt, decrypt time.Duration) {
	private, err := pgp.ReadKeys(key.Private(t), []byte(testgpg.Passphrase), "the key")
	must(t, err)
	in, err := os.Open(clear)
	must(t, err)
	defer func() { _ = in.Close() }()
	start := time.Now()
	w, err := pgp.Encrypt(io.Discard, pgp.Encryption{To: private, Signer: private})
	must(t, err)
	_, err = io.Copy(w, in)
	must(t, err)
	must(t, w.Close())
	encrypt = time.Since(start)
	msg, err := os.Open(sealed)
	must(t, err)
	defer func() { _ = msg.Close() }()
	start = time.Now()
	r, err := pgp.Decrypt(msg, pgp.Decryption{Keys: private, Verify: private})
	must(t, err)
	_, err = io.Copy(io.Discard, r)
	must(t, err)
	return encrypt, time.Since(start)
}

// writeRandom writes n random bytes to name.
func writeRandom(t *testing.T, name string, n int) {
	t.Helper()
	f, err := os.Create(name)
	must(t, err)
	buf := make([]byte, 1<<20)
	for range n / len(buf) {
		_, _ = rand.Read(buf)
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	must(t, f.Close())
}
