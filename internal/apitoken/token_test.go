package apitoken

import (
	"strings"
	"testing"
)

func TestNewToken(t *testing.T) {
	token, keyID := NewToken()
	other, _ := NewToken()
	if token == other {
		t.Fatal("two tokens are equal")
	}
	if !strings.HasPrefix(token, Prefix+keyID+"_") || KeyID(token) != keyID || len(keyID) != 8 {
		t.Errorf("token %q does not carry key id %q", token[:13], keyID)
	}
	// 52 base32 characters are 260 bits, of which crypto/rand.Text fills 256.
	if secret := strings.TrimPrefix(token, Prefix+keyID+"_"); len(secret) != 52 {
		t.Errorf("secret part has %d characters", len(secret))
	}
	if err := Validate(token); err != nil {
		t.Errorf("a generated token is invalid: %v", err)
	}
	if h := Hash(token); len(h) != 64 || KeyID(strings.Repeat("x", 40)) != Hash(strings.Repeat("x", 40))[:8] {
		t.Errorf("hash %q", h)
	}
}

func TestValidate(t *testing.T) {
	for token, ok := range map[string]bool{
		strings.Repeat("a", 32):                           true,
		strings.Repeat("a", 31):                           false,
		strings.Repeat("a", 1025):                         false,
		strings.Repeat("a", 20) + " " + "bbbbbbbbbbbbbbb": false,
		"sgk_" + strings.Repeat("a", 40):                  false, // looks generated, is not
		strings.Repeat("é", 20):                           false,
	} {
		if err := Validate(token); (err == nil) != ok {
			t.Errorf("Validate(%.12q...) = %v, want ok=%v", token, err, ok)
		}
	}
}
