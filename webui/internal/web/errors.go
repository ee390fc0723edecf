package web

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/sftpgate/sftpgate/internal/ratelimit"
)

// A page's handler returns an error rather than answer it, as pkgsite's
// do, and serve is the one place that answers:
//
//   - a person's mistake on a form (onForm): the form again, filled, with
//     the words of what to fix;
//   - another person's mistake (*personError): a page with its words;
//   - errNotFound: the 404 page;
//   - *providerAwayError: the 503 page that asks to try again;
//   - anything else: the 500 page, which says nothing of the cause, and
//     one log line naming it and the request id.

// PageFunc is a page's handler.
type PageFunc func(w http.ResponseWriter, r *http.Request) error

// ErrNotFound is what a page is about: not there, or not the account's.
var ErrNotFound = errors.New("not found")

// PersonError is a form value to fix, in words for the person.
type PersonError struct{ Msg string }

func (e *PersonError) Error() string { return e.Msg }

// ProviderAwayError says the OpenID provider could not be asked whether a
// session still holds. The request fails; the session stays.
type ProviderAwayError struct{ Err error }

func (e *ProviderAwayError) Error() string { return "asking the OpenID provider: " + e.Err.Error() }
func (e *ProviderAwayError) Unwrap() error { return e.Err }

// FieldErrors are a form's mistakes, all at once, each in words for the
// person, by the field it is about ("" for the form as a whole).
type FieldErrors map[string]string

// Add notes msg for field, unless the field has a problem already: the
// first is the one to fix first.
func (f FieldErrors) Add(field, msg string) {
	if _, ok := f[field]; !ok {
		f[field] = msg
	}
}

func (f FieldErrors) Error() string {
	msgs := slices.Sorted(maps.Values(f))
	return strings.Join(msgs, "; ")
}

// Err is f, or nil when there is nothing to fix.
func (f FieldErrors) Err() error {
	if len(f) == 0 {
		return nil
	}
	return f
}

// Problems are what a form drawn again shows: words for the form as a
// whole, and beside each field that needs a change.
type Problems struct {
	Form   string
	Fields map[string]string
}

// DrawForm draws a form again, with status and what to fix.
type DrawForm func(w http.ResponseWriter, r *http.Request, status int, problem Problems) error

// FormError is a person's mistake to show on the form it came from.
type FormError struct {
	Problem Problems
	Status  int
	Form    DrawForm
}

func (e *FormError) Error() string { return e.Problem.Form }

// OnForm says that err, if a person's mistakes, is shown on the form that
// form draws, with status 422; other errors pass as they are.
func OnForm(err error, form DrawForm) error {
	var (
		pe     *PersonError
		fields FieldErrors
	)
	switch {
	case errors.As(err, &fields):
		p := Problems{Form: fields[""], Fields: maps.Clone(fields)}
		delete(p.Fields, "")
		return &FormError{Problem: p, Status: http.StatusUnprocessableEntity, Form: form}
	case errors.As(err, &pe):
		return &FormError{Problem: Problems{Form: pe.Msg}, Status: http.StatusUnprocessableEntity, Form: form}
	}
	return err
}

// Serve is h, its error answered.
func (u *Core) Serve(h PageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			u.Fail(w, r, err)
		}
	}
}

// Fail answers err, as the top of this file says.
func (u *Core) Fail(w http.ResponseWriter, r *http.Request, err error) {
	var (
		onForm  *FormError
		mistake *PersonError
	)
	switch {
	case errors.As(err, &onForm):
		if err := onForm.Form(w, r, onForm.Status, onForm.Problem); err != nil {
			u.ServerError(w, r, err)
		}
	case errors.As(err, &mistake):
		u.Render(w, r, http.StatusUnprocessableEntity, "message", Page{Title: "Check what you sent", Message: mistake.Msg})
	case errors.Is(err, ErrNotFound):
		u.NotFound(w, r)
	case errors.As(err, new(*UnavailableError)):
		u.Log.Warn("serving a page", "error", err, "requestID", middleware.GetReqID(r.Context()), "path", loggedPath(r.URL.Path))
		w.Header().Set("Retry-After", "5")
		u.Render(w, r, http.StatusServiceUnavailable, "message", Page{Title: "Not available right now",
			Message: "The files could not be reached just now. Try again in a moment."})
	case errors.As(err, new(*ProviderAwayError)):
		_ = u.ProviderAway(w, r, err)
	default:
		u.ServerError(w, r, err)
	}
}

// NotFound answers a page that is not there.
func (u *Core) NotFound(w http.ResponseWriter, r *http.Request) {
	acct := AccountFrom(r.Context())
	if acct == nil && u.SignedIn != nil {
		acct = u.SignedIn(w, r) // for the navigation; none is fine
	}
	u.Render(w, r, http.StatusNotFound, "message", Page{Title: "Not found", Account: acct,
		Message: "There is nothing here. It may have been deleted, or the link is wrong."})
}

// ServerError logs err once and shows a page that says nothing of it.
func (u *Core) ServerError(w http.ResponseWriter, r *http.Request, err error) {
	id := middleware.GetReqID(r.Context())
	u.Log.Error("serving a page", "error", err, "requestID", id, "path", loggedPath(r.URL.Path))
	u.Render(w, r, http.StatusInternalServerError, "message", Page{Title: "Something went wrong",
		Message: "Something went wrong on our side. Try again in a moment; if it keeps happening, tell your administrator the request id " + id + "."})
}

// loggedPath is a request's path for the log: a share link's token,
// which opens the link, becomes "…".
func loggedPath(p string) string {
	rest, ok := strings.CutPrefix(p, "/s/")
	if !ok {
		return p
	}
	_, after, found := strings.Cut(rest, "/")
	if !found {
		return "/s/…"
	}
	return "/s/…/" + after
}

// WriteJSON answers v as JSON, for the pages' scripts.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Full answers a sign-up, or a first sign-in, refused because the accounts
// could run all the cluster lets them (err says how many): the operator
// learns it from the log.
func (u *Core) Full(w http.ResponseWriter, r *http.Request, err error) {
	u.Log.Warn("an account was refused: the accounts are at their total", "error", err)
	u.Render(w, r, http.StatusServiceUnavailable, "message", Page{Title: "No new accounts for now",
		Message: "This server has as many accounts as it can run. Ask its operator for one."})
}

// ProviderAway answers when the provider cannot be reached: the person
// tries again later, and the operator finds why in the log.
func (u *Core) ProviderAway(w http.ResponseWriter, r *http.Request, err error) error {
	u.Log.Warn("the OpenID provider does not answer", "error", err)
	w.Header().Set("Retry-After", "30")
	u.Render(w, r, http.StatusServiceUnavailable, "message", Page{Title: "Sign-in is unavailable",
		Message: "The identity provider does not answer. Try again in a moment."})
	return nil
}

// TooMany answers a request past a limit: 429, with when to try again.
func (u *Core) TooMany(w http.ResponseWriter, r *http.Request, retry time.Duration, message string) {
	w.Header().Set("Retry-After", ratelimit.RetryAfter(retry))
	u.Render(w, r, http.StatusTooManyRequests, "message", Page{Title: "Too many attempts", Message: message})
}

// UnavailableError is the gateway, or the server behind it, not
// answering now (a 5xx, or no answer at all): a moment later may, so it
// is never shown as the person's mistake, nor as a file not found.
type UnavailableError struct{ Cause string }

func (e *UnavailableError) Error() string {
	return "the gateway or the file server did not answer: " + e.Cause
}
