package signin

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
	"golang.org/x/sync/singleflight"

	"github.com/sftpgate/sftpgate/webui/accounts"
	"github.com/sftpgate/sftpgate/webui/internal/web"
)

// Sign-in with an OpenID provider: the authorization code flow with PKCE
// (and the client's secret, when it has one). The account is the email
// the provider verified; the groups claim names the person's teams. A
// session keeps the provider's refresh token, and is checked with it
// again once it is older than recheck: a person the provider disabled
// (their refresh refused) loses access at their next request after that.

// OIDCOptions configure sign-in with an OpenID provider.
type OIDCOptions struct {
	// Issuer is the provider's; sign-in with a provider is off when empty.
	Issuer   string
	ClientID string
	// ClientSecretFile holds the client's secret; none for a public
	// client (PKCE alone).
	ClientSecretFile string
	// RedirectURL is where the provider sends people back:
	// <the UI's address>/login/oidc/callback. From the request when empty.
	RedirectURL string
	Scopes      []string
	// GroupsClaim names the ID token's claim of the person's groups.
	GroupsClaim string
	// Recheck bounds how long a session goes without the provider saying
	// the person may still sign in.
	Recheck time.Duration
	// Name is the provider's, on the sign-in button.
	Name string
	// TrustEmail takes an email without email_verified as verified.
	TrustEmail bool
}

// BindFlags registers the provider's flags on fs.
func (o *OIDCOptions) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Issuer, "oidc-issuer", "", "Issuer URL of an OpenID provider to sign in with (single sign-on); off when empty.")
	fs.StringVar(&o.ClientID, "oidc-client-id", "", "The web UI's client ID at the OpenID provider.")
	fs.StringVar(&o.ClientSecretFile, "oidc-client-secret-file", "", "File with the client's secret; none for a public client, which PKCE alone protects.")
	fs.StringVar(&o.RedirectURL, "oidc-redirect-url", "",
		"Where the provider sends people back: the web UI's address and /login/oidc/callback (from each request's Host when empty). Register it, and the same address with /logged-out, at the provider.")
	o.Scopes = []string{oidc.ScopeOpenID, "email", "profile", oidc.ScopeOfflineAccess}
	fs.Func("oidc-scopes", "Comma-separated scopes to ask for (default openid,email,profile,offline_access; add groups where the provider needs it for the groups claim).",
		func(s string) error { o.Scopes = strings.Split(s, ","); return nil })
	fs.StringVar(&o.GroupsClaim, "oidc-groups-claim", "groups", "The ID token's claim that lists the person's groups, which teams grant roles to.")
	fs.DurationVar(&o.Recheck, "oidc-recheck", 5*time.Minute,
		"How long a session goes before the provider is asked again (with its refresh token) whether the person may still sign in: the bound on access after a person is disabled there.")
	fs.StringVar(&o.Name, "oidc-name", "single sign-on", "The provider's name on the sign-in button.")
	fs.BoolVar(&o.TrustEmail, "oidc-trust-email", false,
		"Take the email claim as verified when the ID token has no email_verified claim (some providers, such as Microsoft Entra ID, send none: their emails are the directory's). An email_verified of false is refused whatever this says.")
}

// oidcLogin signs people in with a provider, found on first use (and
// again after a failure): the UI starts while the provider is away.
type oidcLogin struct {
	opts   OIDCOptions
	secret string
	client *http.Client
	log    *slog.Logger

	mu   sync.Mutex
	disc *discovered
	// refreshes: one refresh of a session's token at a time, and its
	// answer kept for the browser's other requests that still carry the
	// old token (providers rotate refresh tokens and refuse old ones).
	refreshes singleflight.Group
	recent    recentRefreshes
}

type discovered struct {
	provider   *oidc.Provider
	verifier   *oidc.IDTokenVerifier
	endSession string
	revocation string
}

