package pgp_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/ProtonMail/go-crypto/openpgp/s2k"
	openpgp "github.com/ProtonMail/go-crypto/openpgp/v2"

	"github.com/sftpgate/sftpgate/internal/pgp"
)

// fuzzKey is a Curve25519 key made the same on every run (its randomness
// and time fixed), so that an input saved by a fuzz test, encrypted to it,
// means the same when it runs again.
var fuzzKey = sync.OnceValue(func() *openpgp.Entity {
	e, err := openpgp.NewEntity("fuzz", "", "fuzz@example.com", fixedConfig())
	if err != nil {
		panic(err)
	}
	return e
})

func fixedConfig() *packet.Config {
	return &packet.Config{Rand: rand.NewChaCha8([32]byte{'f', 'u', 'z', 'z'}), Algorithm: packet.PubKeyAlgoEdDSA, Curve: packet.Curve25519,
		Time: func() time.Time { return time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC) }}
}

// sealed is clear encrypted to the fuzz key and signed by it, armored
// or not.
func sealed(tb testing.TB, clear []byte, armor bool) []byte {
	var out bytes.Buffer
	w, err := pgp.Encrypt(&out, pgp.Encryption{To: pgp.Keys{fuzzKey()}, Signer: pgp.Keys{fuzzKey()}, Armor: armor, Name: "f.txt"})
	if err != nil {
		tb.Fatal(err)
	}
	_, _ = w.Write(clear)
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return out.Bytes()
}

// allocated is how many bytes the process allocated so far.
func allocated() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// maxAllocated bounds what reading one message or key may allocate:
// however large the message says it is, or its clear text, the reader
// holds buffers of its own size; unlocking a key, Argon2's memory at most.
func maxAllocated(input []byte) uint64 {
	return 1<<(10+pgp.MaxArgon2MemoryExp) + 32<<20 + 16*uint64(len(input))
}

// FuzzDecrypt: any bytes, as a message to decrypt and verify, give a
// *pgp.Error with a reason a Transfer reports (never another error, never
// a panic) or clear text read to its end, allocating within a bound
// whatever size the message claims.
func FuzzDecrypt(f *testing.F) {
	f.Add(sealed(f, []byte("hello"), false))
	f.Add(sealed(f, bytes.Repeat([]byte("hello "), 10000), true))
	f.Add([]byte("-----BEGIN PGP MESSAGE-----\n\nwx4=\n=abcd\n-----END PGP MESSAGE-----\n"))
	f.Add([]byte("not OpenPGP"))
	f.Add([]byte{0xc3, 0x2e, 0x04, 0x09, 0x03, 0x08})
	f.Fuzz(func(t *testing.T, message []byte) {
		before := allocated()
		r, err := pgp.Decrypt(bytes.NewReader(message), pgp.Decryption{Keys: pgp.Keys{fuzzKey()}, Verify: pgp.Keys{fuzzKey()}})
		if err == nil {
			_, err = io.Copy(io.Discard, r)
		}
		var e *pgp.Error
		if err != nil && (!errors.As(err, &e) || e.Reason != pgp.KeyNotFound && e.Reason != pgp.SignatureInvalid && e.Reason != pgp.MessageCorrupt) {
			t.Fatalf("%v (%T) is not a *pgp.Error with a reason", err, err)
		}
		if used := allocated() - before; used > maxAllocated(message) {
			t.Fatalf("a message of %d bytes took %d bytes", len(message), used)
		}
	})
}

// FuzzReadKeys: any bytes, as a Secret's keys with a passphrase, give
// keys that freeze and thaw to the same fingerprints, or a *pgp.Error
// (KeyNotFound); allocating within a bound, whatever a key's passphrase
// protection (Argon2's memory) asks for.
func FuzzReadKeys(f *testing.F) {
	passphrase := []byte("passphrase")
	var public, private bytes.Buffer
	if err := fuzzKey().Serialize(&public); err != nil {
		f.Fatal(err)
	}
	f.Add(public.Bytes(), passphrase)
	if err := fuzzKey().SerializePrivateWithoutSigning(&private, nil); err != nil {
		f.Fatal(err)
	}
	f.Add(private.Bytes(), passphrase)
	for _, c := range []*s2k.Config{{S2KMode: s2k.IteratedSaltedS2K, S2KCount: 65536},
		{S2KMode: s2k.Argon2S2K, Argon2Config: &s2k.Argon2Config{NumberOfPasses: 1, DegreeOfParallelism: 1, Memory: 64}}} {
		f.Add(locked(f, passphrase, c), passphrase)
	}
	f.Add(argon2Asking(f, passphrase, 31), passphrase)
	f.Add([]byte("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nxjMEZ\n-----END PGP PUBLIC KEY BLOCK-----\n"), []byte(nil))
	f.Fuzz(func(t *testing.T, key, passphrase []byte) {
		before := allocated()
		keys, err := pgp.ReadKeys(key, passphrase, "the key")
		if used := allocated() - before; used > maxAllocated(key) {
			t.Fatalf("a key of %d bytes took %d bytes", len(key), used)
		}
		if err != nil {
			if e, ok := errors.AsType[*pgp.Error](err); !ok || e.Reason != pgp.KeyNotFound {
				t.Fatalf("%v (%T) is not a *pgp.Error of KeyNotFound", err, err)
			}
			return
		}
		if len(keys) == 0 || len(keys) > pgp.MaxKeysPerSecret {
			t.Fatalf("%d keys", len(keys))
		}
		frozen, err := pgp.Freeze(keys)
		if err != nil {
			return // a key go-crypto reads but does not write (an unknown algorithm's)
		}
		thawed, err := frozen.Thaw()
		if err != nil || !slices.Equal(pgp.Fingerprints(thawed), pgp.Fingerprints(keys)) {
			t.Fatalf("keys %q thaw as %q (%v)", pgp.Fingerprints(keys), pgp.Fingerprints(thawed), err)
		}
	})
}

