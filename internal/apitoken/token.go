// Package apitoken makes API key tokens, hashes and checks them, and
// indexes ApiKeys by their token's hash. The ApiKey controller issues
// tokens with it, the web UI makes hash-only keys with it, and the
// gateway finds the key of a presented token through its index.
package apitoken

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

// Prefix starts every generated token, so secret scanners can find leaked
// keys.
const Prefix = "sgk_"

// Generated tokens are "sgk_<key id>_<secret>": the key id names the key in
// logs and UIs without revealing it; the secret is two crypto/rand.Text
// strings, 256 random bits in base32.
var generated = regexp.MustCompile(`^sgk_([a-z2-7]{8})_[A-Z2-7]{52}$`)

// Limits on tokens that sftpgate did not generate (a user's own Secret).
const (
	minTokenLength = 32
	maxTokenLength = 1024
)

// NewToken returns a new random token and its key id.
func NewToken() (token, keyID string) {
	keyID = strings.ToLower(rand.Text()[:8])
	return Prefix + keyID + "_" + rand.Text() + rand.Text(), keyID
}

// Hash is the hex SHA-256 of a token: what ApiKeys keep and the gateway
// matches. Generated tokens carry 256 random bits, so a fast hash is enough:
// nobody can search back from it. Tokens from users' own Secrets must be as
// random (the docs say so, and only Secrets labelled for the purpose are
// read).
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// KeyID is the key id a generated token carries, or else the start of the
// token's hash.
func KeyID(token string) string {
	if m := generated.FindStringSubmatch(token); m != nil {
		return m[1]
	}
	return Hash(token)[:8]
}

// LengthOK reports whether token is as long as a token may be: the only
// check made before looking a presented token up by its hash.
func LengthOK(token string) bool {
	return len(token) >= minTokenLength && len(token) <= maxTokenLength
}

// Validate says why a token read from a Secret cannot be used. The message
// never contains the token.
func Validate(token string) error {
	switch {
	case len(token) < minTokenLength:
		return fmt.Errorf("the token is shorter than %d characters", minTokenLength)
	case len(token) > maxTokenLength:
		return fmt.Errorf("the token is longer than %d characters", maxTokenLength)
	case strings.HasPrefix(token, Prefix) && !generated.MatchString(token):
		return fmt.Errorf("the token starts with %q but is not one sftpgate generated", Prefix)
	}
	for _, c := range token {
		if c <= ' ' || c > '~' {
			return fmt.Errorf("the token may contain only printable ASCII characters, no spaces")
		}
	}
	return nil
}
