package pgp_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/sftpgate/sftpgate/hack/fixtures/testgpg"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/internal/pgp"
)

// peer is a GnuPG home with its keys as sftpgate reads them.
type peer struct {
	*testgpg.Home
	public, armored, private pgp.Keys
}

var peers map[string]*peer

// TestMain makes four key pairs with gpg, once: ours and a partner's, in
// RSA and in Curve25519, each trusting the others.
func TestMain(m *testing.M) {
	if testkit.Fuzzing() {
		os.Exit(m.Run()) // the fuzz tests make their key in-process
	}
	peers = map[string]*peer{}
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		failed error
	)
	for _, name := range []string{"ours-rsa", "partner-rsa", "ours-curve25519", "partner-curve25519"} {
		wg.Go(func() {
			h, err := testgpg.New(name, strings.SplitN(name, "-", 2)[1])
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = err
				return
			}
			peers[name] = &peer{Home: h}
		})
	}
	wg.Wait()
	code := 1
	if failed == nil {
		code = m.Run()
	} else {
		println(failed.Error())
	}
	for _, p := range peers {
		p.Close()
	}
	os.Exit(code)
}

var setup sync.Once

// get returns the peers once each trusts the others and its keys are
// read (unlocking a private key takes gpg and go-crypto about a second).
func get(t *testing.T) map[string]*peer {
	setup.Do(func() {
		for _, a := range peers {
			for _, b := range peers {
				if a != b {
					a.Trust(t, b.Home)
				}
			}
			a.public = read(t, a.Public(t, false), nil)
			a.armored = read(t, a.Public(t, true), nil)
			a.private = read(t, a.Private(t), []byte(testgpg.Passphrase))
		}
	})
	return peers
}

func read(t *testing.T, b, passphrase []byte) pgp.Keys {
	keys, err := pgp.ReadKeys(b, passphrase, "the key")
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func message(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func decrypt(sealed []byte, d pgp.Decryption) ([]byte, error) {
	r, err := pgp.Decrypt(bytes.NewReader(sealed), d)
	if err != nil {
		return nil, err
	}
	var got bytes.Buffer
	_, err = got.ReadFrom(r)
	return got.Bytes(), err
}

// What gpg encrypts and signs, sftpgate decrypts and verifies: each key
// type, armored and binary, one recipient or several, compressed or not.
func TestDecryptsWhatGnuPGWrites(t *testing.T) {
	p := get(t)
	for _, algo := range []string{testgpg.RSA, testgpg.Curve25519} {
		ours, partner := p["ours-"+algo], p["partner-"+algo]
		other := p["ours-rsa"]
		if algo == testgpg.RSA {
			other = p["ours-curve25519"]
		}
		for _, c := range []struct {
			name string
			args []string
		}{
			{"binary", nil},
			{"armored", []string{"--armor"}},
			{"uncompressed", []string{"--compress-algo", "none"}},
			{"rfc4880", []string{"--rfc4880"}},
			{"two recipients", []string{"--recipient", other.Email}},
		} {
			t.Run(algo+"/"+c.name, func(t *testing.T) {
				clear := message(300<<10 + 7)
				sealed := partner.EncryptSign(t, clear, []*testgpg.Home{ours.Home}, c.args...)
				got, err := decrypt(sealed, pgp.Decryption{Keys: ours.private, Verify: partner.armored})
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, clear) {
					t.Fatal("the clear text differs from what gpg encrypted")
				}
			})
		}
	}
}

// What sftpgate encrypts and signs, gpg decrypts and verifies, each
// recipient.
func TestGnuPGDecryptsWhatWeWrite(t *testing.T) {
	p := get(t)
	for _, algo := range []string{testgpg.RSA, testgpg.Curve25519} {
		ours, partner := p["ours-"+algo], p["partner-"+algo]
		for _, armor := range []bool{false, true} {
			t.Run(algo+map[bool]string{false: "/binary", true: "/armored"}[armor], func(t *testing.T) {
				clear := message(1<<20 + 13)
				var sealed bytes.Buffer
				w, err := pgp.Encrypt(&sealed, pgp.Encryption{
					To: append(append(pgp.Keys{}, partner.public...), p["partner-rsa"].public...), Signer: ours.private, Armor: armor, Name: "report.csv",
				})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := w.Write(clear); err != nil {
					t.Fatal(err)
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				if armor != bytes.HasPrefix(sealed.Bytes(), []byte("-----BEGIN PGP MESSAGE-----")) {
					t.Errorf("armor %v, but the message starts %q", armor, sealed.Bytes()[:8])
				}
				if got := partner.DecryptVerify(t, sealed.Bytes(), ours.Home); !bytes.Equal(got, clear) {
					t.Fatal("gpg's clear text differs from what was encrypted")
				}
				if algo == testgpg.Curve25519 {
					if got := p["partner-rsa"].DecryptVerify(t, sealed.Bytes(), ours.Home); !bytes.Equal(got, clear) {
						t.Fatal("the second recipient's clear text differs")
					}
				}
			})
		}
	}
}

// A message that fails says why, by reason, at the latest by its last
// Read.
func TestFailuresHaveReasons(t *testing.T) {
	p := get(t)
	ours, partner, stranger := p["ours-rsa"], p["partner-rsa"], p["partner-curve25519"]
	clear := message(200 << 10)
	to := []*testgpg.Home{ours.Home}
	signed := partner.EncryptSign(t, clear, to)
	unsigned := partner.Must(t, clear, "--encrypt", "--recipient", ours.Email)
	byStranger := stranger.EncryptSign(t, clear, to)
	tampered := bytes.Clone(signed)
	tampered[len(tampered)/2] ^= 0x40
	for _, c := range []struct {
		name   string
		sealed []byte
		d      pgp.Decryption
		reason string
	}{
		{"wrong key", signed, pgp.Decryption{Keys: stranger.private}, pgp.KeyNotFound},
		{"cut short", signed[:len(signed)*2/3], pgp.Decryption{Keys: ours.private}, pgp.MessageCorrupt},
		{"altered", tampered, pgp.Decryption{Keys: ours.private}, pgp.MessageCorrupt},
		{"not signed", unsigned, pgp.Decryption{Keys: ours.private, Verify: partner.public}, pgp.SignatureInvalid},
		{"signed by another", byStranger, pgp.Decryption{Keys: ours.private, Verify: partner.public}, pgp.SignatureInvalid},
		{"not OpenPGP", clear, pgp.Decryption{Keys: ours.private}, pgp.MessageCorrupt},
		{"empty", nil, pgp.Decryption{Keys: ours.private}, pgp.MessageCorrupt},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := decrypt(c.sealed, c.d)
			var e *pgp.Error
			if !errors.As(err, &e) || e.Reason != c.reason {
				t.Fatalf("got %v, want reason %s", err, c.reason)
			}
		})
	}
	t.Run("wrong passphrase", func(t *testing.T) {
		_, err := pgp.ReadKeys(ours.Private(t), []byte("wrong"), "the key in Secret x")
		var e *pgp.Error
		if !errors.As(err, &e) || e.Reason != pgp.KeyNotFound || strings.Contains(err.Error(), "wrong") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("no signature required", func(t *testing.T) {
		if got, err := decrypt(byStranger, pgp.Decryption{Keys: ours.private}); err != nil || !bytes.Equal(got, clear) {
			t.Fatalf("got %v", err)
		}
	})
}
