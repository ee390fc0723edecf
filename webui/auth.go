package webui

import (
	"context"
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/sftpgate/sftpgate/webui/accounts"
)

type accountKey struct{}

func accountFrom(ctx context.Context) *accounts.Account {
	a, _ := ctx.Value(accountKey{}).(*accounts.Account)
	return a
}

// currentAccount is the account of the request's session, if any.
func (u *ui) currentAccount(r *http.Request) (*accounts.Account, error) {
	var s session
	if !u.cookies.get(r, sessionCookie, &s) {
		return nil, nil
	}
	acct, err := u.accounts.Get(r.Context(), s.Account)
	if apierrors.IsNotFound(err) {
		return nil, nil // the account is gone
	}
	return acct, err
}

// requireAccount sends people who are not logged in to the log-in page.
func (u *ui) requireAccount(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		acct, err := u.currentAccount(r)
		switch {
		case err != nil:
			u.serverError(w, r, err)
		case acct == nil:
			http.Redirect(w, r, "/login", http.StatusSeeOther)
		default:
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), accountKey{}, acct)))
		}
	})
}

func (u *ui) home(w http.ResponseWriter, r *http.Request) {
	if acct, _ := u.currentAccount(r); acct != nil {
		http.Redirect(w, r, "/connections", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

func (u *ui) signUpForm(w http.ResponseWriter, r *http.Request) {
	u.render(w, r, http.StatusOK, "signup", page{Title: "Create your account", Data: accounts.MinPassword})
}

func (u *ui) signUp(w http.ResponseWriter, r *http.Request) {
	email, password := r.PostFormValue("email"), r.PostFormValue("password")
	acct, err := u.accounts.SignUp(r.Context(), email, password)
	if err != nil {
		if isPersonError(err) {
			u.render(w, r, http.StatusUnprocessableEntity, "signup", page{Title: "Create your account", Error: err.Error(),
				Form: map[string]string{"email": email}, Data: accounts.MinPassword})
			return
		}
		u.serverError(w, r, err)
		return
	}
	u.startSession(w, r, acct, "/connections/new")
}

func (u *ui) logInForm(w http.ResponseWriter, r *http.Request) {
	u.render(w, r, http.StatusOK, "login", page{Title: "Log in"})
}

func (u *ui) logIn(w http.ResponseWriter, r *http.Request) {
	email := r.PostFormValue("email")
	acct, err := u.accounts.LogIn(r.Context(), email, r.PostFormValue("password"))
	if errors.Is(err, accounts.ErrWrongCredentials) {
		u.render(w, r, http.StatusUnauthorized, "login", page{Title: "Log in", Error: err.Error(), Form: map[string]string{"email": email}})
		return
	}
	if err != nil {
		u.serverError(w, r, err)
		return
	}
	u.startSession(w, r, acct, "/connections")
}

func (u *ui) startSession(w http.ResponseWriter, r *http.Request, acct *accounts.Account, next string) {
	if err := u.cookies.set(w, r, sessionCookie, session{Account: acct.ID}, sessionTTL); err != nil {
		u.serverError(w, r, err)
		return
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (u *ui) logOut(w http.ResponseWriter, r *http.Request) {
	u.cookies.clear(w, r, sessionCookie)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// isPersonError: an error whose message tells the person what to change.
func isPersonError(err error) bool {
	var pe *personError
	return errors.As(err, &pe) || errors.Is(err, accounts.ErrInvalidEmail) || errors.Is(err, accounts.ErrShortPassword) ||
		errors.Is(err, accounts.ErrLongPassword) || errors.Is(err, accounts.ErrEmailTaken)
}

// personError is a form value to fix, in words for the person.
type personError struct{ msg string }

func (e *personError) Error() string { return e.msg }
