package tenant

import (
	"errors"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/webui/internal/gw"
	"github.com/sftpgate/sftpgate/webui/internal/web"
)

// The file browser: a connection's folders, paged and sorted by name,
// with a breadcrumb; new folders, renames, deletions after a
// confirmation, downloads, text and images shown in place, and uploads by
// choice or drag and drop, resumable (tus, through uploadProxy). Every
// page and every byte goes through the gateway as the account (its
// file browser key, fileskey.go): the connection's root and its checks
// hold exactly as through the API, and files stream, never held whole.

// crumb is one step of a breadcrumb.
type crumb struct{ Name, Path string }

// filesPage is the data of a folder's page.
type filesPage struct {
	Conn connView
	// Namespace is the account's: the browser keeps unfinished uploads
	// under it, apart from another account's on the same browser.
	Namespace string
	Dir       string
	Crumbs    []crumb
	Entries   []gw.Entry
	// Next is the name the next page starts after; "" on the last.
	Next, Parent string
	Failure      string
	// Missing: there is no such folder.
	Missing bool
}

// untilReady sends a file page of a connection whose test failed to the
// connection's page, which says why and how to fix it: its files cannot
// be reached meanwhile. It says whether it did. (One being tested again
// serves as it did.)
func (u *Pages) untilReady(w http.ResponseWriter, r *http.Request, c v1alpha1.Endpoint) bool {
	v := u.endpointView(c)
	if v.State != "failed" {
		return false
	}
	said := "The files of " + c.GetName() + " cannot be reached until its test passes: " + v.Headline + "."
	if v.Slug == "" {
		said = "The files of " + c.GetName() + " cannot be reached: " + v.Message
	}
	to := base(c) // its page, which says why and how to fix it
	if _, own := c.(*v1alpha1.SftpConnection); !own {
		// The list, beside which this page says why.
		to = "/connections"
		if v.Slug != "" {
			said += " " + v.Message
		}
	}
	u.Notify(w, r, said)
	http.Redirect(w, r, to, http.StatusSeeOther)
	return true
}

// missing says whether the gateway finds nothing at p.
func (u *Pages) missing(r *http.Request, token string, c v1alpha1.Endpoint, p string) bool {
	err := u.CallAs(r.Context(), token, c, "stat", map[string]any{"path": p}, nil)
	f, ok := errors.AsType[*gw.GatewayFailure](err)
	return ok && f.Code == "not_found"
}

// Folder lists a folder: a page of it, after a name.
func (u *Pages) Folder(w http.ResponseWriter, r *http.Request, c v1alpha1.Endpoint) error {
	if u.untilReady(w, r, c) {
		return nil
	}
	dir := web.BrowsePath(r.URL.Query().Get("path"))
	token, err := u.FilesKey(r.Context(), c.GetNamespace())
	if err != nil {
		return err
	}
	data := filesPage{Conn: u.endpointView(c), Namespace: c.GetNamespace(), Dir: dir, Crumbs: crumbs(dir)}
	if dir != "/" {
		data.Parent = path.Dir(dir)
	}
	data.Entries, data.Next, data.Failure, err = u.ListPage(r, token, c, dir)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if data.Failure != "" && u.missing(r, token, c, dir) {
		status, data.Missing = http.StatusNotFound, true
	}
	u.Render(w, r, status, "files", web.Page{Title: c.GetName() + ": " + dir, Data: data})
	return nil
}

func crumbs(dir string) []crumb {
	out := []crumb{{Name: "root", Path: "/"}}
	at := "/"
	for part := range strings.SplitSeq(strings.Trim(dir, "/"), "/") {
		if part == "" {
			continue
		}
		at = path.Join(at, part)
		out = append(out, crumb{Name: part, Path: at})
	}
	return out
}

// maxView is the most of a text file shown in place.
const maxView = 256 << 10

// viewPage is the data of a file shown in place.
type viewPage struct {
	Conn         connView
	Path, Dir    string
	Crumbs       []crumb
	Image        bool
	Text         string
	Truncated    bool
	Failure      string
	DownloadPath string
	// Missing: there is no such file.
	Missing bool
}

// ShowFile shows a text file's start, or an image, in place.
func (u *Pages) ShowFile(w http.ResponseWriter, r *http.Request, c v1alpha1.Endpoint) error {
	if u.untilReady(w, r, c) {
		return nil
	}
	p := web.BrowsePath(r.URL.Query().Get("path"))
	data := viewPage{Conn: u.endpointView(c), Path: p, Dir: path.Dir(p), Crumbs: crumbs(p), Image: gw.ImageType(p) != ""}
	if !data.Image {
		var read struct {
			Content string `json:"content"`
			Size    int64  `json:"size"`
		}
		err := u.Call(r.Context(), c, "read", map[string]any{"path": p, "length": maxView}, &read)
		switch failure, ok := errors.AsType[*gw.GatewayFailure](err); {
		case ok && failure.Code == "not_text":
			data.Failure = "This file is not text: download it instead."
		case ok && failure.Code == "not_found":
			data.Missing = true
			u.Render(w, r, http.StatusNotFound, "file_view", web.Page{Title: path.Base(p), Data: data})
			return nil
		case ok:
			data.Failure = failure.Message
		case err != nil:
			return err
		}
		data.Text, data.Truncated = read.Content, read.Size > maxView
	}
	u.Render(w, r, http.StatusOK, "file_view", web.Page{Title: path.Base(p), Data: data})
	return nil
}

