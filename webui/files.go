package webui

// The file browser: a connection's folders, paged and sorted by name,
// with a breadcrumb; new folders, renames, deletions after a
// confirmation, downloads, text and images shown in place, and uploads by
// choice or drag and drop, resumable (tus, through uploadProxy). Every
// page and every byte goes through the gateway as the account (its
// file browser key, fileskey.go): the connection's root and its checks
// hold exactly as through the API, and files stream, never held whole.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// pageSize is how many entries a folder's page shows.
const pageSize = 100

// gatewayFailure is what the gateway said went wrong: the SFTP server's
// refusal (in a 200) or its own error.
type gatewayFailure struct {
	Status  int
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (f *gatewayFailure) Error() string { return f.Message }

// unavailableError is the gateway, or the server behind it, not
// answering now (a 5xx, or no answer at all): a moment later may, so it
// is never shown as the person's mistake, nor as a file not found.
type unavailableError struct{ cause string }

func (e *unavailableError) Error() string {
	return "the gateway or the file server did not answer: " + e.cause
}

// gatewayError is the error of the gateway's answer status with its
// error envelope's failure f: unavailable for a 5xx, else f.
func gatewayError(status int, f *gatewayFailure) error {
	if status >= http.StatusInternalServerError {
		return &unavailableError{cause: fmt.Sprintf("%d %s", status, cmp.Or(f.Message, http.StatusText(status)))}
	}
	return f
}

// call runs command on connection c as the account, with a JSON body,
// and decodes its result into out.
func (u *ui) call(ctx context.Context, c *v1alpha1.SftpConnection, command string, body, out any) error {
	token, err := u.filesKey(ctx, c.Namespace)
	if err != nil {
		return err
	}
	return u.callAs(ctx, token, c, command, body, out)
}

// callAs is call with the key of token.
func (u *ui) callAs(ctx context.Context, token string, c *v1alpha1.SftpConnection, command string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	resp, err := u.gatewayRequest(ctx, token, c, command, b, "")
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	var envelope map[string]json.RawMessage
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(&envelope); err != nil {
		// Cut off, or not the gateway's (a proxy's page).
		return &unavailableError{cause: fmt.Sprintf("its answer to %s: %d, %v", command, resp.StatusCode, err)}
	}
	if raw, ok := envelope["error"]; ok {
		f := &gatewayFailure{Status: resp.StatusCode}
		_ = json.Unmarshal(raw, f)
		return gatewayError(resp.StatusCode, f)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(envelope[command], out)
}

// gatewayRequest sends command to the gateway with the key of token (the
// account's file browser key, or a share link's); accept, when set, asks
// for the file's bytes. The UI sends only keys it found issued, but the
// gateway learns of a key from its own watch, a moment later: a key it
// does not know yet (401) is sent again for up to keyWait.
func (u *ui) gatewayRequest(ctx context.Context, token string, c *v1alpha1.SftpConnection, command string, body []byte, accept string) (*http.Response, error) {
	slug := u.view(c).Slug
	var resp *http.Response
	_, err := untilKnown(ctx, func() (bool, error) {
		if resp != nil {
			_ = resp.Body.Close() // a 401 sent again
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.tryURL+"/"+url.PathEscape(slug)+"/"+command, bytes.NewReader(body))
		if err != nil {
			return false, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		// The gateway's record of the call then names this request.
		if id := gatewayID(middleware.GetReqID(ctx)); id != "" {
			req.Header.Set(middleware.RequestIDHeader, id)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err = u.filesClient.Do(req) //nolint:bodyclose // the caller closes it, or the next try
		if err != nil && ctx.Err() == nil {
			err = &unavailableError{cause: err.Error()}
		}
		return err == nil && resp.StatusCode != http.StatusUnauthorized, err
	})
	if err != nil {
		if resp != nil {
			_ = resp.Body.Close()
		}
		return nil, err
	}
	return resp, nil
}

// entry is one row of a folder's page.
type entry struct {
	Name     string    `json:"name"`
	Path     string    `json:"path"`
	Type     string    `json:"type"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
}

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
	Entries   []entry
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
func (u *ui) untilReady(w http.ResponseWriter, r *http.Request, c *v1alpha1.SftpConnection) bool {
	v := u.view(c)
	if v.State != "failed" {
		return false
	}
	u.notify(w, r, "The files of "+c.Name+" cannot be reached until its test passes: "+v.Headline+".")
	http.Redirect(w, r, "/connections/"+c.Name, http.StatusSeeOther)
	return true
}

// missing says whether the gateway finds nothing at p.
func (u *ui) missing(r *http.Request, token string, c *v1alpha1.SftpConnection, p string) bool {
	err := u.callAs(r.Context(), token, c, "stat", map[string]any{"path": p}, nil)
	f, ok := errors.AsType[*gatewayFailure](err)
	return ok && f.Code == "not_found"
}

// folder lists a folder: a page of it, after a name.
func (u *ui) folder(w http.ResponseWriter, r *http.Request, c *v1alpha1.SftpConnection) error {
	if u.untilReady(w, r, c) {
		return nil
	}
	dir := browsePath(r.URL.Query().Get("path"))
	token, err := u.filesKey(r.Context(), c.Namespace)
	if err != nil {
		return err
	}
	data := filesPage{Conn: u.view(c), Namespace: c.Namespace, Dir: dir, Crumbs: crumbs(dir)}
	if dir != "/" {
		data.Parent = path.Dir(dir)
	}
	data.Entries, data.Next, data.Failure, err = u.listPage(r, token, c, dir)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if data.Failure != "" && u.missing(r, token, c, dir) {
		status, data.Missing = http.StatusNotFound, true
	}
	u.render(w, r, status, "files", page{Title: c.Name + ": " + dir, Data: data})
	return nil
}

// listPage lists a page of dir with the key of token, after the name the
// request's "after" gives: the entries, the name the next page starts
// after, or the gateway's refusal in words.
func (u *ui) listPage(r *http.Request, token string, c *v1alpha1.SftpConnection, dir string) (entries []entry, next, failure string, err error) {
	var listing struct {
		Entries []entry `json:"entries"`
		Next    string  `json:"next"`
	}
	req := map[string]any{"path": dir, "limit": pageSize}
	if after := r.URL.Query().Get("after"); after != "" {
		req["after"] = after
	}
	err = u.callAs(r.Context(), token, c, "list", req, &listing)
	if f, ok := errors.AsType[*gatewayFailure](err); ok {
		return nil, "", f.Message, nil
	}
	return listing.Entries, listing.Next, "", err
}

// browsePath is p as an absolute, clean path within the connection.
func browsePath(p string) string { return path.Clean("/" + p) }

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

// imageType is the type of an image shown in place, by its name; "" for
// none. SVG is not one: it can carry script.
func imageType(name string) string {
	switch strings.ToLower(path.Ext(name)) {
	case ".png":
		return "image/png"
	case ".jpg", ".jpeg":
		return "image/jpeg"
	case ".gif":
		return "image/gif"
	case ".webp":
		return "image/webp"
	}
	return ""
}

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

// showFile shows a text file's start, or an image, in place.
func (u *ui) showFile(w http.ResponseWriter, r *http.Request, c *v1alpha1.SftpConnection) error {
	if u.untilReady(w, r, c) {
		return nil
	}
	p := browsePath(r.URL.Query().Get("path"))
	data := viewPage{Conn: u.view(c), Path: p, Dir: path.Dir(p), Crumbs: crumbs(p), Image: imageType(p) != ""}
	if !data.Image {
		var read struct {
			Content string `json:"content"`
			Size    int64  `json:"size"`
		}
		err := u.call(r.Context(), c, "read", map[string]any{"path": p, "length": maxView}, &read)
		switch failure, ok := errors.AsType[*gatewayFailure](err); {
		case ok && failure.Code == "not_text":
			data.Failure = "This file is not text: download it instead."
		case ok && failure.Code == "not_found":
			data.Missing = true
			u.render(w, r, http.StatusNotFound, "file_view", page{Title: path.Base(p), Data: data})
			return nil
		case ok:
			data.Failure = failure.Message
		case err != nil:
			return err
		}
		data.Text, data.Truncated = read.Content, read.Size > maxView
	}
	u.render(w, r, http.StatusOK, "file_view", page{Title: path.Base(p), Data: data})
	return nil
}

// download sends a file's bytes as they come from the gateway: as an
// attachment, or (raw=1, an image the view page shows) inline, in a
// sandbox. Nothing is held whole.
func (u *ui) download(w http.ResponseWriter, r *http.Request, c *v1alpha1.SftpConnection) error {
	p := browsePath(r.URL.Query().Get("path"))
	inline := r.URL.Query().Get("inline") == "1"
	if inline && imageType(p) == "" {
		return errNotFound
	}
	token, err := u.filesKey(r.Context(), c.Namespace)
	if err != nil {
		return err
	}
	return u.sendFile(w, r, token, c, p, inline)
}

// sendFile streams file p of c, read with the key of token.
func (u *ui) sendFile(w http.ResponseWriter, r *http.Request, token string, c *v1alpha1.SftpConnection, p string, inline bool) error {
	body, err := json.Marshal(map[string]string{"path": p})
	if err != nil {
		return err
	}
	resp, err := u.gatewayRequest(r.Context(), token, c, "read", body, "application/octet-stream")
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/octet-stream") {
		var envelope struct {
			Error gatewayFailure `json:"error"`
		}
		_ = json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(&envelope)
		if resp.StatusCode >= http.StatusInternalServerError {
			return gatewayError(resp.StatusCode, &envelope.Error)
		}
		return &personError{cmp.Or(envelope.Error.Message, "the file cannot be read")}
	}
	h := w.Header()
	h.Set("Content-Length", resp.Header.Get("Content-Length"))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if inline {
		h.Set("Content-Type", imageType(p))
		h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
		h.Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": path.Base(p)}))
	} else {
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(p)}))
	}
	w.WriteHeader(http.StatusOK)
	w, _ = streaming(w, r)
	_, _ = io.Copy(w, resp.Body)
	return nil
}

// filesAt is the folder page of dir.
func filesAt(c *v1alpha1.SftpConnection, dir string) string {
	return "/connections/" + c.Name + "/files?path=" + url.QueryEscape(dir)
}

// newFolder makes a folder in the folder shown.
func (u *ui) newFolder(w http.ResponseWriter, r *http.Request, c *v1alpha1.SftpConnection) error {
	dir := browsePath(r.PostFormValue("dir"))
	name, err := entryName(r.PostFormValue("name"))
	if err != nil {
		return err
	}
	if err := u.change(r, c, "mkdir", map[string]any{"path": path.Join(dir, name)}); err != nil {
		return err
	}
	http.Redirect(w, r, filesAt(c, dir), http.StatusSeeOther)
	return nil
}

// rename gives an entry a new name in its folder.
func (u *ui) rename(w http.ResponseWriter, r *http.Request, c *v1alpha1.SftpConnection) error {
	p := browsePath(r.PostFormValue("path"))
	name, err := entryName(r.PostFormValue("name"))
	if err != nil {
		return err
	}
	if p == "/" {
		return &personError{"the root cannot be renamed"}
	}
	if err := u.change(r, c, "rename", map[string]any{"from": p, "to": path.Join(path.Dir(p), name)}); err != nil {
		return err
	}
	http.Redirect(w, r, filesAt(c, path.Dir(p)), http.StatusSeeOther)
	return nil
}

// confirmDelete asks before a file or a folder, with all it holds, is
// deleted.
func (u *ui) confirmDelete(w http.ResponseWriter, r *http.Request, c *v1alpha1.SftpConnection) error {
	p := browsePath(r.URL.Query().Get("path"))
	if p == "/" {
		return &personError{"the root cannot be deleted"}
	}
	var st entry
	if err := u.change(r, c, "stat", map[string]any{"path": p, "followSymlinks": false}, &st); err != nil {
		return err
	}
	consequence, directory := "The file is deleted from "+c.Name+". This cannot be undone.", st.Type == "directory"
	if directory {
		consequence = "The folder and everything in it are deleted from " + c.Name + ". This cannot be undone."
	}
	return u.confirm(w, r, confirmation{Question: "Delete " + p + "?", Consequence: consequence,
		Action: "/connections/" + c.Name + "/files/delete", Button: "Delete",
		Hidden: map[string]string{"path": p, "directory": strconv.FormatBool(directory)}, Back: filesAt(c, path.Dir(p))})
}

// deleteEntry deletes a file, or a folder and all it holds.
func (u *ui) deleteEntry(w http.ResponseWriter, r *http.Request, c *v1alpha1.SftpConnection) error {
	p := browsePath(r.PostFormValue("path"))
	if p == "/" {
		return &personError{"the root cannot be deleted"}
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
	u.notify(w, r, p+" is deleted.")
	http.Redirect(w, r, filesAt(c, path.Dir(p)), http.StatusSeeOther)
	return nil
}

// change runs a command whose failure the person should read.
func (u *ui) change(r *http.Request, c *v1alpha1.SftpConnection, command string, body any, out ...any) error {
	var result any
	if len(out) > 0 {
		result = out[0]
	}
	err := u.call(r.Context(), c, command, body, result)
	if failure, ok := errors.AsType[*gatewayFailure](err); ok {
		return &personError{failure.Message}
	}
	return err
}

// entryName checks a new name for an entry: one name, no path.
func entryName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || len(name) > 255 {
		return "", &personError{"give a name of up to 255 characters, without /"}
	}
	return name, nil
}
