// Package signin is how people get in: sign-up, log-in and log-out with a
// password or through an OpenID provider, the sessions they hold, and the
// gate of every page behind them (RequireAccount).
package signin

import (
	"log/slog"
	"net/http"

	"github.com/sftpgate/sftpgate/webui/accounts"
	"github.com/sftpgate/sftpgate/webui/internal/team"
)

// Pages are sign-in's.
type Pages struct {
	*team.Teams
	signUpOpen bool
	// passwords: log-ins with a password are on; oidc signs in with an
	// OpenID provider (nil: off).
	passwords bool
	oidc      *oidcLogin
}

// Options are sign-in's: who may sign up, and how people log in.
type Options struct {
	SignUp, PasswordLogin bool
	OIDC                  OIDCOptions
	HTTPClient            *http.Client
	Log                   *slog.Logger
}

// New is sign-in for the pages of t.
func New(t *team.Teams, opts Options) (*Pages, error) {
	oidcLogin, err := newOIDCLogin(opts.OIDC, opts.HTTPClient, opts.Log)
	if err != nil {
		return nil, err
	}
	u := &Pages{Teams: t, signUpOpen: opts.SignUp && opts.PasswordLogin, passwords: opts.PasswordLogin, oidc: oidcLogin}
	t.SignedIn = func(w http.ResponseWriter, r *http.Request) *accounts.Account {
		acct, _, _ := u.CurrentAccount(w, r)
		return acct
	}
	return u, nil
}