// Download sends a file's bytes as they come from the gateway: as an
// attachment, or (raw=1, an image the view page shows) inline, in a
// sandbox. Nothing is held whole.
func (u *Pages) Download(w http.ResponseWriter, r *http.Request, c v1alpha1.Endpoint) error {
	p := web.BrowsePath(r.URL.Query().Get("path"))
	inline := r.URL.Query().Get("inline") == "1"
	if inline && gw.ImageType(p) == "" {
		return web.ErrNotFound
	}
	token, err := u.FilesKey(r.Context(), c.GetNamespace())
	if err != nil {
		return err
	}
	return u.SendFile(w, r, token, c, p, inline)
}

// NewFolder makes a folder in the folder shown.
func (u *Pages) NewFolder(w http.ResponseWriter, r *http.Request, c v1alpha1.Endpoint) error {
	dir := web.BrowsePath(r.PostFormValue("dir"))
	name, err := gw.EntryName(r.PostFormValue("name"))
	if err != nil {
		return err
	}
	if err := u.change(r, c, "mkdir", map[string]any{"path": path.Join(dir, name)}); err != nil {
		return err
	}
	http.Redirect(w, r, filesAt(c, dir), http.StatusSeeOther) //nolint:gosec // a path of this site
	return nil
}

// Rename gives an entry a new name in its folder.
func (u *Pages) Rename(w http.ResponseWriter, r *http.Request, c v1alpha1.Endpoint) error {
	p := web.BrowsePath(r.PostFormValue("path"))
	name, err := gw.EntryName(r.PostFormValue("name"))
	if err != nil {
		return err
	}
	if p == "/" {
		return &web.PersonError{Msg: "the root cannot be renamed"}
	}
	if err := u.change(r, c, "rename", map[string]any{"from": p, "to": path.Join(path.Dir(p), name)}); err != nil {
		return err
	}
	http.Redirect(w, r, filesAt(c, path.Dir(p)), http.StatusSeeOther) //nolint:gosec // a path of this site
	return nil
}

// ConfirmDelete asks before a file or a folder, with all it holds, is
// deleted.
func (u *Pages) ConfirmDelete(w http.ResponseWriter, r *http.Request, c v1alpha1.Endpoint) error {
	p := web.BrowsePath(r.URL.Query().Get("path"))
	if p == "/" {
		return &web.PersonError{Msg: "the root cannot be deleted"}
	}
	var st gw.Entry
	if err := u.change(r, c, "stat", map[string]any{"path": p, "followSymlinks": false}, &st); err != nil {
		return err
	}
	consequence, directory := "The file is deleted from "+c.GetName()+". This cannot be undone.", st.Type == "directory"
	if directory {
		consequence = "The folder and everything in it are deleted from " + c.GetName() + ". This cannot be undone."
	}
	return u.Confirm(w, r, web.Confirmation{Question: "Delete " + p + "?", Consequence: consequence,
		Action: base(c) + "/files/delete", Button: "Delete",
		Hidden: map[string]string{"path": p, "directory": strconv.FormatBool(directory)}, Back: filesAt(c, path.Dir(p))})
}

// DeleteEntry deletes a file, or a folder and all it holds.
func (u *Pages) DeleteEntry(w http.ResponseWriter, r *http.Request, c v1alpha1.Endpoint) error {
	p := web.BrowsePath(r.PostFormValue("path"))
	if p == "/" {
		return &web.PersonError{Msg: "the root cannot be deleted"}
	}
	var err error
	if r.PostFormValue("directory") == "true" {
		err = u.change(r, c, "rmdir", map[string]any{"path": p, "recursive": true})
	} else {
		err = u.change(r, c, "unlink", map[string]any{"path": p})
	}
	if err != nil {
		return err
	}
	u.Notify(w, r, p+" is deleted.")
	http.Redirect(w, r, filesAt(c, path.Dir(p)), http.StatusSeeOther) //nolint:gosec // a path of this site
	return nil
}

// change runs a command whose failure the person should read.
func (u *Pages) change(r *http.Request, c v1alpha1.Endpoint, command string, body any, out ...any) error {
	var result any
	if len(out) > 0 {
		result = out[0]
	}
	err := u.Call(r.Context(), c, command, body, result)
	if failure, ok := errors.AsType[*gw.GatewayFailure](err); ok {
		return &web.PersonError{Msg: failure.Message}
	}
	return err
}
