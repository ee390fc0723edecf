package webui

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/sftpgate/sftpgate/webui/accounts"
)

type accountKey struct{}

func accountFrom(ctx context.Context) *accounts.Account {
	a, _ := ctx.Value(accountKey{}).(*accounts.Account)
	return a
}

// currentAccount is the account of the request's session, if any. A
// session an OpenID provider signed in is checked with it again once
// older than --oidc-recheck (the cookie renewed): refused, it ends;
// with the provider away, the request fails (errProviderAway) and the
// session stays for when it is back.
func (u *ui) currentAccount(w http.ResponseWriter, r *http.Request) (*accounts.Account, session, error) {
	var s session
	if !u.cookies.get(r, sessionCookie, &s) {
		return nil, s, nil
	}
	if s.SSO {
		if u.oidc == nil {
			return nil, s, nil // sign-in with the provider was turned off
		}
		if time.Since(time.Unix(s.Checked, 0)) >= u.oidc.opts.Recheck {
			fresh, err := u.oidc.recheck(r.Context(), r, s)
			switch {
			case errors.Is(err, errSignedOut):
				u.cookies.clear(w, r, sessionCookie)
				return nil, s, nil
			case err != nil:
				return nil, s, &providerAwayError{err}
			}
			if err := u.setSession(w, r, fresh); err != nil {
				return nil, s, err
			}
			s = fresh
		}
	}
	acct, err := u.accounts.Get(r.Context(), s.Account)
	switch {
	case apierrors.IsNotFound(err):
		return nil, s, nil // the account is gone
	case err != nil:
		return nil, s, err
	case subtle.ConstantTimeCompare([]byte(acct.Session), []byte(s.Epoch)) != 1:
		return nil, s, nil // logged out since
	}
	return acct, s, nil
}