// locked is the fuzz key's private part locked with passphrase, through
// the S2K c.
func locked(tb testing.TB, passphrase []byte, c *s2k.Config) []byte {
	e, err := openpgp.NewEntity("fuzz", "", "fuzz@example.com", fixedConfig())
	if err != nil {
		tb.Fatal(err)
	}
	config := fixedConfig()
	config.S2KConfig = c
	if c.S2KMode == s2k.Argon2S2K {
		config.AEADConfig = &packet.AEADConfig{} // as go-crypto requires of Argon2
	}
	if err := e.EncryptPrivateKeys(passphrase, config); err != nil {
		tb.Fatal(err)
	}
	var out bytes.Buffer
	if err := e.SerializePrivateWithoutSigning(&out, nil); err != nil {
		tb.Fatal(err)
	}
	return out.Bytes()
}

// argon2Asking is the fuzz key locked with Argon2, which asks for
// 2^memoryExp KiB to unlock it.
func argon2Asking(tb testing.TB, passphrase []byte, memoryExp byte) []byte {
	return asking(locked(tb, passphrase, &s2k.Config{S2KMode: s2k.Argon2S2K, Argon2Config: &s2k.Argon2Config{NumberOfPasses: 1, DegreeOfParallelism: 1, Memory: 64}}), memoryExp)
}

// asking is key, locked with Argon2 of one pass, one lane and 64 KiB,
// changed to ask for 2^memoryExp KiB.
func asking(key []byte, memoryExp byte) []byte {
	b := bytes.Clone(key)
	// An Argon2 specifier: its mode, 16 bytes of salt, passes, parallelism
	// and memory (2^6 KiB).
	for i := 0; i+19 < len(b); i++ {
		if b[i] == 4 && b[i+17] == 1 && b[i+18] == 1 && b[i+19] == 6 {
			b[i+19] = memoryExp
		}
	}
	return b
}

// TestArgon2Bounded: a key locked with Argon2 is unlocked while it asks
// for no more than the bounds, in a version 4 key and a version 6 one,
// and refused before its passphrase is tried when it asks for more (2^31
// KiB, 2 TiB, ended the process).
func TestArgon2Bounded(t *testing.T) {
	passphrase := []byte("passphrase")
	small := &s2k.Config{S2KMode: s2k.Argon2S2K, Argon2Config: &s2k.Argon2Config{NumberOfPasses: 1, DegreeOfParallelism: 1, Memory: 64}}
	if _, err := pgp.ReadKeys(locked(t, passphrase, small), passphrase, "the key"); err != nil {
		t.Fatalf("64 KiB: %v", err)
	}
	v6, err := openpgp.NewEntity("v6", "", "v6@example.com", &packet.Config{V6Keys: true, Algorithm: packet.PubKeyAlgoEd25519, AEADConfig: &packet.AEADConfig{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := v6.EncryptPrivateKeys(passphrase, &packet.Config{S2KConfig: small, AEADConfig: &packet.AEADConfig{}}); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := v6.SerializePrivateWithoutSigning(&b, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := pgp.ReadKeys(b.Bytes(), passphrase, "the key"); err != nil {
		t.Fatalf("a version 6 key, 64 KiB: %v", err)
	}
	for _, exp := range []byte{pgp.MaxArgon2MemoryExp + 1, 31} {
		for _, key := range [][]byte{argon2Asking(t, passphrase, exp), asking(b.Bytes(), exp)} {
			_, err := pgp.ReadKeys(key, passphrase, "the key")
			if e, ok := errors.AsType[*pgp.Error](err); !ok || e.Reason != pgp.KeyNotFound || !strings.Contains(err.Error(), "Argon2") {
				t.Fatalf("2^%d KiB: %v", exp, err)
			}
		}
	}
}
