package webui

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5/middleware"
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

// pageFunc is a page's handler.
type pageFunc func(w http.ResponseWriter, r *http.Request) error

// errNotFound is what a page is about: not there, or not the account's.
var errNotFound = errors.New("not found")

// personError is a form value to fix, in words for the person.
type personError struct{ msg string }

func (e *personError) Error() string { return e.msg }

// providerAwayError: the OpenID provider could not be asked whether a
// session still holds. The request fails; the session stays.
type providerAwayError struct{ err error }

func (e *providerAwayError) Error() string { return "asking the OpenID provider: " + e.err.Error() }
func (e *providerAwayError) Unwrap() error { return e.err }

// fieldErrors are a form's mistakes, all at once, each in words for the
// person, by the field it is about ("" for the form as a whole).
type fieldErrors map[string]string

// add notes msg for field, unless the field has a problem already: the
// first is the one to fix first.
func (f fieldErrors) add(field, msg string) {
	if _, ok := f[field]; !ok {
		f[field] = msg
	}
}

func (f fieldErrors) Error() string {
	msgs := slices.Sorted(maps.Values(f))
	return strings.Join(msgs, "; ")
}

// err is f, or nil when there is nothing to fix.
func (f fieldErrors) err() error {
	if len(f) == 0 {
		return nil
	}
	return f
}

// problems are what a form drawn again shows: words for the form as a
// whole, and beside each field that needs a change.
type problems struct {
	form   string
	fields map[string]string
}

// drawForm draws a form again, with status and what to fix.
type drawForm func(w http.ResponseWriter, r *http.Request, status int, problem problems) error

// formError is a person's mistake to show on the form it came from.
type formError struct {
	problem problems
	status  int
	form    drawForm
}

func (e *formError) Error() string { return e.problem.form }

// onForm says that err, if a person's mistakes, is shown on the form that
// form draws, with status 422; other errors pass as they are.
func onForm(err error, form drawForm) error {
	var (
		pe     *personError
		fields fieldErrors
	)
	switch {
	case errors.As(err, &fields):
		p := problems{form: fields[""], fields: maps.Clone(fields)}
		delete(p.fields, "")
		return &formError{problem: p, status: http.StatusUnprocessableEntity, form: form}
	case errors.As(err, &pe):
		return &formError{problem: problems{form: pe.msg}, status: http.StatusUnprocessableEntity, form: form}
	}
	return err
}

// serve is h, its error answered.
func (u *ui) serve(h pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			u.fail(w, r, err)
		}
	}
}

// fail answers err, as the top of this file says.
func (u *ui) fail(w http.ResponseWriter, r *http.Request, err error) {
	var (
		onForm  *formError
		mistake *personError
	)
	switch {
	case errors.As(err, &onForm):
		if err := onForm.form(w, r, onForm.status, onForm.problem); err != nil {
			u.serverError(w, r, err)
		}
	case errors.As(err, &mistake):
		u.render(w, r, http.StatusUnprocessableEntity, "message", page{Title: "Check what you sent", Message: mistake.msg})
	case errors.Is(err, errNotFound):
		u.notFound(w, r)
	case errors.As(err, new(*unavailableError)):
		u.log.Warn("serving a page", "error", err, "requestID", middleware.GetReqID(r.Context()), "path", loggedPath(r.URL.Path))
		w.Header().Set("Retry-After", "5")
		u.render(w, r, http.StatusServiceUnavailable, "message", page{Title: "Not available right now",
			Message: "The files could not be reached just now. Try again in a moment."})
	case errors.As(err, new(*providerAwayError)):
		_ = u.providerAway(w, r, err)
	default:
		u.serverError(w, r, err)
	}
}

func (u *ui) notFound(w http.ResponseWriter, r *http.Request) {
	acct := accountFrom(r.Context())
	if acct == nil {
		acct, _, _ = u.currentAccount(w, r) // for the navigation; none is fine
	}
	u.render(w, r, http.StatusNotFound, "message", page{Title: "Not found", Account: acct,
		Message: "There is nothing here. It may have been deleted, or the link is wrong."})
}

// serverError logs err once and shows a page that says nothing of it.
func (u *ui) serverError(w http.ResponseWriter, r *http.Request, err error) {
	id := middleware.GetReqID(r.Context())
	u.log.Error("serving a page", "error", err, "requestID", id, "path", loggedPath(r.URL.Path))
	u.render(w, r, http.StatusInternalServerError, "message", page{Title: "Something went wrong",
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

// writeJSON answers v as JSON, for the pages' scripts.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
