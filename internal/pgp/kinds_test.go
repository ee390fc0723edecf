package pgp

import (
	"errors"
	"testing"
)

// TestReadKeysSaysWhatKind: what is not a key is refused as ErrNotAKey,
// its reason and words as before.
func TestReadKeysSaysWhatKind(t *testing.T) {
	t.Parallel()
	for _, b := range []string{"not a key at all", "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n-----END PGP PUBLIC KEY BLOCK-----\n"} {
		_, err := ReadKeys([]byte(b), nil, "the key")
		var e *Error
		if !errors.Is(err, ErrNotAKey) || !errors.As(err, &e) || e.Reason != KeyNotFound || errors.Is(err, ErrLocked) {
			t.Errorf("%q: %v, want ErrNotAKey of reason %s", b, err, KeyNotFound)
		}
	}
}
