package webui

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/sftpgate/sftpgate/webui/accounts"
)

// page is what every template gets.
type page struct {
	Title   string
	Account *accounts.Account
	// Message is a notice, Error a problem, for the person.
	Message string
	Error   string
	// Form holds submitted values, so that a form comes back filled.
	Form map[string]string
	// Data is the page's own content.
	Data any
	// Refresh reloads the page without JavaScript while a test runs.
	Refresh bool
	// Team is the team the person acts in, Role theirs there: the pages
	// offer what the role may do (RBAC decides what it may).
	Team, Role string
}

// Can says whether the page's role is role or above it.
func (p page) Can(role string) bool { return roleRank(p.Role) >= roleRank(role) }

var funcs = template.FuncMap{"ago": ago, "size": size, "pageSize": func() int { return pageSize }}

// size says a file's size in bytes, in words.
func size(n int64) string {
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

// ago says when t was, in words.
func ago(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := time.Since(t).Round(time.Second)
	switch {
	case d < 5*time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%d seconds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d minutes ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d hours ago", int(d.Hours()))
	}
	return t.UTC().Format("2 Jan 2006")
}

// parsePages parses each page with the layout it fills in.
func parsePages() (map[string]*template.Template, error) {
	files, err := fs.Glob(assets, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, f := range files {
		name := strings.TrimSuffix(path.Base(f), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html", f)
		if err != nil {
			return nil, err
		}
		pages[name] = t
	}
	return pages, nil
}

// render writes a page; a template error becomes a 500, never half a page.
func (u *ui) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	if p.Account == nil {
		p.Account = accountFrom(r.Context())
	}
	if m := memberFrom(r.Context()); m != nil {
		p.Team, p.Role = m.team.Name, m.role
	}
	var buf bytes.Buffer
	if err := u.pages[name].Execute(&buf, p); err != nil {
		u.log.Error("rendering a page", "page", name, "error", err, "requestID", middleware.GetReqID(r.Context()))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}
