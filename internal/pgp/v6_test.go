package pgp_test

import (
	"bytes"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp/packet"
	openpgp "github.com/ProtonMail/go-crypto/openpgp/v2"

	"github.com/sftpgate/sftpgate/internal/pgp"
)

// TestSEIPDv2: to a version 6 key (RFC 9580) that asks for SEIPD v2 (its
// features), sftpgate writes SEIPD v2, and reads it back, signed.
func TestSEIPDv2(t *testing.T) {
	key, err := openpgp.NewEntity("v6", "", "v6@example.com", &packet.Config{V6Keys: true, Algorithm: packet.PubKeyAlgoEd25519, AEADConfig: &packet.AEADConfig{}})
	if err != nil {
		t.Fatal(err)
	}
	clear := message(100<<10 + 3)
	var sealed bytes.Buffer
	w, err := pgp.Encrypt(&sealed, pgp.Encryption{To: pgp.Keys{key}, Signer: pgp.Keys{key}})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write(clear)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	packets := packet.NewReader(bytes.NewReader(sealed.Bytes()))
	v2 := false
	for {
		p, err := packets.Next()
		if err != nil {
			break
		}
		if se, ok := p.(*packet.SymmetricallyEncrypted); ok {
			v2 = se.Version == 2
			break
		}
	}
	if !v2 {
		t.Error("the message to a v6 key is not SEIPD v2")
	}
	got, err := decrypt(sealed.Bytes(), pgp.Decryption{Keys: pgp.Keys{key}, Verify: pgp.Keys{key}})
	if err != nil || !bytes.Equal(got, clear) {
		t.Fatalf("reading it back: %v", err)
	}
}
