package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testgpg"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/internal/tempname"
)

// keySecret makes a Secret of ns holding key (and its passphrase).
func keySecret(t *testing.T, ns, name string, key []byte, passphrase string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"key": key}}
	if passphrase != "" {
		s.Data["passphrase"] = []byte(passphrase)
	}
	must(t, k8s.Create(context.Background(), s))
}

// noTemporaryFiles fails t if dir below s holds a temporary copy.
func noTemporaryFiles(t *testing.T, s server, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(filepath.Join(s.dir, dir))
	for _, e := range entries {
		if tempname.Is(e.Name()) {
			t.Errorf("a temporary file is left: %s/%s", dir, e.Name())
		}
	}
}

// TestTransferOpenPGP: a Transfer decrypts what a partner's gpg encrypted
// and signed, and encrypts and signs what the partner's gpg decrypts and
// verifies; a file altered, signed by another key or for another key
// fails with its reason and leaves nothing at the destination; a missing
// key Secret holds the transfer until it is made.
func TestTransferOpenPGP(t *testing.T) {
	t.Parallel()
	src, dst := inProcessServer(testsftp.Start(t)), inProcessServer(testsftp.Start(t))
	ns := transferNamespace(t, map[string]server{"src": src, "dst": dst})
	startWorker(t)
	ours := testgpg.Start(t, "ours", testgpg.Curve25519)
	partner := testgpg.Start(t, "partner", testgpg.RSA)
	stranger := testgpg.Start(t, "stranger", testgpg.Curve25519)
	partner.Trust(t, ours)
	stranger.Trust(t, ours)
	ours.Trust(t, partner)
	keySecret(t, ns, "ours", ours.Private(t), testgpg.Passphrase)
	keySecret(t, ns, "partner", partner.Public(t, true), "")

	clear := random(t, 3<<20+5) // streamed, not the small-file path
	small := []byte("id,amount\n1,100\n")
	src.file(t, "in/report.csv.pgp", partner.EncryptSign(t, clear, []*testgpg.Home{ours}))
	src.file(t, "in/small.csv.asc", partner.EncryptSign(t, small, []*testgpg.Home{ours}, "--armor"))
	tampered := partner.EncryptSign(t, small, []*testgpg.Home{ours})
	tampered[len(tampered)-30] ^= 1
	src.file(t, "bad/altered.csv.pgp", tampered)
	src.file(t, "bad/stranger.csv.pgp", stranger.EncryptSign(t, small, []*testgpg.Home{ours}))
	src.file(t, "bad/not-for-us.csv.pgp", partner.Must(t, small, "--encrypt", "--sign", "--local-user", partner.Fingerprint, "--recipient", partner.Email))
	// Armor around what is not base64: the library passes the decoder's
	// error on, which must fail the file, not be retried as a server's.
	src.file(t, "bad/garbled.csv.asc", []byte("-----BEGIN PGP MESSAGE-----\n\n!!!! not base64 !!!!\n-----END PGP MESSAGE-----\n"))
	src.file(t, "clear/statement.csv", clear)

	decrypt := func(s *v1alpha1.TransferSpec) {
		s.Verify = v1alpha1.VerifySHA256
		s.Retry.Limit = new(int32)
		s.OpenPGP = &v1alpha1.TransferOpenPGP{Decrypt: &v1alpha1.OpenPGPDecrypt{
			KeySecretRef: v1alpha1.OpenPGPKeyRef{Name: "ours"}, VerifyWith: []v1alpha1.OpenPGPKeyRef{{Name: "partner"}}}}
	}
	good := transfer(t, ns, "good", "/in", decrypt)
	bad := transfer(t, ns, "bad", "/bad", decrypt, func(s *v1alpha1.TransferSpec) { s.Destination.Path = "/rejected" })
	got := finished(t, good)
	if readyReason(got) != "True/Succeeded" || got.Status.Files.Done != 2 {
		t.Errorf("good: %s %+v", readyReason(got), got.Status)
	}
	if !bytes.Equal(dst.read(t, "out/report.csv"), clear) || !bytes.Equal(dst.read(t, "out/small.csv"), small) {
		t.Error("a decrypted file differs from what the partner encrypted")
	}
	got = finished(t, bad)
	reasons := map[string]string{}
	for _, f := range got.Status.Failures {
		reasons[f.Path] = f.Reason
	}
	want := map[string]string{"/bad/altered.csv.pgp": v1alpha1.ReasonMessageCorrupt,
		"/bad/stranger.csv.pgp": v1alpha1.ReasonSignatureInvalid, "/bad/not-for-us.csv.pgp": v1alpha1.ReasonKeyNotFound,
		"/bad/garbled.csv.asc": v1alpha1.ReasonMessageCorrupt}
	for p, r := range want {
		if reasons[p] != r {
			t.Errorf("%s failed with %q, want %s (%+v)", p, reasons[p], r, got.Status.Failures)
		}
	}
	if readyReason(got) != "False/FilesFailed" {
		t.Errorf("bad: %s", readyReason(got))
	}
	if entries, _ := os.ReadDir(filepath.Join(dst.dir, "rejected")); len(entries) != 0 {
		t.Errorf("a failed file left %d entries at the destination", len(entries))
	}

	// Encrypting waits for its signing key's Secret, then sends what the
	// partner's gpg reads.
	enc := transfer(t, ns, "enc", "/clear/statement.csv", func(s *v1alpha1.TransferSpec) {
		s.Destination.Path = "/outbox"
		s.OpenPGP = &v1alpha1.TransferOpenPGP{Encrypt: &v1alpha1.OpenPGPEncrypt{
			Recipients: []v1alpha1.OpenPGPKeyRef{{Name: "partner"}}, SignWith: &v1alpha1.OpenPGPKeyRef{Name: "signer"}}}
	})
	var waiting v1alpha1.Transfer
	eventually(t, "the transfer waits for its key", func() bool {
		must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(enc), &waiting))
		return readyReason(&waiting) == "False/SecretNotFound"
	})
	keySecret(t, ns, "signer", ours.Private(t), testgpg.Passphrase)
	got = finished(t, enc)
	if readyReason(got) != "True/Succeeded" {
		t.Fatalf("enc: %s %+v", readyReason(got), got.Status)
	}
	if plain := partner.DecryptVerify(t, dst.read(t, "outbox/statement.csv.pgp"), ours); !bytes.Equal(plain, clear) {
		t.Error("the partner's gpg reads other than what was encrypted")
	}
	for _, dir := range []string{"out", "outbox"} {
		noTemporaryFiles(t, dst, dir)
	}
	// No key, nor passphrase, in what the Transfers and their events say.
	var events eventsv1.EventList
	must(t, k8s.List(context.Background(), &events, client.InNamespace(ns)))
	var list v1alpha1.TransferList
	must(t, k8s.List(context.Background(), &list, client.InNamespace(ns)))
	said, err := json.Marshal([]any{events, list})
	must(t, err)
	var stored corev1.Secret
	must(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "ours"}, &stored))
	for _, secret := range []string{testgpg.Passphrase, strings.Split(string(stored.Data["key"]), "\n")[3]} {
		if bytes.Contains(said, []byte(secret)) {
			t.Errorf("a status or event holds %q", secret)
		}
	}
}
