package web

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/sftpgate/sftpgate/internal/words"
	"github.com/sftpgate/sftpgate/webui/accounts"
)

// Page is what every template gets.
type Page struct {
	Title   string
	Account *accounts.Account
	// Message is a notice, Error a problem, for the person; Notice what
	// the form they sent last did (notify).
	Message, Error, Notice string
	// Form holds submitted values, so that a form comes back filled;
	// Errors what to fix, beside each field, by the field's name.
	Form, Errors map[string]string
	// Data is the page's own content.
	Data any
	// Refresh reloads the page without JavaScript while a test runs.
	Refresh bool
	// Team is the team the person acts in, Role theirs there: the pages
	// offer what the role may do (RBAC decides what it may).
	Team accounts.Team
	Role string
	// Name is the page's template, for the browser tests' walk.
	Name string
}

// Can says whether the page's role is role or above it.
func (p Page) Can(role string) bool { return RoleRank(p.Role) >= RoleRank(role) }

var funcs = template.FuncMap{"ago": Ago, "when": when, "count": Count, "size": Size, "pageSize": func() int { return PageSize },
	"fieldError": fieldError, "invalid": invalid}

// Size says a file's size in bytes, in words.
func Size(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// Ago says when t was, in words ("3 minutes ago"); a time that never
// was is a page's to say.
func Ago(t time.Time) string { return words.Ago(t, time.Now()) }

// when is t as a date, a time and its zone (UTC), marked for app.js to
// say in the reader's own zone.
func when(t time.Time) template.HTML {
	return template.HTML(fmt.Sprintf(`<time datetime="%s" data-local>%s</time>`, t.UTC().Format(time.RFC3339), template.HTMLEscapeString(words.Time(t)))) //nolint:gosec // a formatted time, escaped
}

// fieldError is the words of what to fix in field, to put beside it
// (nothing when it is fine).
func fieldError(errs map[string]string, field string) template.HTML {
	msg, ok := errs[field]
	if !ok {
		return ""
	}
	return template.HTML(`<p class="field-error" id="` + template.HTMLEscapeString(field) + `-error">` + template.HTMLEscapeString(words.Sentence(msg)) + `</p>`) //nolint:gosec // escaped
}

// invalid is a field's attributes that tie it to its words: its error's,
// when it has one, and those of described (its hints' ids).
func invalid(errs map[string]string, field string, described ...string) template.HTMLAttr {
	attrs := ""
	if _, ok := errs[field]; ok {
		attrs = `aria-invalid="true" `
		described = append([]string{field + "-error"}, described...)
	}
	if len(described) == 0 {
		return template.HTMLAttr(attrs) //nolint:gosec // fixed words
	}
	return template.HTMLAttr(attrs + `aria-describedby="` + template.HTMLEscapeString(strings.Join(described, " ")) + `"`) //nolint:gosec // escaped
}

// Count is n with its noun, singular or plural.
func Count(n int, one, many string) string { return words.Count(int64(n), one, many) }

// Assets are the pages' templates and static files.
//
//go:embed templates static
var Assets embed.FS

// ParsePages parses each page with the layout it fills in.
func ParsePages() (map[string]*template.Template, error) {
	files, err := fs.Glob(Assets, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, f := range files {
		name := strings.TrimSuffix(path.Base(f), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(Assets, "templates/layout.html", f)
		if err != nil {
			return nil, err
		}
		pages[name] = t
	}
	return pages, nil
}

// Render writes a page; a template error becomes a 500, never half a page.
func (u *Core) Render(w http.ResponseWriter, r *http.Request, status int, name string, p Page) {
	if p.Account == nil {
		p.Account = AccountFrom(r.Context())
	}
	if m := MemberFrom(r.Context()); m != nil {
		p.Team, p.Role = m.Team, m.Role
	}
	p.Notice, p.Name = u.takeNotice(w, r), name
	var buf bytes.Buffer
	if err := u.Templates[name].Execute(&buf, p); err != nil {
		u.Log.Error("rendering a page", "page", name, "error", err, "requestID", middleware.GetReqID(r.Context()))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// PageSize is how many entries a folder's page shows.
const PageSize = 100
