package sftpdial

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

func newKey(t *testing.T) ssh.PublicKey {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func line(k ssh.PublicKey) string { return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))) }

func TestHostKeyTrust(t *testing.T) {
	server, other := newKey(t), newKey(t)
	conn := func(trusted []string, insecure bool, recorded, recordedAt string) *v1alpha1.SftpConnection {
		c := &v1alpha1.SftpConnection{}
		c.Spec.Host, c.Spec.Port = "sftp.example.com", 22
		c.Spec.HostKey = v1alpha1.HostKeyTrust{Trusted: trusted, InsecureSkipVerify: insecure}
		c.Status.HostKeyFingerprint, c.Status.HostKeyAddress = recorded, recordedAt
		return c
	}
	here := "sftp.example.com:22"
	cases := []struct {
		name   string
		conn   *v1alpha1.SftpConnection
		accept bool
	}{
		{"first use accepts", conn(nil, false, "", ""), true},
		{"first use then same key", conn(nil, false, ssh.FingerprintSHA256(server), here), true},
		{"first use then other key", conn(nil, false, ssh.FingerprintSHA256(other), here), false},
		{"recorded for another address starts afresh", conn(nil, false, ssh.FingerprintSHA256(other), "old.example.com:22"), true},
		{"pinned key", conn([]string{line(other), line(server) + " comment"}, false, "", ""), true},
		{"pinned fingerprint", conn([]string{ssh.FingerprintSHA256(server)}, false, "", ""), true},
		{"pinned other key", conn([]string{line(other)}, false, "", ""), false},
		{"pin wins over first use", conn([]string{line(server)}, false, ssh.FingerprintSHA256(other), here), true},
		{"insecure accepts anything", conn(nil, true, ssh.FingerprintSHA256(other), here), true},
	}
	for _, tc := range cases {
		trust, err := newHostKeyTrust(tc.conn)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		err = trust.check(server)
		var mismatch *hostKeyMismatchError
		if tc.accept && err != nil || !tc.accept && !errors.As(err, &mismatch) {
			t.Errorf("%s: check = %v, want accepted=%v", tc.name, err, tc.accept)
		}
	}
}

func TestPinnedKeysChooseHostKeyAlgorithms(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaPub, _ := ssh.NewPublicKey(&rsaKey.PublicKey)
	c := &v1alpha1.SftpConnection{}
	c.Spec.HostKey.Trusted = []string{line(rsaPub), line(newKey(t))}
	trust, err := newHostKeyTrust(c)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA, ssh.KeyAlgoED25519}
	if got := trust.algorithms(); !slices.Equal(got, want) {
		t.Errorf("algorithms = %v, want %v", got, want)
	}
	// A fingerprint does not say the key's type: leave the choice open.
	c.Spec.HostKey.Trusted = append(c.Spec.HostKey.Trusted, ssh.FingerprintSHA256(rsaPub))
	if trust, _ = newHostKeyTrust(c); trust.algorithms() != nil {
		t.Errorf("algorithms restricted although a fingerprint is pinned")
	}
}

func TestInvalidTrustedEntry(t *testing.T) {
	c := &v1alpha1.SftpConnection{}
	c.Spec.HostKey.Trusted = []string{"ssh-ed25519 " + strings.Repeat("A", 60)}
	_, err := newHostKeyTrust(c)
	var dialErr *Error
	if !errors.As(err, &dialErr) || dialErr.Reason != v1alpha1.ReasonInvalidHostKey {
		t.Fatalf("got %v, want reason %s", err, v1alpha1.ReasonInvalidHostKey)
	}
}
