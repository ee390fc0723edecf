package web

import (
	"cmp"
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

// An action's audit record is made in one place (record), from one note
// of what the request did: the route's what fills it from the request
// (the connection, object and paths its URL, query or form names), the
// handler with what only it learns (the account that signed up or tried
// to log in, the share link used, the name of an object it made).
type auditNote struct {
	// account is who acted; share the link a request used, with no
	// account.
	account *accounts.Account
	share   *v1alpha1.ShareLink
	// connection, object (kind/name) and paths are what the request
	// names.
	connection, object string
	paths              []string
}

type auditKey struct{}

func noteOf(r *http.Request) *auditNote {
	n, _ := r.Context().Value(auditKey{}).(*auditNote)
	if n == nil {
		return &auditNote{} // not audited: noted for no one
	}
	return n
}

// NoteAccount names the account r acted as, for its record.
func NoteAccount(r *http.Request, acct *accounts.Account) { noteOf(r).account = acct }

// NoteObject names the object r made (kind/name), for its record: it
// wins over one the request names.
func NoteObject(r *http.Request, kind, name string) { noteOf(r).object = kind + "/" + name }

// NoteShare names the share link r used, for its record.
func NoteShare(r *http.Request, share *v1alpha1.ShareLink) { noteOf(r).share = share }

// named notes the object the request names, unless its handler named the
// one it made.
func (n *auditNote) named(kind, name string) {
	if n.object == "" {
		n.object = kind + "/" + name
	}
}

// record is r's audit record, as action, its handler having answered
// with status and err: the one place the web UI makes one. A request of
// no account and no link (a log-in to an unknown email) is recorded in
// no tenant's trail, only logged.
func (u *Core) record(r *http.Request, action string, n *auditNote, status int, err error) audit.Record {
	rec := audit.Record{Action: "webui." + action, Client: u.Clients.Key(r), RequestID: middleware.GetReqID(r.Context()),
		Result: resultOf(status, err), Connection: n.connection, Object: n.object, Paths: n.paths}
	switch {
	case n.account != nil:
		rec.Namespace, rec.Actor = n.account.Namespace, audit.Actor{Kind: audit.ActorAccount, Name: n.account.Email}
	case n.share != nil:
		rec.Namespace, rec.Actor = n.share.Namespace, audit.Actor{Kind: audit.ActorShareLink, Name: n.share.Name}
		rec.Connection = cmp.Or(rec.Connection, n.share.Spec.Connection)
	default:
		// The email a log-in or sign-up form named, as its handler read it
		// (within the form's bound): never a body read here, unbounded.
		rec.Actor = audit.Actor{Kind: audit.ActorAccount, Name: r.PostForm.Get("email")}
	}
	return rec
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

// Audited records each request h serves as action: who, from where,
// what (what notes what the request names, once h has answered) and the
// result.
func (u *Core) Audited(action string, what What, h PageFunc) PageFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		note := &auditNote{account: AccountFrom(r.Context())}
		r = r.WithContext(context.WithValue(r.Context(), auditKey{}, note))
		sw := &statusWriter{ResponseWriter: w}
		err := h(sw, r)
		if what != nil {
			what(r, note)
		}
		u.Trail.Record(r.Context(), u.record(r, action, note, sw.status, err))
		return err
	}
}

// resultOf is a page's result in its record: ok, or what went wrong, from
// the error the handler returned or the status it answered with.
func resultOf(status int, err error) string {
	var (
		onForm  *FormError
		mistake *PersonError
	)
	switch {
	case errors.As(err, &onForm):
		status = onForm.Status
	case errors.As(err, &mistake):
		status = http.StatusUnprocessableEntity
	case errors.Is(err, ErrNotFound):
		status = http.StatusNotFound
	case err != nil:
		return "failed"
	}
	return audit.ResultOfStatus(status)
}

// What notes, for a request's record, the connection, object and files
// the request names.
type What = func(*http.Request, *auditNote)

// All is each of whats in turn.
func All(whats ...What) What {
	return func(r *http.Request, n *auditNote) {
		for _, w := range whats {
			w(r, n)
		}
	}
}

// OnEndpoint notes the object of kind the URL's {name} names (an
// SftpConnection by its name, another kind as Kind/name): what the
// request's files are on.
func OnEndpoint(kind string) What {
	return func(r *http.Request, n *auditNote) {
		n.connection = v1alpha1.ConnectionReference{Kind: kind, Name: chi.URLParam(r, "name")}.String()
	}
}

// FormConnection notes the object the form's field names as a
// ConnectionReference does ("name" or "Kind/name"): what the request's
// files are on.
func FormConnection(field string) What {
	return func(r *http.Request, n *auditNote) {
		if v := r.PostFormValue(field); v != "" {
			n.connection = v1alpha1.ParseConnectionReference(v).String()
		}
	}
}

// URLNamed notes the object of kind the URL's {param} names.
func URLNamed(kind, param string) What {
	return func(r *http.Request, n *auditNote) { n.named(kind, chi.URLParam(r, param)) }
}

// FormNamed notes the object of kind the form's field names.
func FormNamed(kind, field string) What {
	return func(r *http.Request, n *auditNote) {
		if name := r.PostFormValue(field); name != "" {
			n.named(kind, name)
		}
	}
}

// QueryPath notes the path of the query (?path=).
func QueryPath(r *http.Request, n *auditNote) {
	n.paths = []string{BrowsePath(r.URL.Query().Get("path"))}
}

// FormPath notes the path of the form.
func FormPath(r *http.Request, n *auditNote) {
	n.paths = []string{BrowsePath(r.PostFormValue("path"))}
}

// NewFolderPath notes the folder a form makes.
func NewFolderPath(r *http.Request, n *auditNote) {
	n.paths = []string{path.Join(BrowsePath(r.PostFormValue("dir")), r.PostFormValue("name"))}
}

// RenamePaths notes a rename's two paths.
func RenamePaths(r *http.Request, n *auditNote) {
	from := BrowsePath(r.PostFormValue("path"))
	n.paths = []string{from, path.Join(path.Dir(from), r.PostFormValue("name"))}
}

// AuditedUploads records an upload's start (tus's POST), with the path
// its metadata names; its parts are the gateway's records.
func (u *Core) AuditedUploads(action string, what What, h PageFunc) PageFunc {
	audited := u.Audited(action, what, h)
	return func(w http.ResponseWriter, r *http.Request) error {
		if r.Method != http.MethodPost {
			return h(w, r)
		}
		return audited(w, r)
	}
}

// UploadPath notes the file a resumable upload makes.
func UploadPath(r *http.Request, n *auditNote) {
	if p := uploadrecord.RequestedPath(r); p != "" {
		n.paths = []string{p}
	}
}

// SharePath notes the file or folder a share link's request reached.
func SharePath(r *http.Request, n *auditNote) {
	if n.share != nil {
		n.paths = []string{path.Join(n.share.Spec.Path, BrowsePath(r.URL.Query().Get("path")))}
	}
}
