package pgp_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sftpgate/sftpgate/internal/pgp"
)

// gnupg is a GnuPG home of its own, holding one key pair: what a partner
// runs, as sftpgate's peer.
type gnupg struct {
	home, email, fpr string

	// keys caches the exports read by sftpgate: unlocking a private key
	// takes gpg and go-crypto about a second each.
	mu   sync.Mutex
	keys map[string]pgp.Keys
}

const passphrase = "correct horse"

// newGnuPG makes a key pair in a home of its own: RSA (algo "rsa") or
// Curve25519 (ed25519 signing, cv25519 encryption).
func newGnuPG(t testing.TB, name, algo string) *gnupg {
	t.Helper()
	if _, err := exec.LookPath("gpg"); err != nil {
		t.Fatalf("gpg is missing (Debian's gnupg; hack/test-prereqs.sh installs it): %v", err)
	}
	home, err := os.MkdirTemp("", "sftpgate-gpg-")
	if err != nil {
		t.Fatal(err)
	}
	g := &gnupg{home: home, email: name + "@example.com"}
	primary, sub := "rsa2048", "rsa2048"
	if algo == "curve25519" {
		primary, sub = "ed25519", "cv25519"
	}
	g.run(t, nil, "--quick-gen-key", name+" <"+g.email+">", primary, "cert,sign", "never")
	out := g.run(t, nil, "--list-keys", "--with-colons", g.email)
	for line := range strings.SplitSeq(string(out), "\n") {
		if f := strings.Split(line, ":"); f[0] == "fpr" {
			g.fpr = f[9]
			break
		}
	}
	g.run(t, nil, "--quick-add-key", g.fpr, sub, "encr", "never")
	return g
}

