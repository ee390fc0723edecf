package webui

import (
	"crypto/sha256"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gorilla/securecookie"
)

// Cookie names.
const (
	sessionCookie = "sftpgate_session"
	// flashCookie carries a new API key from the POST that made it to the
	// one page that shows it: encrypted, short-lived, and cleared there.
	flashCookie = "sftpgate_new_key"
	// deviceCookie marks a browser that logged in to an account: its
	// log-ins to that account are limited per browser, not with the
	// account's limit that strangers' attempts use up.
	deviceCookie = "sftpgate_device"
	// oidcCookie carries a sign-in's state, nonce and PKCE verifier while
	// the browser is at the OpenID provider.
	oidcCookie = "sftpgate_oidc"
	// teamCookie names the team the browser acts in, when not its own
	// account's.
	teamCookie = "sftpgate_team"
	// shareCookie lists the share links whose password the browser gave.
	shareCookie = "sftpgate_shares"
	// noticeCookie carries what a POST did to the page it redirects to.
	noticeCookie = "sftpgate_notice"
)

// cookieTTL is how long each cookie lasts: a log-in 12 hours, a new key
// 5 minutes waiting for its page, a known browser 90 days from its last
// log-in, a sign-in 10 minutes at the provider, a notice a minute.
var cookieTTL = map[string]time.Duration{sessionCookie: 12 * time.Hour, flashCookie: 5 * time.Minute, deviceCookie: 90 * 24 * time.Hour,
	oidcCookie: 10 * time.Minute, teamCookie: 12 * time.Hour,
	shareCookie: 12 * time.Hour, noticeCookie: time.Minute}

// cookies signs and encrypts the UI's cookies. HttpOnly and SameSite=Lax
// always; Secure when the request came over TLS (directly or as an ingress
// says) or --secure-cookies is set.
type cookies struct {
	// codecs by cookie name: each checks its own maximum age.
	codecs       map[string]*securecookie.SecureCookie
	alwaysSecure bool
}

// derive is a key for purpose from the UI's secret.
func derive(secret []byte, purpose string) []byte {
	sum := sha256.Sum256(append([]byte("sftpgate webui "+purpose+"\x00"), secret...))
	return sum[:]
}

// newCookies derives the signing and encryption keys from secret.
func newCookies(secret []byte, alwaysSecure bool) *cookies {
	sign, encrypt := derive(secret, "sign"), derive(secret, "encrypt")
	codecs := map[string]*securecookie.SecureCookie{}
	for name, ttl := range cookieTTL {
		codecs[name] = securecookie.New(sign, encrypt).MaxAge(int(ttl.Seconds()))
	}
	return &cookies{codecs: codecs, alwaysSecure: alwaysSecure}
}

type session struct {
	Account string `json:"a"`
	// Epoch is the account's session value when the session began.
	Epoch string `json:"e"`
	// SSO: an OpenID provider signed the person in. Groups are theirs as
	// it said, Checked (Unix seconds) when it last did; Refresh asks it
	// again, IDToken names the session when logging out there.
	SSO     bool     `json:"s,omitempty"`
	Groups  []string `json:"g,omitempty"`
	Checked int64    `json:"c,omitempty"`
	Refresh string   `json:"r,omitempty"`
	IDToken string   `json:"i,omitempty"`
}

type device struct {
	// Email is the account's, normalized.
	Email string `json:"m"`
	// ID is random: each browser has its own bucket.
	ID string `json:"i"`
}

type newKey struct {
	Name  string `json:"n"`
	Token string `json:"t"`
}

func (c *cookies) set(w http.ResponseWriter, r *http.Request, name string, value any) error {
	encoded, err := c.codecs[name].Encode(name, value)
	if err != nil {
		return err
	}
	http.SetCookie(w, c.cookie(r, name, encoded, int(cookieTTL[name].Seconds())))
	return nil
}

// cookie is HttpOnly and SameSite=Lax, and Secure whenever the request came
// over TLS: a plain-HTTP local UI could not use a Secure cookie at all.
func (c *cookies) cookie(r *http.Request, name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge, //nolint:gosec // Secure as above
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: c.secure(r)}
}

// get decodes cookie name into value; false when it is missing, forged or
// expired.
func (c *cookies) get(r *http.Request, name string, value any) bool {
	cookie, err := r.Cookie(name)
	return err == nil && c.codecs[name].Decode(name, cookie.Value, value) == nil
}

func (c *cookies) clear(w http.ResponseWriter, r *http.Request, name string) {
	http.SetCookie(w, c.cookie(r, name, "", -1))
}

func (c *cookies) secure(r *http.Request) bool {
	return c.alwaysSecure || r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"
}

// readSecretFile reads a secret from a file, without surrounding space.
func readSecretFile(name string) (string, error) {
	b, err := os.ReadFile(name) //nolint:gosec // the operator names the file
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
