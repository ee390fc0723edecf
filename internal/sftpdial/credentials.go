package sftpdial

import (
	"crypto/x509"
	"errors"
	"fmt"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/egress"
)

// authMethods turns the credentials Secret into SSH auth methods: the
// private key first, then the password. Error messages name the Secret and
// its keys, never their values.
func authMethods(secret *corev1.Secret) ([]ssh.AuthMethod, error) {
	invalid := func(format string, args ...any) error {
		return &egress.Error{Reason: v1alpha1.ReasonInvalidCredentials,
			Message: fmt.Sprintf("Secret %q: ", secret.Name) + fmt.Sprintf(format, args...)}
	}
	var methods []ssh.AuthMethod
	if pem, ok := secret.Data[v1alpha1.SecretKeyPrivateKey]; ok {
		signer, err := parsePrivateKey(pem, secret.Data[v1alpha1.SecretKeyPassphrase])
		if err != nil {
			return nil, invalid("%s: %s", v1alpha1.SecretKeyPrivateKey, err)
		}
		methods = append(methods, ssh.PublicKeys(signer))
	}
	if password, ok := secret.Data[v1alpha1.SecretKeyPassword]; ok {
		if len(password) == 0 {
			return nil, invalid("%s is empty", v1alpha1.SecretKeyPassword)
		}
		methods = append(methods, ssh.Password(string(password)))
	}
	if len(methods) == 0 {
		return nil, invalid("has neither %q nor %q", v1alpha1.SecretKeyPassword, v1alpha1.SecretKeyPrivateKey)
	}
	return methods, nil
}

// parsePrivateKey reads OpenSSH, PEM (PKCS#1, SEC 1) and PKCS#8 keys. A
// passphrase is used only when the key is encrypted. Its errors are written
// for people and contain nothing of the key.
func parsePrivateKey(pem, passphrase []byte) (ssh.Signer, error) {
	signer, err := ssh.ParsePrivateKey(pem)
	var missing *ssh.PassphraseMissingError
	if errors.As(err, &missing) {
		if len(passphrase) == 0 {
			return nil, fmt.Errorf("the key is encrypted; add its passphrase under %q", v1alpha1.SecretKeyPassphrase)
		}
		signer, err = ssh.ParsePrivateKeyWithPassphrase(pem, passphrase)
		if errors.Is(err, x509.IncorrectPasswordError) {
			return nil, fmt.Errorf("the passphrase in %q does not decrypt the key", v1alpha1.SecretKeyPassphrase)
		}
	}
	if err != nil {
		return nil, errors.New("not a private key in OpenSSH, PEM or PKCS#8 format, or of an unsupported type (use RSA, ECDSA or Ed25519)")
	}
	return signer, nil
}
