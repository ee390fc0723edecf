package transfers

import (
	"context"
	"errors"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/pgp"
	"github.com/sftpgate/sftpgate/worker/transfer"
)

// The keys of a Secret named by an OpenPGPKeyRef.
const (
	secretKey        = "key"
	secretPassphrase = "passphrase"
)

// transformOf is what tr's files go through: nil without spec.openPGP.
// why says which Secret or key is missing or unusable; the transfer waits
// for it.
func transformOf(ctx context.Context, c client.Reader, tr *v1alpha1.Transfer) (fn transfer.Transform, why string) {
	spec := tr.Spec.OpenPGP
	if spec == nil {
		return nil, ""
	}
	read := func(ref v1alpha1.OpenPGPKeyRef, private bool) (pgp.Keys, error) {
		var s corev1.Secret
		err := c.Get(ctx, client.ObjectKey{Namespace: tr.Namespace, Name: ref.Name}, &s)
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("there is no Secret %s in this namespace", ref.Name)
		case err != nil:
			return nil, fmt.Errorf("reading Secret %s: %w", ref.Name, err)
		case len(s.Data[secretKey]) == 0:
			return nil, fmt.Errorf("the Secret %s has no key %q", ref.Name, secretKey)
		}
		keys, err := pgp.ReadKeys(s.Data[secretKey], s.Data[secretPassphrase], "the key in Secret "+ref.Name)
		if err == nil && private && !pgp.Private(keys) {
			err = fmt.Errorf("the key in Secret %s is public: a private key is needed", ref.Name)
		}
		return keys, err
	}
	readAll := func(refs []v1alpha1.OpenPGPKeyRef) (pgp.Keys, error) {
		var all pgp.Keys
		for _, ref := range refs {
			keys, err := read(ref, false)
			if err != nil {
				return nil, err
			}
			all = append(all, keys...)
		}
		return all, nil
	}
	if e := spec.Encrypt; e != nil {
		to, err := readAll(e.Recipients)
		if err != nil {
			return nil, err.Error()
		}
		enc := pgp.Encryption{To: to, Armor: e.Armor}
		if e.SignWith != nil {
			if enc.Signer, err = read(*e.SignWith, true); err != nil {
				return nil, err.Error()
			}
		}
		return func(dst io.Writer, src io.Reader, name string) error {
			enc := enc
			enc.Name = name
			w, err := pgp.Encrypt(dst, enc)
			if err != nil {
				return refused(err)
			}
			if _, err := io.Copy(w, src); err != nil {
				return err
			}
			return w.Close()
		}, ""
	}
	d := spec.Decrypt
	keys, err := read(d.KeySecretRef, true)
	if err != nil {
		return nil, err.Error()
	}
	dec := pgp.Decryption{Keys: keys}
	if len(d.VerifyWith) > 0 {
		if dec.Verify, err = readAll(d.VerifyWith); err != nil {
			return nil, err.Error()
		}
	}
	return func(dst io.Writer, src io.Reader, _ string) error {
		clear, err := pgp.Decrypt(src, dec)
		if err != nil {
			return refused(err)
		}
		if _, err := io.Copy(dst, clear); err != nil {
			return refused(err)
		}
		// Bytes after the message are read too: the whole file is
		// what the copy checks against the plan.
		_, err = io.Copy(io.Discard, src)
		return err
	}, ""
}

// refused types an OpenPGP failure as the file's: a read or write error
// stays as it is.
func refused(err error) error {
	var e *pgp.Error
	if errors.As(err, &e) {
		return &transfer.TransformError{Reason: e.Reason, Err: e}
	}
	return err
}
