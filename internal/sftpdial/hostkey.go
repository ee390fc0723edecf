package sftpdial

import (
	"bytes"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/egress"
)

// hostKeyTrust decides whether the key a server presents is accepted.
type hostKeyTrust struct {
	keys         []ssh.PublicKey
	fingerprints []string
	// firstUse is the key recorded by the first test when none is pinned;
	// nil until then.
	firstUse ssh.PublicKey
	// recordFirstUse lets a dial accept any key while none is recorded. Only
	// the connection test, which records what it saw, may do that; the
	// gateway refuses to talk to a server whose key nobody has seen.
	recordFirstUse bool
	insecure       bool
}

func newHostKeyTrust(conn *v1alpha1.SftpConnection) (*hostKeyTrust, error) {
	t := &hostKeyTrust{insecure: conn.Spec.HostKey.InsecureSkipVerify}
	for i, entry := range conn.Spec.HostKey.Trusted {
		entry = strings.TrimSpace(entry)
		if strings.HasPrefix(entry, "SHA256:") {
			t.fingerprints = append(t.fingerprints, strings.TrimRight(entry, "="))
			continue
		}
		key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(entry))
		if err != nil {
			return nil, &egress.Error{Reason: v1alpha1.ReasonInvalidHostKey,
				Message: fmt.Sprintf("spec.hostKey.trusted[%d] is not a public key in authorized_keys format nor a SHA256 fingerprint: %v", i, err)}
		}
		t.keys = append(t.keys, key)
	}
	if conn.Status.HostKey != "" && conn.Status.HostKeyAddress == Address(conn) {
		key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(conn.Status.HostKey))
		if err != nil {
			return nil, &egress.Error{Reason: v1alpha1.ReasonInvalidHostKey,
				Message: fmt.Sprintf("status.hostKey is not a public key: %v", err)}
		}
		t.firstUse = key
	}
	return t, nil
}

func (t *hostKeyTrust) pinned() bool { return len(t.keys)+len(t.fingerprints) > 0 }

// algorithms asks the server for the type of the trusted key. A server with
// several host keys would otherwise present the one our client prefers,
// which may not be the one that was pinned or first seen.
func (t *hostKeyTrust) algorithms() []string {
	keys := t.keys
	switch {
	case t.insecure, len(t.fingerprints) > 0: // a fingerprint does not say the key's type
		return nil
	case !t.pinned() && t.firstUse != nil:
		keys = []ssh.PublicKey{t.firstUse}
	}
	var algos []string
	for _, k := range keys {
		if k.Type() == ssh.KeyAlgoRSA {
			algos = append(algos, ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA)
			continue
		}
		algos = append(algos, k.Type())
	}
	return algos
}

func (t *hostKeyTrust) check(presented ssh.PublicKey) error {
	fp := ssh.FingerprintSHA256(presented)
	switch {
	case t.pinned():
		for _, f := range t.fingerprints {
			if f == fp {
				return nil
			}
		}
		for _, k := range t.keys {
			if sameKey(k, presented) {
				return nil
			}
		}
		return &hostKeyMismatchError{msg: fmt.Sprintf(
			"the server presented host key %s (%s), which is not in spec.hostKey.trusted", fp, presented.Type())}
	case t.insecure:
		return nil
	case t.firstUse != nil:
		if sameKey(t.firstUse, presented) {
			return nil
		}
		return &hostKeyMismatchError{msg: fmt.Sprintf(
			"the server presented host key %s, but %s was trusted on first use; if the server's key was changed on purpose, pin the new key in spec.hostKey.trusted",
			fp, ssh.FingerprintSHA256(t.firstUse))}
	case t.recordFirstUse:
		return nil
	}
	return &hostKeyMismatchError{msg: "no host key is trusted yet: the connection test records one on first use"}
}

func sameKey(a, b ssh.PublicKey) bool {
	return a.Type() == b.Type() && bytes.Equal(a.Marshal(), b.Marshal())
}

type hostKeyMismatchError struct{ msg string }

func (e *hostKeyMismatchError) Error() string { return e.msg }
