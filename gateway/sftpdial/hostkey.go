package sftpdial

import (
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// hostKeyTrust decides whether the key a server presents is accepted.
type hostKeyTrust struct {
	keys         []ssh.PublicKey
	fingerprints []string
	// firstUse is the fingerprint recorded by the first test when no keys are
	// pinned; empty until then.
	firstUse string
	insecure bool
}

func newHostKeyTrust(conn *v1alpha1.SftpConnection) (*hostKeyTrust, error) {
	t := &hostKeyTrust{insecure: conn.Spec.HostKey.InsecureSkipVerify}
	if conn.Status.HostKeyAddress == Address(conn) {
		t.firstUse = conn.Status.HostKeyFingerprint
	}
	for i, entry := range conn.Spec.HostKey.Trusted {
		entry = strings.TrimSpace(entry)
		if strings.HasPrefix(entry, "SHA256:") {
			t.fingerprints = append(t.fingerprints, strings.TrimRight(entry, "="))
			continue
		}
		key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(entry))
		if err != nil {
			return nil, &Error{Reason: v1alpha1.ReasonInvalidHostKey,
				Message: fmt.Sprintf("spec.hostKey.trusted[%d] is not a public key in authorized_keys format nor a SHA256 fingerprint: %v", i, err)}
		}
		t.keys = append(t.keys, key)
	}
	return t, nil
}

func (t *hostKeyTrust) pinned() bool { return len(t.keys)+len(t.fingerprints) > 0 }

// algorithms asks the server for the type of a pinned key. A server with
// several host keys would otherwise present the one our client prefers,
// which may not be the one the user pinned.
func (t *hostKeyTrust) algorithms() []string {
	if len(t.keys) == 0 || len(t.fingerprints) > 0 {
		return nil
	}
	var algos []string
	for _, k := range t.keys {
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
			if k.Type() == presented.Type() && string(k.Marshal()) == string(presented.Marshal()) {
				return nil
			}
		}
		return &hostKeyMismatchError{msg: fmt.Sprintf(
			"the server presented host key %s (%s), which is not in spec.hostKey.trusted", fp, presented.Type())}
	case t.insecure, t.firstUse == "":
		return nil
	case t.firstUse != fp:
		return &hostKeyMismatchError{msg: fmt.Sprintf(
			"the server presented host key %s, but %s was trusted on first use; if the server's key was changed on purpose, pin the new key in spec.hostKey.trusted",
			fp, t.firstUse)}
	}
	return nil
}

type hostKeyMismatchError struct{ msg string }

func (e *hostKeyMismatchError) Error() string { return e.msg }