// requireAccount sends people who are not logged in to the log-in page.
func (u *ui) requireAccount(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		acct, s, err := u.currentAccount(w, r)
		switch {
		case err != nil:
			u.fail(w, r, err)
			return
		case acct == nil:
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		m := newMember(acct, s)
		if err := u.joinTeam(w, r, acct, m); err != nil {
			u.fail(w, r, err)
			return
		}
		if m.team.Namespace == "" && !strings.HasPrefix(r.URL.Path, "/teams") {
			// No team at all: only the teams page, to make one, serves.
			http.Redirect(w, r, "/teams", http.StatusSeeOther)
			return
		}
		// Pages act in the team's namespace, as the person.
		acting := *acct
		acting.Namespace = m.team.Namespace
		ctx := context.WithValue(context.WithValue(r.Context(), accountKey{}, &acting), memberKey{}, m)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// home sends people to their connections, or to log in.
func (u *ui) home(w http.ResponseWriter, r *http.Request) error {
	if !u.loggedIn(w, r) {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
	}
	return nil
}

// loggedIn sends a logged-in person on to their connections and says so.
func (u *ui) loggedIn(w http.ResponseWriter, r *http.Request) bool {
	acct, _, err := u.currentAccount(w, r)
	if err != nil || acct == nil {
		return false
	}
	http.Redirect(w, r, "/connections", http.StatusSeeOther)
	return true
}

func (u *ui) signUpForm(w http.ResponseWriter, r *http.Request) error {
	if u.loggedIn(w, r) || u.signUpClosed(w, r) {
		return nil
	}
	return u.signUpPage("")(w, r, http.StatusOK, problems{})
}

// signUpPage draws the sign-up form, filled with email.
func (u *ui) signUpPage(email string) drawForm {
	return func(w http.ResponseWriter, r *http.Request, status int, problem problems) error {
		u.render(w, r, status, "signup", page{Title: "Create your account", Error: problem.form, Errors: problem.fields,
			Form: map[string]string{"email": email}, Data: accounts.MinPassword})
		return nil
	}
}

// full answers a sign-up, or a first sign-in, refused because the accounts
// could run all the cluster lets them (err says how many): the operator
// learns it from the log.
func (u *ui) full(w http.ResponseWriter, r *http.Request, err error) {
	u.log.Warn("an account was refused: the accounts are at their total", "error", err)
	u.render(w, r, http.StatusServiceUnavailable, "message", page{Title: "No new accounts for now",
		Message: "This server has as many accounts as it can run. Ask its operator for one."})
}

// signUpClosed answers a sign-up where the operator closed it.
func (u *ui) signUpClosed(w http.ResponseWriter, r *http.Request) bool {
	if u.signUpOpen {
		return false
	}
	u.render(w, r, http.StatusForbidden, "message", page{Title: "Sign-up is closed",
		Message: "This server does not take new accounts. Ask its operator for one."})
	return true
}

func (u *ui) signUp(w http.ResponseWriter, r *http.Request) error {
	if u.signUpClosed(w, r) {
		return nil
	}
	email, password := r.PostFormValue("email"), r.PostFormValue("password")
	acct, err := u.accounts.SignUp(r.Context(), email, password)
	noteAccount(r, acct)
	switch {
	case errors.Is(err, accounts.ErrBusy):
		u.busy(w, r)
		return nil
	case errors.Is(err, accounts.ErrFull):
		u.full(w, r, err)
		return nil
	case isPersonError(err):
		return onForm(&personError{err.Error()}, u.signUpPage(email))
	case err != nil:
		return err
	}
	u.makeFilesKey(r.Context(), acct.Namespace)
	return u.startSession(w, r, acct, "/connections/new")
}

func (u *ui) logInForm(w http.ResponseWriter, r *http.Request) error {
	if u.loggedIn(w, r) {
		return nil
	}
	if !u.passwords {
		http.Redirect(w, r, "/login/oidc", http.StatusSeeOther)
		return nil
	}
	return u.logInPage("")(w, r, http.StatusOK, problems{})
}

// logInPage draws the log-in form, filled with email.
func (u *ui) logInPage(email string) drawForm {
	return func(w http.ResponseWriter, r *http.Request, status int, problem problems) error {
		var sso string
		if u.oidc != nil {
			sso = u.oidc.opts.Name
		}
		u.render(w, r, status, "login", page{Title: "Log in", Error: problem.form, Errors: problem.fields, Form: map[string]string{"email": email},
			Data: logInChoices{SignUp: u.signUpOpen, SSO: sso}})
		return nil
	}
}

// logInChoices are the log-in page's ways in: SSO names the OpenID
// provider, when there is one.
type logInChoices struct {
	SignUp bool
	SSO    string
}

func (u *ui) logIn(w http.ResponseWriter, r *http.Request) error {
	if !u.passwords {
		u.render(w, r, http.StatusForbidden, "message", page{Title: "Passwords are off",
			Message: "This server signs people in with its identity provider only."})
		return nil
	}
	email := r.PostFormValue("email")
	if ok, retry, message := u.logInAllowed(r, email); !ok {
		u.tooMany(w, r, retry, message)
		return nil
	}
	acct, err := u.accounts.LogIn(r.Context(), email, r.PostFormValue("password"))
	noteAccount(r, acct)
	switch {
	case errors.Is(err, accounts.ErrWrongCredentials):
		return &formError{problem: problems{form: err.Error()}, status: http.StatusUnauthorized, form: u.logInPage(email)}
	case errors.Is(err, accounts.ErrBusy):
		u.busy(w, r)
		return nil
	case err != nil:
		return err
	}
	u.settle(w, r, acct, nil)
	return u.startSession(w, r, acct, "/connections")
}

// settle readies a person signing in, in groups: their own team gets
// today's quota (an account made before quotas, or under other limits)
// and the file browser's key its place; and the first page says which
// other teams they are in, where they act when they have none of their
// own.
func (u *ui) settle(w http.ResponseWriter, r *http.Request, acct *accounts.Account, groups []string) {
	ctx := r.Context()
	if !acct.NoOwnTeam {
		if err := u.accounts.EnsureQuota(ctx, acct); err != nil {
			u.log.Warn("setting an account's quota", "namespace", acct.Namespace, "error", err)
		}
		u.makeFilesKey(ctx, acct.Namespace)
	}
	others, err := u.otherTeams(ctx, newMember(acct, session{Groups: groups}))
	if err != nil {
		u.log.Warn("listing a person's teams", "error", err)
		return
	}
	if len(others) == 0 {
		return
	}
	first := others[0].Title()
	if len(others) > 1 {
		first += " and " + count(len(others)-1, "other team", "other teams")
	}
	if acct.NoOwnTeam {
		u.notify(w, r, "You are a member of "+first+": this is where you work. Your account menu switches teams, and makes one of your own.")
		return
	}
	u.notify(w, r, "You are also a member of "+first+". Switch teams from your account menu.")
}

// logInAllowed applies the log-in limits to one on the account of email:
// a browser that logged in to it before has a bucket of its own, which no
// one filling the other limits holds up; any other shares its address's,
// then (for a valid email) its address's on the account, then the
// account's.
func (u *ui) logInAllowed(r *http.Request, email string) (bool, time.Duration, string) {
	normalized, err := accounts.NormalizeEmail(email)
	if known := (device{}); err == nil && u.cookies.get(r, deviceCookie, &known) && known.Email == normalized {
		ok, retry := u.deviceLimit.Allow(known.ID)
		return ok, retry, "Too many attempts to log in from this browser. Wait a minute, then try again."
	}
	address := u.clients.key(r)
	if ok, retry := u.authLimit.Allow(address); !ok {
		return false, retry, tooManyFromAddress
	}
	if err != nil {
		return true, 0, ""
	}
	if ok, retry := u.emailLimit.Allow(normalized + " " + address); !ok {
		return false, retry, "Too many attempts to log in to this account from your address. Wait a minute, then try again."
	}
	ok, retry := u.accountLimit.Allow(normalized)
	return ok, retry, "Too many attempts to log in to this account. Wait a minute, then try again; " +
		"a browser you have logged in to this account with before is not held up."
}

// busy answers a log-in or sign-up that found every password-check slot
// taken.
func (u *ui) busy(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Retry-After", "2")
	u.render(w, r, http.StatusServiceUnavailable, "message", page{Title: "Busy", Message: accounts.ErrBusy.Error()})
}

// startSession logs the browser in to acct, and marks it as one that has.
func (u *ui) startSession(w http.ResponseWriter, r *http.Request, acct *accounts.Account, next string) error {
	known := device{Email: acct.Email}
	if !u.cookies.get(r, deviceCookie, &known) || known.Email != acct.Email {
		known = device{Email: acct.Email, ID: rand.Text()}
	}
	if err := errors.Join(u.setSession(w, r, session{Account: acct.ID, Epoch: acct.Session}),
		u.cookies.set(w, r, deviceCookie, known)); err != nil {
		return err
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

// startSSOSession logs the browser in with the session an OpenID provider
// signed in.
func (u *ui) startSSOSession(w http.ResponseWriter, r *http.Request, s session, next string) error {
	if err := u.setSession(w, r, s); err != nil {
		return err
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

// setSession sets the session cookie. A provider's ID token can make it
// longer than browsers keep: then it goes without, and logging out at the
// provider names only the client.
func (u *ui) setSession(w http.ResponseWriter, r *http.Request, s session) error {
	err := u.cookies.set(w, r, sessionCookie, s)
	if err != nil && s.IDToken != "" {
		s.IDToken = ""
		err = u.cookies.set(w, r, sessionCookie, s)
	}
	return err
}

// logOut ends every session of the account, not only this browser's: a
// copied cookie stops working too. A session a provider signed in ends
// there too, where the provider lets clients end them.
func (u *ui) logOut(w http.ResponseWriter, r *http.Request) error {
	var s session
	signedIn := u.cookies.get(r, sessionCookie, &s)
	if signedIn {
		acct, err := u.accounts.Get(r.Context(), s.Account)
		noteAccount(r, acct)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return err
		case subtle.ConstantTimeCompare([]byte(acct.Session), []byte(s.Epoch)) == 1:
			if err := u.accounts.EndSessions(r.Context(), acct.ID); err != nil {
				return err
			}
		}
	}
	u.cookies.clear(w, r, sessionCookie)
	if signedIn && s.SSO && u.oidc != nil {
		u.oidc.revoke(r.Context(), s)
		if end := u.oidc.endSessionURL(r.Context(), r, s); end != "" {
			http.Redirect(w, r, end, http.StatusSeeOther)
			return nil
		}
	}
	http.Redirect(w, r, "/login", http.StatusSeeOther)
	return nil
}

// loggedOut is where a log-out ends, here or at the provider.
func (u *ui) loggedOut(w http.ResponseWriter, r *http.Request) error {
	u.render(w, r, http.StatusOK, "message", page{Title: "Logged out", Message: "You have logged out."})
	return nil
}

// isPersonError: an error of sign-up whose message tells the person what
// to change.
func isPersonError(err error) bool {
	return errors.Is(err, accounts.ErrInvalidEmail) || errors.Is(err, accounts.ErrShortPassword) ||
		errors.Is(err, accounts.ErrLongPassword) || errors.Is(err, accounts.ErrEmailTaken)
}
