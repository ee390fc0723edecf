package signin

import (
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/sftpgate/sftpgate/webui/accounts"
	"github.com/sftpgate/sftpgate/webui/internal/team"
	"github.com/sftpgate/sftpgate/webui/internal/web"
)

// CurrentAccount is the account of the request's session, if any. A
// session an OpenID provider signed in is checked with it again once
// older than --oidc-recheck (the cookie renewed): refused, it ends;
// with the provider away, the request fails (errProviderAway) and the
// session stays for when it is back.
func (u *Pages) CurrentAccount(w http.ResponseWriter, r *http.Request) (*accounts.Account, web.Session, error) {
	var s web.Session
	if !u.Cookies.Get(r, web.SessionCookie, &s) {
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
				u.Cookies.Clear(w, r, web.SessionCookie)
				return nil, s, nil
			case err != nil:
				return nil, s, &web.ProviderAwayError{Err: err}
			}
			if err := u.setSession(w, r, fresh); err != nil {
				return nil, s, err
			}
			s = fresh
		}
	}
	acct, err := u.Accounts.Get(r.Context(), s.Account)
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

// RequireAccount sends people who are not logged in to the log-in page.
func (u *Pages) RequireAccount(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		acct, s, err := u.CurrentAccount(w, r)
		switch {
		case err != nil:
			u.Fail(w, r, err)
			return
		case acct == nil:
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		m := team.NewMember(acct, s)
		if err := u.JoinTeam(w, r, acct, m); err != nil {
			u.Fail(w, r, err)
			return
		}
		if m.Team.Namespace == "" && !strings.HasPrefix(r.URL.Path, "/teams") {
			// No team at all: only the teams page, to make one, serves.
			http.Redirect(w, r, "/teams", http.StatusSeeOther)
			return
		}
		// Pages act in the team's namespace, as the person.
		acting := *acct
		acting.Namespace = m.Team.Namespace
		ctx := web.WithMember(web.WithAccount(r.Context(), &acting), m)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// Home sends people to their connections, or to log in.
func (u *Pages) Home(w http.ResponseWriter, r *http.Request) error {
	if !u.loggedIn(w, r) {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
	}
	return nil
}

// loggedIn sends a logged-in person on to their connections and says so.
func (u *Pages) loggedIn(w http.ResponseWriter, r *http.Request) bool {
	acct, _, err := u.CurrentAccount(w, r)
	if err != nil || acct == nil {
		return false
	}
	http.Redirect(w, r, "/connections", http.StatusSeeOther)
	return true
}

// SignUpForm answers GET /signup.
func (u *Pages) SignUpForm(w http.ResponseWriter, r *http.Request) error {
	if u.loggedIn(w, r) || u.signUpClosed(w, r) {
		return nil
	}
	return u.signUpPage("")(w, r, http.StatusOK, web.Problems{})
}

// signUpPage draws the sign-up form, filled with email.
func (u *Pages) signUpPage(email string) web.DrawForm {
	return func(w http.ResponseWriter, r *http.Request, status int, problem web.Problems) error {
		u.Render(w, r, status, "signup", web.Page{Title: "Create your account", Error: problem.Form, Errors: problem.Fields,
			Form: map[string]string{"email": email}, Data: accounts.MinPassword})
		return nil
	}
}

// signUpClosed answers a sign-up where the operator closed it.
func (u *Pages) signUpClosed(w http.ResponseWriter, r *http.Request) bool {
	if u.signUpOpen {
		return false
	}
	u.Render(w, r, http.StatusForbidden, "message", web.Page{Title: "Sign-up is closed",
		Message: "This server does not take new accounts. Ask its operator for one."})
	return true
}

// SignUp answers POST /signup.
func (u *Pages) SignUp(w http.ResponseWriter, r *http.Request) error {
	if u.signUpClosed(w, r) {
		return nil
	}
	email, password := r.PostFormValue("email"), r.PostFormValue("password")
	// Every mistake at once; SignUp checks them again.
	mistakes := web.FieldErrors{}
	for _, err := range []error{accounts.CheckEmail(email), accounts.CheckPassword(password)} {
		if err != nil {
			mistakes.Add(fieldOf(err), err.Error())
		}
	}
	if err := mistakes.Err(); err != nil {
		return web.OnForm(err, u.signUpPage(email))
	}
	acct, err := u.Accounts.SignUp(r.Context(), email, password)
	web.NoteAccount(r, acct)
	switch {
	case errors.Is(err, accounts.ErrBusy):
		u.busy(w, r)
		return nil
	case errors.Is(err, accounts.ErrFull):
		u.Full(w, r, err)
		return nil
	case fieldOf(err) != "":
		return web.OnForm(web.FieldErrors{fieldOf(err): err.Error()}, u.signUpPage(email))
	case err != nil:
		return err
	}
	u.MakeFilesKey(r.Context(), acct.Namespace)
	return u.startSession(w, r, acct, "/connections/new")
}

// LogInForm answers GET /login.
func (u *Pages) LogInForm(w http.ResponseWriter, r *http.Request) error {
	if u.loggedIn(w, r) {
		return nil
	}
	if !u.passwords {
		http.Redirect(w, r, "/login/oidc", http.StatusSeeOther)
		return nil
	}
	return u.logInPage("")(w, r, http.StatusOK, web.Problems{})
}

// logInPage draws the log-in form, filled with email.
func (u *Pages) logInPage(email string) web.DrawForm {
	return func(w http.ResponseWriter, r *http.Request, status int, problem web.Problems) error {
		var sso string
		if u.oidc != nil {
			sso = u.oidc.opts.Name
		}
		u.Render(w, r, status, "login", web.Page{Title: "Log in", Error: problem.Form, Errors: problem.Fields, Form: map[string]string{"email": email},
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

// LogIn answers POST /login.
func (u *Pages) LogIn(w http.ResponseWriter, r *http.Request) error {
	if !u.passwords {
		u.Render(w, r, http.StatusForbidden, "message", web.Page{Title: "Passwords are off",
			Message: "This server signs people in with its identity provider only."})
		return nil
	}
	email := r.PostFormValue("email")
	if ok, retry, message := u.logInAllowed(r, email); !ok {
		u.TooMany(w, r, retry, message)
		return nil
	}
	acct, err := u.Accounts.LogIn(r.Context(), email, r.PostFormValue("password"))
	web.NoteAccount(r, acct)
	switch {
	case errors.Is(err, accounts.ErrWrongCredentials):
		return &web.FormError{Problem: web.Problems{Form: err.Error()}, Status: http.StatusUnauthorized, Form: u.logInPage(email)}
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
func (u *Pages) settle(w http.ResponseWriter, r *http.Request, acct *accounts.Account, groups []string) {
	ctx := r.Context()
	if !acct.NoOwnTeam {
		if err := u.Accounts.EnsureQuota(ctx, acct); err != nil {
			u.Log.Warn("setting an account's quota", "namespace", acct.Namespace, "error", err)
		}
		u.MakeFilesKey(ctx, acct.Namespace)
	}
	others, err := u.OtherTeams(ctx, team.NewMember(acct, web.Session{Groups: groups}))
	if err != nil {
		u.Log.Warn("listing a person's teams", "error", err)
		return
	}
	if acct.NoOwnTeam {
		u.Notify(w, r, "Choose the team to work in: "+web.Count(len(others), "team has", "teams have")+" added you. Or make a team of your own.")
		return
	}
	// Teams of owners no one vouched for are on the Teams page, marked:
	// a stranger's team name is not said here.
	others = slices.DeleteFunc(others, func(t accounts.Team) bool { return t.Unverified })
	if len(others) == 0 {
		return
	}
	first := others[0].Title()
	if len(others) > 1 {
		first += " and " + web.Count(len(others)-1, "other team", "other teams")
	}
	u.Notify(w, r, "You are also a member of "+first+". Switch teams from your account menu.")
}

// logInAllowed applies the log-in limits to one on the account of email:
// a browser that logged in to it before has a bucket of its own, which no
// one filling the other limits holds up; any other shares its address's,
// then (for a valid email) its address's on the account, then the
// account's.
func (u *Pages) logInAllowed(r *http.Request, email string) (bool, time.Duration, string) {
	normalized, err := accounts.NormalizeEmail(email)
	if known := (web.Device{}); err == nil && u.Cookies.Get(r, web.DeviceCookie, &known) && known.Email == normalized {
		ok, retry := u.Limits.Device.Allow(known.ID)
		return ok, retry, "Too many attempts to log in from this browser. Wait a minute, then try again."
	}
	address := u.Clients.Key(r)
	if ok, retry := u.Limits.Auth.Allow(address); !ok {
		return false, retry, web.TooManyFromAddress
	}
	if err != nil {
		return true, 0, ""
	}
	if ok, retry := u.Limits.Email.Allow(normalized + " " + address); !ok {
		return false, retry, "Too many attempts to log in to this account from your address. Wait a minute, then try again."
	}
	ok, retry := u.Limits.Account.Allow(normalized)
	return ok, retry, "Too many attempts to log in to this account. Wait a minute, then try again; " +
		"a browser you have logged in to this account with before is not held up."
}

// busy answers a log-in or sign-up that found every password-check slot
// taken.
func (u *Pages) busy(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Retry-After", "2")
	u.Render(w, r, http.StatusServiceUnavailable, "message", web.Page{Title: "Busy", Message: accounts.ErrBusy.Error()})
}

// startSession logs the browser in to acct, and marks it as one that has.
func (u *Pages) startSession(w http.ResponseWriter, r *http.Request, acct *accounts.Account, next string) error {
	known := web.Device{Email: acct.Email}
	if !u.Cookies.Get(r, web.DeviceCookie, &known) || known.Email != acct.Email {
		known = web.Device{Email: acct.Email, ID: rand.Text()}
	}
	if err := errors.Join(u.setSession(w, r, web.Session{Account: acct.ID, Epoch: acct.Session}),
		u.Cookies.Set(w, r, web.DeviceCookie, known)); err != nil {
		return err
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

// startSSOSession logs the browser in with the session an OpenID provider
// signed in.
func (u *Pages) startSSOSession(w http.ResponseWriter, r *http.Request, s web.Session, next string) error {
	if err := u.setSession(w, r, s); err != nil {
		return err
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

// setSession sets the session cookie. A provider's ID token can make it
// longer than browsers keep: then it goes without, and logging out at the
// provider names only the client.
func (u *Pages) setSession(w http.ResponseWriter, r *http.Request, s web.Session) error {
	err := u.Cookies.Set(w, r, web.SessionCookie, s)
	if err != nil && s.IDToken != "" {
		s.IDToken = ""
		err = u.Cookies.Set(w, r, web.SessionCookie, s)
	}
	return err
}

// LogOut ends every session of the account, not only this browser's: a
// copied cookie stops working too. A session a provider signed in ends
// there too, where the provider lets clients end them.
func (u *Pages) LogOut(w http.ResponseWriter, r *http.Request) error {
	var s web.Session
	signedIn := u.Cookies.Get(r, web.SessionCookie, &s)
	if signedIn {
		acct, err := u.Accounts.Get(r.Context(), s.Account)
		web.NoteAccount(r, acct)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return err
		case subtle.ConstantTimeCompare([]byte(acct.Session), []byte(s.Epoch)) == 1:
			if err := u.Accounts.EndSessions(r.Context(), acct.ID); err != nil {
				return err
			}
		}
	}
	u.Cookies.Clear(w, r, web.SessionCookie)
	u.Cookies.Clear(w, r, web.TeamCookie)
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

// LoggedOut is where a log-out ends, here or at the provider.
func (u *Pages) LoggedOut(w http.ResponseWriter, r *http.Request) error {
	u.Render(w, r, http.StatusOK, "message", web.Page{Title: "Logged out", Message: "You have logged out."})
	return nil
}

// fieldOf is the sign-up form's field that err, a sign-up's, says to
// change ("" when it is not the person's to change).
func fieldOf(err error) string {
	switch {
	case errors.Is(err, accounts.ErrInvalidEmail), errors.Is(err, accounts.ErrEmailTaken):
		return "email"
	case errors.Is(err, accounts.ErrShortPassword), errors.Is(err, accounts.ErrLongPassword):
		return "password"
	}
	return ""
}
