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
	"github.com/sftpgate/sftpgate/internal/egress"
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
	conn := func(trusted []string, insecure bool, recorded ssh.PublicKey, recordedAt string) *v1alpha1.SftpConnection {
		c := &v1alpha1.SftpConnection{}
		c.Spec.Host, c.Spec.Port = "sftp.example.com", 22
		c.Spec.HostKey = v1alpha1.HostKeyTrust{Trusted: trusted, InsecureSkipVerify: insecure}
		if recorded != nil {
			c.Status.HostKey, c.Status.HostKeyAddress = line(recorded), recordedAt
		}
		return c
	}
	here := "sftp.example.com:22"
	cases := []struct {
		name   string
		conn   *v1alpha1.SftpConnection
		record bool // the connection test may record a first key
		accept bool
	}{
		{"first use: the test accepts and records", conn(nil, false, nil, ""), true, true},
		{"first use: the gateway refuses an unseen key", conn(nil, false, nil, ""), false, false},
		{"recorded, same key", conn(nil, false, server, here), false, true},
		{"recorded, other key", conn(nil, false, other, here), true, false},
		{"recorded for another address starts afresh", conn(nil, false, other, "old.example.com:22"), true, true},
		{"pinned key", conn([]string{line(other), line(server) + " comment"}, false, nil, ""), false, true},
		{"pinned fingerprint", conn([]string{ssh.FingerprintSHA256(server)}, false, nil, ""), false, true},
		{"pinned other key", conn([]string{line(other)}, false, nil, ""), true, false},
		{"pin wins over first use", conn([]string{line(server)}, false, other, here), false, true},
		{"insecure accepts anything", conn(nil, true, other, here), false, true},
	}
	for _, tc := range cases {
		trust, err := newHostKeyTrust(tc.conn)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		trust.recordFirstUse = tc.record
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
	// A key recorded on first use is asked for by its type, too.
	tofu := &v1alpha1.SftpConnection{}
	tofu.Status.HostKey, tofu.Status.HostKeyAddress = line(rsaPub), Address(tofu)
	if trust, _ = newHostKeyTrust(tofu); !slices.Equal(trust.algorithms(), want[:3]) {
		t.Errorf("algorithms for a recorded RSA key = %v", trust.algorithms())
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
	var dialErr *egress.Error
	if !errors.As(err, &dialErr) || dialErr.Reason != v1alpha1.ReasonInvalidHostKey {
		t.Fatalf("got %v, want reason %s", err, v1alpha1.ReasonInvalidHostKey)
	}
}