func newOIDCLogin(opts OIDCOptions, client *http.Client, log *slog.Logger) (*oidcLogin, error) {
	if opts.Issuer == "" {
		return nil, nil //nolint:nilnil // off
	}
	if opts.ClientID == "" {
		return nil, errors.New("--oidc-client-id is required with --oidc-issuer")
	}
	if opts.Recheck <= 0 {
		return nil, errors.New("--oidc-recheck must be positive")
	}
	l := &oidcLogin{opts: opts, client: client, log: log}
	if opts.ClientSecretFile != "" {
		secret, err := web.ReadSecretFile(opts.ClientSecretFile)
		if err != nil {
			return nil, fmt.Errorf("--oidc-client-secret-file: %w", err)
		}
		l.secret = secret
	}
	return l, nil
}

func (l *oidcLogin) discover(ctx context.Context) (*discovered, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.disc != nil {
		return l.disc, nil
	}
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, l.client), l.opts.Issuer)
	if err != nil {
		return nil, fmt.Errorf("finding the OpenID provider: %w", err)
	}
	var ends struct {
		EndSession string `json:"end_session_endpoint"`
		Revocation string `json:"revocation_endpoint"`
	}
	_ = p.Claims(&ends)
	l.disc = &discovered{provider: p, verifier: p.Verifier(&oidc.Config{ClientID: l.opts.ClientID}),
		endSession: ends.EndSession, revocation: ends.Revocation}
	return l.disc, nil
}

func (l *oidcLogin) config(r *http.Request, d *discovered) *oauth2.Config {
	return &oauth2.Config{ClientID: l.opts.ClientID, ClientSecret: l.secret, Endpoint: d.provider.Endpoint(),
		RedirectURL: l.redirectURL(r), Scopes: l.opts.Scopes}
}

func (l *oidcLogin) redirectURL(r *http.Request) string {
	if l.opts.RedirectURL != "" {
		return l.opts.RedirectURL
	}
	return web.RequestBase(r) + "/login/oidc/callback"
}

// loggedOutURL is where the provider sends people once they logged out.
func (l *oidcLogin) loggedOutURL(r *http.Request) string {
	return strings.TrimSuffix(l.redirectURL(r), "/login/oidc/callback") + "/logged-out"
}

// oidcPending is what a sign-in started keeps until the provider sends the
// browser back: in a cookie of its own, signed and encrypted.
type oidcPending struct {
	State, Nonce, Verifier string
}

// claims are what the UI reads of an ID token.
type claims struct {
	Email    string `json:"email"`
	Verified *bool  `json:"email_verified"`
}

// StartOIDC sends the browser to the provider.
func (u *Pages) StartOIDC(w http.ResponseWriter, r *http.Request) error {
	d, err := u.oidc.discover(r.Context())
	if err != nil {
		return u.ProviderAway(w, r, err)
	}
	p := oidcPending{State: rand.Text(), Nonce: rand.Text(), Verifier: oauth2.GenerateVerifier()}
	if err := u.Cookies.Set(w, r, web.OIDCCookie, p); err != nil {
		return err
	}
	http.Redirect(w, r, u.oidc.config(r, d).AuthCodeURL(p.State, oidc.Nonce(p.Nonce), oauth2.S256ChallengeOption(p.Verifier)), http.StatusSeeOther) //nolint:gosec // the provider's authorization endpoint, as discovered
	return nil
}

// signInRefused answers a sign-in the provider or the UI refused.
func (u *Pages) signInRefused(w http.ResponseWriter, r *http.Request, message string) error {
	u.Render(w, r, http.StatusUnauthorized, "message", web.Page{Title: "Sign-in failed", Message: message})
	return nil
}