// run runs gpg in g's home, unattended, with stdin as its input.
func (g *gnupg) run(t testing.TB, stdin []byte, args ...string) []byte {
	t.Helper()
	out, err := g.try(stdin, args...)
	if err != nil {
		t.Fatalf("gpg %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func (g *gnupg) try(stdin []byte, args ...string) ([]byte, error) {
	base := []string{"--homedir", g.home, "--batch", "--yes", "--no-tty", "--pinentry-mode", "loopback", "--passphrase", passphrase, "--trust-model", "always"}
	cmd := exec.Command("gpg", append(base, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, errors.New(strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// public and private are g's keys as gpg exports them, read by sftpgate.
func (g *gnupg) public(t testing.TB, armor bool) pgp.Keys {
	if armor {
		return g.read(t, nil, "--export", "--armor", g.fpr)
	}
	return g.read(t, nil, "--export", g.fpr)
}

func (g *gnupg) private(t testing.TB) pgp.Keys {
	return g.read(t, []byte(passphrase), "--export-secret-keys", "--armor", g.fpr)
}

func (g *gnupg) read(t testing.TB, passphrase []byte, args ...string) pgp.Keys {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	key := strings.Join(args, " ")
	if keys, ok := g.keys[key]; ok {
		return keys
	}
	keys, err := pgp.ReadKeys(g.run(t, nil, args...), passphrase, "the key")
	if err != nil {
		t.Fatal(err)
	}
	if g.keys == nil {
		g.keys = map[string]pgp.Keys{}
	}
	g.keys[key] = keys
	return keys
}

// import adds other's public key to g's keyring.
func (g *gnupg) trust(t testing.TB, other *gnupg) {
	g.run(t, other.run(t, nil, "--export", other.fpr), "--import")
}

// made is the homes the tests made, removed once they ran.
var made []string

func TestMain(m *testing.M) {
	code := m.Run()
	for _, home := range made {
		_ = exec.Command("gpgconf", "--homedir", home, "--kill", "all").Run()
		_ = os.RemoveAll(home)
	}
	os.Exit(code)
}

var (
	homesOnce sync.Once
	homes     map[string]*gnupg
)

// peers are four key pairs, made once: ours and a partner's, in RSA and in
// Curve25519.
func peers(t *testing.T) map[string]*gnupg {
	homesOnce.Do(func() {
		homes = map[string]*gnupg{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, name := range []string{"ours-rsa", "partner-rsa", "ours-curve25519", "partner-curve25519"} {
			wg.Go(func() {
				g := newGnuPG(t, name, strings.SplitN(name, "-", 2)[1])
				mu.Lock()
				made = append(made, g.home)
				homes[name] = g
				mu.Unlock()
			})
		}
		wg.Wait()
		for _, a := range homes {
			for _, b := range homes {
				if a != b {
					a.trust(t, b)
				}
			}
		}
	})
	return homes
}

func message(t *testing.T, n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// What gpg encrypts and signs, sftpgate decrypts and verifies: each key
// type, armored and binary, one recipient or several, compressed or not.
func TestDecryptsWhatGnuPGWrites(t *testing.T) {
	p := peers(t)
	for _, algo := range []string{"rsa", "curve25519"} {
		ours, partner := p["ours-"+algo], p["partner-"+algo]
		other := p["ours-rsa"]
		if algo == "rsa" {
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
			{"two recipients", []string{"--recipient", other.email}},
		} {
			t.Run(algo+"/"+c.name, func(t *testing.T) {
				clear := message(t, 300<<10+7)
				args := append([]string{"--encrypt", "--sign", "--local-user", partner.fpr, "--recipient", ours.email}, c.args...)
				sealed := partner.run(t, clear, args...)
				r, err := pgp.Decrypt(bytes.NewReader(sealed), pgp.Decryption{Keys: ours.private(t), Verify: partner.public(t, true)})
				if err != nil {
					t.Fatal(err)
				}
				var got bytes.Buffer
				if _, err := got.ReadFrom(r); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.Bytes(), clear) {
					t.Fatal("the clear text differs from what gpg encrypted")
				}
			})
		}
	}
}

// What sftpgate encrypts and signs, gpg decrypts and verifies.
func TestGnuPGDecryptsWhatWeWrite(t *testing.T) {
	p := peers(t)
	for _, algo := range []string{"rsa", "curve25519"} {
		ours, partner := p["ours-"+algo], p["partner-"+algo]
		for _, armor := range []bool{false, true} {
			t.Run(algo+map[bool]string{false: "/binary", true: "/armored"}[armor], func(t *testing.T) {
				clear := message(t, 1<<20+13)
				var sealed bytes.Buffer
				w, err := pgp.Encrypt(&sealed, pgp.Encryption{
					To: append(partner.public(t, armor), p["partner-rsa"].public(t, false)...), Signer: ours.private(t), Armor: armor, Name: "report.csv",
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
				status := filepath.Join(partner.home, "status")
				got := partner.run(t, sealed.Bytes(), "--status-file", status, "--decrypt")
				if !bytes.Equal(got, clear) {
					t.Fatal("gpg's clear text differs from what was encrypted")
				}
				st, _ := os.ReadFile(status)
				if !bytes.Contains(st, []byte("[GNUPG:] GOODSIG")) || !bytes.Contains(st, []byte("[GNUPG:] VALIDSIG "+ours.fpr)) {
					t.Fatalf("gpg did not verify our signature:\n%s", st)
				}
				if algo == "curve25519" {
					// The second recipient reads it too.
					if got := p["partner-rsa"].run(t, sealed.Bytes(), "--decrypt"); !bytes.Equal(got, clear) {
						t.Fatal("the second recipient's clear text differs")
					}
				}
			})
		}
	}
}

// A message that fails says why, by reason, before its last Read ends.
func TestFailuresHaveReasons(t *testing.T) {
	p := peers(t)
	ours, partner, stranger := p["ours-rsa"], p["partner-rsa"], p["partner-curve25519"]
	clear := message(t, 200<<10)
	signed := partner.run(t, clear, "--encrypt", "--sign", "--local-user", partner.fpr, "--recipient", ours.email)
	unsigned := partner.run(t, clear, "--encrypt", "--recipient", ours.email)
	byStranger := stranger.run(t, clear, "--encrypt", "--sign", "--local-user", stranger.fpr, "--recipient", ours.email)
	tampered := bytes.Clone(signed)
	tampered[len(tampered)/2] ^= 0x40
	for _, c := range []struct {
		name    string
		sealed  []byte
		d       pgp.Decryption
		reason  string
		nothing bool // refused before any clear text
	}{
		{"wrong key", signed, pgp.Decryption{Keys: stranger.private(t)}, pgp.KeyNotFound, true},
		{"cut short", signed[:len(signed)*2/3], pgp.Decryption{Keys: ours.private(t)}, pgp.MessageCorrupt, false},
		{"altered", tampered, pgp.Decryption{Keys: ours.private(t)}, pgp.MessageCorrupt, false},
		{"not signed", unsigned, pgp.Decryption{Keys: ours.private(t), Verify: partner.public(t, false)}, pgp.SignatureInvalid, false},
		{"signed by another", byStranger, pgp.Decryption{Keys: ours.private(t), Verify: partner.public(t, false)}, pgp.SignatureInvalid, false},
		{"not OpenPGP", clear, pgp.Decryption{Keys: ours.private(t)}, pgp.MessageCorrupt, true},
		{"empty", nil, pgp.Decryption{Keys: ours.private(t)}, pgp.MessageCorrupt, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := pgp.Decrypt(bytes.NewReader(c.sealed), c.d)
			if err == nil {
				var sink bytes.Buffer
				_, err = sink.ReadFrom(r)
			}
			var e *pgp.Error
			if !errors.As(err, &e) || e.Reason != c.reason {
				t.Fatalf("got %v, want reason %s", err, c.reason)
			}
		})
	}
	t.Run("wrong passphrase", func(t *testing.T) {
		_, err := pgp.ReadKeys(ours.run(t, nil, "--export-secret-keys", "--armor", ours.fpr), []byte("wrong"), "the key in Secret x")
		var e *pgp.Error
		if !errors.As(err, &e) || e.Reason != pgp.KeyNotFound || strings.Contains(err.Error(), "wrong") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("verified without a signature requirement", func(t *testing.T) {
		r, err := pgp.Decrypt(bytes.NewReader(byStranger), pgp.Decryption{Keys: ours.private(t)})
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if _, err := got.ReadFrom(r); err != nil || !bytes.Equal(got.Bytes(), clear) {
			t.Fatalf("got %v", err)
		}
	})
}
