package web

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
	SessionCookie = "sftpgate_session"
	// FlashCookie carries a new API key from the POST that made it to the
	// one page that shows it: encrypted, short-lived, and cleared there.
	FlashCookie = "sftpgate_new_key"
	// DeviceCookie marks a browser that logged in to an account: its
	// log-ins to that account are limited per browser, not with the
	// account's limit that strangers' attempts use up.
	DeviceCookie = "sftpgate_device"
	// OIDCCookie carries a sign-in's state, nonce and PKCE verifier while
	// the browser is at the OpenID provider.
	OIDCCookie = "sftpgate_oidc"
	// TeamCookie names the team the browser acts in, when not its own
	// account's.
	TeamCookie = "sftpgate_team"
	// ShareCookie lists the share links whose password the browser gave.
	ShareCookie = "sftpgate_shares"
	// noticeCookie carries what a POST did to the page it redirects to.
	noticeCookie = "sftpgate_notice"
)

// cookieTTL is how long each cookie lasts: a log-in 12 hours, a new key
// 5 minutes waiting for its page, a known browser 90 days from its last
// log-in, a sign-in 10 minutes at the provider, a notice a minute.
var cookieTTL = map[string]time.Duration{SessionCookie: 12 * time.Hour, FlashCookie: 5 * time.Minute, DeviceCookie: 90 * 24 * time.Hour,
	OIDCCookie: 10 * time.Minute, TeamCookie: 12 * time.Hour,
	ShareCookie: 12 * time.Hour, noticeCookie: time.Minute}

// Cookies signs and encrypts the UI's cookies. HttpOnly and SameSite=Lax
// always; Secure when the request came over TLS (directly or as an ingress
// says) or --secure-cookies is set.
type Cookies struct {
	// codecs by cookie name: each checks its own maximum age.
	codecs       map[string]*securecookie.SecureCookie
	alwaysSecure bool
}

// Derive is a key for purpose from the UI's secret.
func Derive(secret []byte, purpose string) []byte {
	sum := sha256.Sum256(append([]byte("sftpgate webui "+purpose+"\x00"), secret...))
	return sum[:]
}

// NewCookies derives the signing and encryption keys from secret.
func NewCookies(secret []byte, alwaysSecure bool) *Cookies {
	sign, encrypt := Derive(secret, "sign"), Derive(secret, "encrypt")
	codecs := map[string]*securecookie.SecureCookie{}
	for name, ttl := range cookieTTL {
		codecs[name] = securecookie.New(sign, encrypt).MaxAge(int(ttl.Seconds()))
	}
	return &Cookies{codecs: codecs, alwaysSecure: alwaysSecure}
}

// Session is what the session cookie holds.
type Session struct {
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

// Device is what a browser that logged in to an account keeps (its own log-in limit).
type Device struct {
	// Email is the account's, normalized.
	Email string `json:"m"`
	// ID is random: each browser has its own bucket.
	ID string `json:"i"`
}

// NewKey is a key just made, shown once (the flash cookie).
type NewKey struct {
	Name  string `json:"n"`
	Token string `json:"t"`
}

// Set keeps value in the cookie name, signed and encrypted.
func (c *Cookies) Set(w http.ResponseWriter, r *http.Request, name string, value any) error {
	encoded, err := c.codecs[name].Encode(name, value)
	if err != nil {
		return err
	}
	http.SetCookie(w, c.cookie(r, name, encoded, int(cookieTTL[name].Seconds())))
	return nil
}

// cookie is HttpOnly and SameSite=Lax, and Secure whenever the request came
// over TLS: a plain-HTTP local UI could not use a Secure cookie at all.
func (c *Cookies) cookie(r *http.Request, name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge, //nolint:gosec // Secure as above
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: c.secure(r)}
}

// Get decodes cookie name into value; false when it is missing, forged or
// expired.
func (c *Cookies) Get(r *http.Request, name string, value any) bool {
	cookie, err := r.Cookie(name)
	return err == nil && c.codecs[name].Decode(name, cookie.Value, value) == nil
}

// Clear removes the cookie name.
func (c *Cookies) Clear(w http.ResponseWriter, r *http.Request, name string) {
	http.SetCookie(w, c.cookie(r, name, "", -1))
}

func (c *Cookies) secure(r *http.Request) bool {
	return c.alwaysSecure || r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"
}

// ReadSecretFile reads a secret from a file, without surrounding space.
func ReadSecretFile(name string) (string, error) {
	b, err := os.ReadFile(name) //nolint:gosec // the operator names the file
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