// FinishOIDC takes the browser back from the provider: the code for
// tokens, the ID token checked (signature, audience, expiry, nonce), the
// account of its verified email, and a session.
func (u *Pages) FinishOIDC(w http.ResponseWriter, r *http.Request) error {
	var p oidcPending
	ok := u.Cookies.Get(r, web.OIDCCookie, &p)
	u.Cookies.Clear(w, r, web.OIDCCookie)
	q := r.URL.Query()
	switch {
	case !ok || subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(p.State)) != 1:
		return u.signInRefused(w, r, "This sign-in was not started here, or took too long. Start again.")
	case q.Get("error") != "":
		return u.signInRefused(w, r, "The identity provider refused the sign-in ("+q.Get("error")+").")
	}
	d, err := u.oidc.discover(r.Context())
	if err != nil {
		return u.ProviderAway(w, r, err)
	}
	ctx := oidc.ClientContext(r.Context(), u.oidc.client)
	token, err := u.oidc.config(r, d).Exchange(ctx, q.Get("code"), oauth2.VerifierOption(p.Verifier))
	if err != nil {
		if refused(err) {
			return u.signInRefused(w, r, "The identity provider refused the sign-in. Start again.")
		}
		return u.ProviderAway(w, r, err)
	}
	id, err := u.oidc.verify(ctx, d, token)
	if err != nil {
		u.Log.Warn("an ID token was refused", "error", err)
		return u.signInRefused(w, r, "The identity provider's answer did not check out. Start again.")
	}
	// go-oidc leaves the nonce to its caller.
	if subtle.ConstantTimeCompare([]byte(id.Nonce), []byte(p.Nonce)) != 1 {
		return u.signInRefused(w, r, "The identity provider's answer did not check out. Start again.")
	}
	var c claims
	if err := id.Claims(&c); err != nil {
		return err
	}
	if c.Email == "" || (c.Verified != nil && !*c.Verified) || (c.Verified == nil && !u.oidc.opts.TrustEmail) {
		return u.signInRefused(w, r, "The identity provider did not give a verified email address, which names your account here.")
	}
	groups := u.oidc.groups(id)
	acct, err := u.Accounts.SignIn(r.Context(), c.Email, groups)
	web.NoteAccount(r, acct)
	switch {
	case errors.Is(err, accounts.ErrInvalidEmail):
		return u.signInRefused(w, r, "The identity provider's email address for you is not one this server takes.")
	case errors.Is(err, accounts.ErrFull):
		u.Full(w, r, err)
		return nil
	case errors.Is(err, accounts.ErrUnverified):
		u.Log.Warn("a sign-in through the provider found a password account of its email, never verified", "account", acct)
		return u.signInRefused(w, r, "An account with your email was made here with a password, and its email was never verified, so it cannot be yours by the identity provider's word. Log in with its password, or ask the operator.")
	}
	if err != nil {
		return err
	}
	u.settle(w, r, acct, groups)
	raw, _ := token.Extra("id_token").(string)
	s := web.Session{Account: acct.ID, Epoch: acct.Session, SSO: true, Groups: groups,
		Refresh: token.RefreshToken, IDToken: raw, Checked: time.Now().Unix()}
	return u.startSSOSession(w, r, s, "/connections")
}

// verify checks the ID token of a token response.
func (l *oidcLogin) verify(ctx context.Context, d *discovered, token *oauth2.Token) (*oidc.IDToken, error) {
	raw, ok := token.Extra("id_token").(string)
	if !ok {
		return nil, errors.New("no id_token in the token response")
	}
	return d.verifier.Verify(ctx, raw)
}

// groups reads the groups claim: a list of strings, or one string.
func (l *oidcLogin) groups(id *oidc.IDToken) []string {
	var all map[string]any
	if id.Claims(&all) != nil {
		return nil
	}
	var groups []string
	switch v := all[l.opts.GroupsClaim].(type) {
	case string:
		groups = []string{v}
	case []any:
		for _, g := range v {
			if s, ok := g.(string); ok && s != "" {
				groups = append(groups, s)
			}
		}
	}
	slices.Sort(groups)
	groups = slices.Compact(groups)
	// The session cookie carries them: bounded, so that it stays one
	// browsers keep.
	groups = slices.DeleteFunc(groups, func(g string) bool { return len(g) > web.MaxGroupName })
	if len(groups) > maxGroups {
		l.log.Warn("a person has more groups than a session keeps; teams granted to the others are not seen",
			"groups", len(groups), "kept", maxGroups)
		groups = groups[:maxGroups]
	}
	return groups
}

// The groups a session keeps, at most (their longest name:
// web.MaxGroupName).
const (
	maxGroups = 30
)

// refused says the provider answered no (the grant or code is not good),
// not that it could not be reached.
func refused(err error) bool {
	var re *oauth2.RetrieveError
	return errors.As(err, &re) && re.Response != nil && re.Response.StatusCode >= 400 && re.Response.StatusCode < 500
}

