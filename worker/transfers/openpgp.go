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
		case len(s.Data[v1alpha1.OpenPGPSecretKey]) == 0:
			return nil, fmt.Errorf("the Secret %s has no key %q", ref.Name, v1alpha1.OpenPGPSecretKey)
		}
		keys, err := pgp.ReadKeys(s.Data[v1alpha1.OpenPGPSecretKey], s.Data[v1alpha1.OpenPGPSecretPassphrase], "the key in Secret "+ref.Name)
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
		var signer pgp.Keys
		if e.SignWith != nil {
			if signer, err = read(*e.SignWith, true); err != nil {
				return nil, err.Error()
			}
		}
		keys, err := freeze(to, signer)
		if err != nil {
			return nil, err.Error()
		}
		return func(dst io.Writer, src io.Reader, name string) error {
			in, out := &sided{r: src}, &sided{w: dst}
			k, err := thaw(keys)
			if err != nil {
				return err
			}
			w, err := pgp.Encrypt(out, pgp.Encryption{To: k[0], Signer: k[1], Armor: e.Armor, Name: name})
			if err == nil {
				if _, err = io.Copy(w, in); err == nil {
					err = w.Close()
				}
			}
			return refused(in, out, err, v1alpha1.ReasonFilesFailed)
		}, ""
	}
	d := spec.Decrypt
	if d == nil {
		return nil, "spec.openPGP has neither encrypt nor decrypt"
	}
	private, err := read(d.KeySecretRef, true)
	if err != nil {
		return nil, err.Error()
	}
	var verify pgp.Keys
	if len(d.VerifyWith) > 0 {
		if verify, err = readAll(d.VerifyWith); err != nil {
			return nil, err.Error()
		}
	}
	keys, err := freeze(private, verify)
	if err != nil {
		return nil, err.Error()
	}
	return func(dst io.Writer, src io.Reader, _ string) error {
		in, out := &sided{r: src}, &sided{w: dst}
		k, err := thaw(keys)
		if err != nil {
			return err
		}
		clear, err := pgp.Decrypt(in, pgp.Decryption{Keys: k[0], Verify: k[1]})
		if err == nil {
			_, err = io.Copy(out, clear)
		}
		if err == nil {
			// Bytes after the message are read too: the whole file is
			// what the copy checks against the plan.
			_, err = io.Copy(io.Discard, in)
		}
		return refused(in, out, err, v1alpha1.ReasonMessageCorrupt)
	}, ""
}

// freeze keeps each set of keys for thaw: each file's copy reads its
// own, as files are copied at once (see pgp.Frozen).
func freeze(sets ...pgp.Keys) ([]pgp.Frozen, error) {
	out := make([]pgp.Frozen, len(sets))
	for i, keys := range sets {
		var err error
		if out[i], err = pgp.Freeze(keys); err != nil {
			return nil, fmt.Errorf("keeping the OpenPGP keys: %w", err)
		}
	}
	return out, nil
}

func thaw(sets []pgp.Frozen) ([]pgp.Keys, error) {
	out := make([]pgp.Keys, len(sets))
	for i, f := range sets {
		var err error
		if out[i], err = f.Thaw(); err != nil {
			return nil, &transfer.TransformError{Reason: v1alpha1.ReasonKeyNotFound, Err: fmt.Errorf("reading the OpenPGP keys: %w", err)}
		}
	}
	return out, nil
}

// sided is one side of a transform, a reader or a writer, keeping its
// first error: what failed there is the server's or the session's, not
// the content's.
type sided struct {
	r   io.Reader
	w   io.Writer
	err error
}

func (s *sided) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && s.err == nil {
		s.err = err
	}
	return n, err
}

func (s *sided) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if err != nil && s.err == nil {
		s.err = err
	}
	return n, err
}

// refused is err as the copy reports it: a failure of the source's read
// (in) or of the copy's write (out) as it was, an OpenPGP failure with its
// reason, and any other (which the library passes on from the message:
// bad base64, a broken compressed stream) with reason, for good.
func refused(in, out *sided, err error, reason string) error {
	switch {
	case err == nil:
		return nil
	case in.err != nil:
		return in.err
	case out.err != nil:
		return out.err
	}
	var e *pgp.Error
	if errors.As(err, &e) {
		return &transfer.TransformError{Reason: e.Reason, Err: e}
	}
	return &transfer.TransformError{Reason: reason, Err: err}
}
