package webui

import (
	"context"
	"errors"
	"net/http"
	"path"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/uploadrecord"
	"github.com/sftpgate/sftpgate/webui/accounts"
)

// auditNote is what a handler tells its audit record that the request
// does not: the account that signed up or tried to log in, the name of an
// object it made.
type auditNote struct {
	account *accounts.Account
	object  string
	// share is the link a request used, with no account.
	share *v1alpha1.ShareLink
}

type auditKey struct{}

// noteAccount names the account r acted as, for its record.
func noteAccount(r *http.Request, acct *accounts.Account) {
	if n, ok := r.Context().Value(auditKey{}).(*auditNote); ok {
		n.account = acct
	}
}

// noteObject names the object r made (kind/name), for its record.
func noteObject(r *http.Request, kind, name string) {
	if n, ok := r.Context().Value(auditKey{}).(*auditNote); ok {
		n.object = kind + "/" + name
	}
}

// noteShare names the share link r used, for its record.
func noteShare(r *http.Request, share *v1alpha1.ShareLink) {
	if n, ok := r.Context().Value(auditKey{}).(*auditNote); ok {
		n.share = share
	}
}

// statusWriter keeps the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (downloads
// stream).
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// audited records each request h serves as action: who (the account),
// from where, what (what says: the object and paths the request names),
// and the result. A request of no account (a log-in to an unknown
// email) is only logged, in no tenant's trail.
func (u *ui) audited(action string, what func(*http.Request, *audit.Record), h pageFunc) pageFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		note := &auditNote{account: accountFrom(r.Context())}
		r = r.WithContext(context.WithValue(r.Context(), auditKey{}, note))
		sw := &statusWriter{ResponseWriter: w}
		err := h(sw, r)
		rec := audit.Record{Action: "webui." + action, Client: u.clients.key(r), RequestID: middleware.GetReqID(r.Context()),
			Result: resultOf(sw.status, err)}
		if a := note.account; a != nil {
			rec.Namespace, rec.Actor = a.Namespace, audit.Actor{Kind: audit.ActorAccount, Name: a.Email}
		} else if s := note.share; s != nil {
			rec.Namespace, rec.Actor, rec.Connection = s.Namespace, audit.Actor{Kind: audit.ActorShareLink, Name: s.Name}, s.Spec.Connection
		} else {
			rec.Actor = audit.Actor{Kind: audit.ActorAccount, Name: r.PostFormValue("email")}
		}
		if what != nil {
			what(r, &rec)
		}
		if note.object != "" {
			rec.Object = note.object
		}
		u.trail.Record(r.Context(), rec)
		return err
	}
}

// resultOf is a page's result in its record: ok, or what went wrong, from
// the error the handler returned or the status it answered with.
func resultOf(status int, err error) string {
	var (
		onForm  *formError
		mistake *personError
	)
	switch {
	case errors.As(err, &onForm):
		status = onForm.status
	case errors.As(err, &mistake):
		status = http.StatusUnprocessableEntity
	case errors.Is(err, errNotFound):
		status = http.StatusNotFound
	case err != nil:
		return "failed"
	}
	return audit.ResultOfStatus(status)
}

// The records' whats: the connection, object and files a request names.
type what = func(*http.Request, *audit.Record)

// all is each of whats in turn.
func all(whats ...what) what {
	return func(r *http.Request, rec *audit.Record) {
		for _, w := range whats {
			w(r, rec)
		}
	}
}

// onConnection: the connection of the URL's {name}.
func onConnection(r *http.Request, rec *audit.Record) { rec.Connection = chi.URLParam(r, "name") }

// urlNamed: the object of kind the URL's {param} names.
func urlNamed(kind, param string) what {
	return func(r *http.Request, rec *audit.Record) { rec.Object = kind + "/" + chi.URLParam(r, param) }
}

// formNamed: the object of kind the form's field names.
func formNamed(kind, field string) what {
	return func(r *http.Request, rec *audit.Record) {
		if name := r.PostFormValue(field); name != "" {
			rec.Object = kind + "/" + name
		}
	}
}

func queryPath(r *http.Request, rec *audit.Record) {
	rec.Paths = []string{browsePath(r.URL.Query().Get("path"))}
}

func formPath(r *http.Request, rec *audit.Record) {
	rec.Paths = []string{browsePath(r.PostFormValue("path"))}
}

func newFolderPath(r *http.Request, rec *audit.Record) {
	rec.Paths = []string{path.Join(browsePath(r.PostFormValue("dir")), r.PostFormValue("name"))}
}

func renamePaths(r *http.Request, rec *audit.Record) {
	from := browsePath(r.PostFormValue("path"))
	rec.Paths = []string{from, path.Join(path.Dir(from), r.PostFormValue("name"))}
}

// auditedUploads records an upload's start (tus's POST), with the path
// its metadata names; its parts are the gateway's records.
func (u *ui) auditedUploads(action string, what what, h pageFunc) pageFunc {
	audited := u.audited(action, what, h)
	return func(w http.ResponseWriter, r *http.Request) error {
		if r.Method != http.MethodPost {
			return h(w, r)
		}
		return audited(w, r)
	}
}

func uploadPath(r *http.Request, rec *audit.Record) {
	if p := uploadrecord.RequestedPath(r); p != "" {
		rec.Paths = []string{p}
	}
}

// sharePath: the file or folder a share link's request reached.
func sharePath(r *http.Request, rec *audit.Record) {
	if n, ok := r.Context().Value(auditKey{}).(*auditNote); ok && n.share != nil {
		rec.Paths = []string{path.Join(n.share.Spec.Path, browsePath(r.URL.Query().Get("path")))}
	}
}