// errSignedOut is a session the provider no longer vouches for.
var errSignedOut = errors.New("the identity provider no longer signs this person in")

// recheck asks the provider, with the session's refresh token, whether
// the person may still sign in: s comes back with the new tokens and
// groups, errSignedOut when refused (or when there is no refresh token to
// ask with), another error when the provider does not answer.
func (l *oidcLogin) recheck(ctx context.Context, r *http.Request, s web.Session) (web.Session, error) {
	if s.Refresh == "" {
		return s, errSignedOut
	}
	if fresh, ok := l.recent.get(s.Refresh); ok {
		return fresh, nil
	}
	v, err, _ := l.refreshes.Do(s.Refresh, func() (any, error) {
		d, err := l.discover(ctx)
		if err != nil {
			return nil, err
		}
		ctx := oidc.ClientContext(ctx, l.client)
		token, err := l.config(r, d).TokenSource(ctx, &oauth2.Token{RefreshToken: s.Refresh}).Token()
		if err != nil {
			if refused(err) {
				return nil, errSignedOut
			}
			return nil, err
		}
		fresh := s
		fresh.Checked = time.Now().Unix()
		if token.RefreshToken != "" {
			fresh.Refresh = token.RefreshToken
		}
		// A refresh may bring a new ID token, and with it today's groups.
		if id, err := l.verify(ctx, d, token); err == nil {
			fresh.Groups, fresh.IDToken = l.groups(id), token.Extra("id_token").(string)
		}
		l.recent.put(s.Refresh, fresh)
		return fresh, nil
	})
	if err != nil {
		return s, err
	}
	return v.(web.Session), nil
}

// revoke revokes the session's refresh token where the provider can
// (RFC 7009), so that logging out ends the grant too; a failure only
// leaves it to expire.
func (l *oidcLogin) revoke(ctx context.Context, s web.Session) {
	d, err := l.discover(ctx)
	if err != nil || d.revocation == "" || s.Refresh == "" {
		return
	}
	form := url.Values{"token": {s.Refresh}, "token_type_hint": {"refresh_token"}, "client_id": {l.opts.ClientID}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.revocation, strings.NewReader(form.Encode()))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if l.secret != "" {
		req.SetBasicAuth(url.QueryEscape(l.opts.ClientID), url.QueryEscape(l.secret))
	}
	resp, err := l.client.Do(req)
	if err != nil {
		l.log.Warn("revoking a refresh token at logout", "error", err)
		return
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		l.log.Warn("revoking a refresh token at logout", "status", resp.StatusCode)
	}
}

// endSessionURL is where logging out of a provider's session goes on,
// when the provider has an end-session endpoint.
func (l *oidcLogin) endSessionURL(ctx context.Context, r *http.Request, s web.Session) string {
	d, err := l.discover(ctx)
	if err != nil || d.endSession == "" {
		return ""
	}
	q := url.Values{"client_id": {l.opts.ClientID}, "post_logout_redirect_uri": {l.loggedOutURL(r)}}
	if s.IDToken != "" {
		q.Set("id_token_hint", s.IDToken)
	}
	return d.endSession + "?" + q.Encode()
}

// recentRefreshes keeps each refresh's answer for a minute, by the token
// it refreshed, at most maxRecentRefreshes of them.
type recentRefreshes struct {
	mu      sync.Mutex
	entries map[string]recentRefresh
}

type recentRefresh struct {
	fresh web.Session
	until time.Time
}

const maxRecentRefreshes = 10000

func (c *recentRefreshes) get(token string) (web.Session, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[token]
	if !ok || time.Now().After(e.until) {
		return web.Session{}, false
	}
	return e.fresh, true
}

func (c *recentRefreshes) put(token string, fresh web.Session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if c.entries == nil {
		c.entries = map[string]recentRefresh{}
	}
	if len(c.entries) >= maxRecentRefreshes {
		for k, e := range c.entries {
			if now.After(e.until) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= maxRecentRefreshes {
			return // a browser with the old token signs in again
		}
	}
	c.entries[token] = recentRefresh{fresh: fresh, until: now.Add(time.Minute)}
}
