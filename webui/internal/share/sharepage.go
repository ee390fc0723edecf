package share

import (
	"bytes"
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/apitoken"
	"github.com/sftpgate/sftpgate/internal/statuspatch"
	"github.com/sftpgate/sftpgate/internal/uploadrecord"
	"github.com/sftpgate/sftpgate/webui/accounts"
	"github.com/sftpgate/sftpgate/webui/internal/gw"
	"github.com/sftpgate/sftpgate/webui/internal/web"
)

// What a link's holder meets at /s/<token>: a page (a folder listed, a
// file to download, or a drop box with resumable uploads), or, for curl
// (an Accept without text/html, or ?download=1), the file itself. Every
// request finds the link again, uncached: a link deleted, expired or used
// up is refused at once. Files are reached through the gateway with a key
// of the link's own (its token derived from the UI's secret, never given
// out), limited to the link's connection and path, so the gateway's
// scope rules (symlinks included) and the namespace's rates hold.

// LabelShareKey marks a share link's key with the link's name; the keys
// page leaves such keys out.
const LabelShareKey = "sftpgate.dev/share-link"

// KeyOf is the key of a link, by name only.
func KeyOf(share *v1alpha1.ShareLink) *v1alpha1.ApiKey {
	return &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: share.Namespace, Name: "sftpgate-share-" + share.Name}}
}

// shareKey returns the token of the link's key once it is issued. The
// token is derived from the key's scope too: a link whose spec changed (a
// narrower path) gets a new token, which the gateway takes only once it
// holds the key's new scope (both are one object there), so the link
// never serves with its old reach, not even while the gateway's watch
// catches up.
func (u *Pages) shareKey(ctx context.Context, share *v1alpha1.ShareLink) (string, error) {
	key := KeyOf(share)
	key.Labels = map[string]string{LabelShareKey: share.Name}
	key.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ShareLink", Name: share.Name, UID: share.UID}}
	commands := []v1alpha1.Command{"list", "stat", "read"}
	if share.Spec.Mode == v1alpha1.ShareUpload {
		commands = []v1alpha1.Command{"write", "stat"}
	}
	key.Spec = v1alpha1.ApiKeySpec{Commands: commands, Connections: []string{share.Spec.Connection}, Paths: []string{share.Spec.Path},
		ExpiresAt: share.Spec.ExpiresAt}
	token, keyID := u.DerivedToken("share/" + share.Namespace + "/" + share.Name + "/" + string(share.UID) + "/" + gw.SpecHash(key.Spec))
	key.Spec.Token = v1alpha1.TokenSource{SHA256: apitoken.Hash(token), KeyID: keyID}
	return token, u.ReadyKey(ctx, key, token)
}

// shared is a request through a link that holds: the link, its
// connection and its key's token.
type shared struct {
	share *v1alpha1.ShareLink
	conn  v1alpha1.Endpoint
	token string
}

// shareRefusal is a link that does not let this request in, in words for
// its holder.
type shareRefusal struct {
	status int
	// code names it to a script (files.js), as the gateway's codes do.
	code           string
	title, message string
	// password: the link wants its password (a form, or HTTP Basic).
	password bool
}

func (e *shareRefusal) Error() string { return e.message }

var (
	errShareExpired = &shareRefusal{status: http.StatusGone, title: "This link has expired", message: "Ask whoever sent it for a new one."}
	errShareUsedUp  = &shareRefusal{status: http.StatusGone, title: "This link is used up", message: "It was used as many times as it may be. Ask whoever sent it for a new one."}
	errShareAddress = &shareRefusal{status: http.StatusForbidden, title: "Not from here", message: "This link does not work from your network."}
	errShareMode    = &shareRefusal{status: http.StatusMethodNotAllowed, title: "Not with this link", message: "This link does not allow that."}
)

// ShareRoute serves h for a link that holds, and answers refusals: the
// link unknown (404, whatever the reason), gone, from the wrong address,
// or wanting its password.
func (u *Pages) ShareRoute(h func(w http.ResponseWriter, r *http.Request, s *shared) error) web.PageFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		s, err := u.openShare(w, r)
		if err == nil {
			err = h(w, r, s)
		}
		var refusal *shareRefusal
		if !errors.As(err, &refusal) {
			return err
		}
		if chi.URLParam(r, "*") != "" || r.Header.Get("Tus-Resumable") != "" {
			// A drop box's upload: files.js reads the gateway's JSON.
			web.WriteJSON(w, refusal.status, map[string]any{"error": map[string]string{"code": cmp.Or(refusal.code, "refused"),
				"message": refusal.message}})
			return nil
		}
		// curl is asked for HTTP Basic; a browser gets the form, not its
		// own prompt.
		if refusal.password && !strings.Contains(r.Header.Get("Accept"), "text/html") {
			w.Header().Set("WWW-Authenticate", `Basic realm="sftpgate share link", charset="UTF-8"`)
		}
		u.Render(w, r, refusal.status, "share_refused", web.Page{Title: refusal.title, Message: refusal.message, Data: refusal.password})
		return nil
	}
}

// openShare finds the link of the URL's token and checks that it holds
// for r.
func (u *Pages) openShare(w http.ResponseWriter, r *http.Request) (*shared, error) {
	token := chi.URLParam(r, "token")
	namespace, name, ok := shareLinkOf(token)
	if !ok {
		return nil, web.ErrNotFound
	}
	share := &v1alpha1.ShareLink{}
	err := u.Client.Get(r.Context(), client.ObjectKey{Namespace: namespace, Name: name}, share)
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		return nil, web.ErrNotFound // not an account's namespace, or no such link
	case err != nil:
		return nil, err
	case subtle.ConstantTimeCompare([]byte(apitoken.Hash(token)), []byte(share.Spec.TokenSHA256)) != 1:
		return nil, web.ErrNotFound
	}
	web.NoteShare(r, share)
	// The parts of an upload begun are not uses: a drop box's last use
	// still finishes.
	continuing := chi.URLParam(r, "*") != "" && r.Method != http.MethodPost
	if err := shareHolds(share, continuing); err != nil {
		return nil, err
	}
	if len(share.Spec.AllowedCIDRs) > 0 {
		addr, ok := u.Clients.Addr(r)
		if !ok || !slices.ContainsFunc(share.Spec.AllowedCIDRs, func(c string) bool { return prefixContains(c, addr) }) {
			return nil, errShareAddress
		}
	}
	if share.Spec.PasswordHash != "" {
		if err := u.sharePassword(w, r, share); err != nil {
			return nil, err
		}
	}
	ref := v1alpha1.ParseConnectionReference(share.Spec.Connection)
	conn, ok := v1alpha1.NewEndpoint(ref.Kind)
	if ok {
		err = u.Client.Get(r.Context(), client.ObjectKey{Namespace: namespace, Name: ref.Name}, conn)
	}
	switch {
	case !ok || apierrors.IsNotFound(err):
		return nil, &shareRefusal{status: http.StatusServiceUnavailable, title: "Not available", message: "The files of this link are not available now."}
	case err != nil:
		return nil, err
	}
	keyToken, err := u.shareKey(r.Context(), share)
	if err != nil {
		return nil, err
	}
	return &shared{share: share, conn: conn, token: keyToken}, nil
}

// shareHolds refuses a link expired or (unless usedUpOK) used up.
func shareHolds(share *v1alpha1.ShareLink, usedUpOK bool) error {
	switch state, _ := v1alpha1.ShareState(share, time.Now()); {
	case state == v1alpha1.ReasonExpired:
		return errShareExpired
	case state == v1alpha1.ReasonUsedUp && !usedUpOK:
		return errShareUsedUp
	}
	return nil
}

// sharesCookie lists the links (by UID) whose password this browser gave.
type sharesPassed struct {
	UIDs []string `json:"u"`
}

// maxSharesPassed bounds the links one browser's cookie remembers.
const maxSharesPassed = 20

// sharePassword lets r in when its browser gave the link's password
// before, or it gives it now (the form's field, or HTTP Basic); wrong
// passwords are limited as log-ins are, per address and per link.
func (u *Pages) sharePassword(w http.ResponseWriter, r *http.Request, share *v1alpha1.ShareLink) error {
	var passed sharesPassed
	u.Cookies.Get(r, web.ShareCookie, &passed)
	if slices.Contains(passed.UIDs, string(share.UID)) {
		return nil
	}
	password := r.PostFormValue("password")
	if _, p, ok := r.BasicAuth(); ok {
		password = p
	}
	wanted := &shareRefusal{status: http.StatusUnauthorized, title: "This link has a password", message: "Enter the password you were given with the link.", password: true}
	if password == "" {
		return wanted
	}
	if ok, _ := u.Limits.Auth.Allow(u.Clients.Key(r)); !ok {
		return &shareRefusal{status: http.StatusTooManyRequests, title: "Too many attempts", message: web.TooManyFromAddress}
	}
	if ok, _ := u.Limits.Account.Allow("share " + string(share.UID)); !ok {
		return &shareRefusal{status: http.StatusTooManyRequests, title: "Too many attempts", message: "Too many wrong passwords for this link. Wait a minute, then try again."}
	}
	match, err := u.Accounts.CheckHash([]byte(share.Spec.PasswordHash), password)
	if errors.Is(err, accounts.ErrBusy) {
		return &shareRefusal{status: http.StatusServiceUnavailable, title: "Busy", message: accounts.ErrBusy.Error()}
	}
	if !match {
		wanted.message = "That is not the link's password. Try again."
		return wanted
	}
	passed.UIDs = append(passed.UIDs, string(share.UID))
	if len(passed.UIDs) > maxSharesPassed {
		passed.UIDs = passed.UIDs[len(passed.UIDs)-maxSharesPassed:]
	}
	return u.Cookies.Set(w, r, web.ShareCookie, passed)
}

// countUse counts one use of the link before it is served, refusing it
// once the link is used up: the count and the check are one write of the
// link's status, retried on conflict, so uses never pass maxUses.
func (u *Pages) countUse(ctx context.Context, share *v1alpha1.ShareLink) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh := &v1alpha1.ShareLink{}
		if err := u.Client.Get(ctx, client.ObjectKeyFromObject(share), fresh); err != nil {
			if apierrors.IsNotFound(err) {
				return web.ErrNotFound
			}
			return err
		}
		if fresh.UID != share.UID {
			return web.ErrNotFound
		}
		if err := shareHolds(fresh, false); err != nil {
			return err
		}
		fresh.Status.Uses++
		fresh.Status.LastUsedTime = &metav1.Time{Time: time.Now()}
		return u.Client.Status().Update(ctx, fresh)
	})
}

// AnnotationSharedBy names who made a link in the web UI (their email),
// for its partner to read.
const AnnotationSharedBy = "sftpgate.dev/shared-by"

// sharePage is the data of a link's page.
type sharePage struct {
	Share LinkView
	// SharedBy is who made the link, or whose team it is; Title what is
	// shared, in words.
	SharedBy, Title string
	// Base is the link's own path, /s/<token>.
	Base string
	// File is the shared file (a file link); Entries a folder's, at Dir
	// (below the shared folder), with its Parent when not the top.
	File          *gw.Entry
	Dir, Parent   string
	Entries       []gw.Entry
	Next, Failure string
	// Upload: a drop box, with its limits in words.
	Upload       bool
	MaxFile      string
	AllowedNames string
}

// wantsFile: curl, or a download link, gets the bytes, not a page.
func wantsFile(r *http.Request) bool {
	return r.URL.Query().Get("download") == "1" || !strings.Contains(r.Header.Get("Accept"), "text/html")
}

// ServeShare answers GET (and the password form's POST) /s/<token>.
func (u *Pages) ServeShare(w http.ResponseWriter, r *http.Request, s *shared) error {
	if r.Method == http.MethodPost {
		// The link's own page again, now that its password was given.
		http.Redirect(w, r, "/s/"+url.PathEscape(chi.URLParam(r, "token"))+"?"+r.URL.Query().Encode(), http.StatusSeeOther) //nolint:gosec // a path of this UI's, never another site
		return nil
	}
	data := sharePage{Share: ViewShare(s.share), Base: "/s/" + chi.URLParam(r, "token"), SharedBy: u.sharedBy(r.Context(), s.share),
		Title: sharedTitle(s.share.Spec.Path)}
	if s.share.Spec.Mode == v1alpha1.ShareUpload {
		data.Upload = true
		if up := s.share.Spec.Upload; up != nil {
			if up.MaxFileBytes != nil {
				data.MaxFile = megabytes(*up.MaxFileBytes)
			}
			data.AllowedNames = allowedNames(up.AllowedNames)
		}
		u.Render(w, r, http.StatusOK, "share", web.Page{Title: "Send files to " + data.SharedBy, Data: data})
		return nil
	}
	var st gw.Entry
	err := u.CallAs(r.Context(), s.token, s.conn, "stat", map[string]string{"path": s.share.Spec.Path}, &st)
	if err != nil {
		if errors.As(err, new(*gw.GatewayFailure)) {
			return &shareRefusal{status: http.StatusNotFound, title: "Not found", message: "The shared file or folder is not there any more."}
		}
		return err
	}
	if st.Type != "directory" {
		if wantsFile(r) {
			return u.shareDownload(w, r, s, s.share.Spec.Path)
		}
		st.Name, st.Path = path.Base(s.share.Spec.Path), s.share.Spec.Path
		data.File = &st
		u.Render(w, r, http.StatusOK, "share", web.Page{Title: st.Name, Data: data})
		return nil
	}
	rel := web.BrowsePath(r.URL.Query().Get("path"))
	target := path.Join(s.share.Spec.Path, rel)
	if r.URL.Query().Get("download") == "1" {
		return u.shareDownload(w, r, s, target)
	}
	entries, next, failure, err := u.ListPage(r, s.token, s.conn, target)
	if err != nil {
		return err
	}
	data.Failure, data.Next = failure, next
	data.Dir = rel
	if rel != "/" {
		data.Parent = path.Dir(rel)
	}
	for _, e := range entries {
		e.Path = path.Join(rel, e.Name) // shown below the shared folder
		data.Entries = append(data.Entries, e)
	}
	u.Render(w, r, http.StatusOK, "share", web.Page{Title: data.Title, Data: data})
	return nil
}

// sharedBy says who shared a link: whoever made it in the web UI, else
// the team it belongs to (a link made with kubectl).
func (u *Pages) sharedBy(ctx context.Context, share *v1alpha1.ShareLink) string {
	if by := share.Annotations[AnnotationSharedBy]; by != "" {
		return by
	}
	if team, err := u.Accounts.TeamOf(ctx, share.Namespace); err == nil {
		return "the team of " + team.Owner
	}
	return "its owner"
}

// sharedTitle names what a link shares: its file or folder, or the whole
// of a connection.
func sharedTitle(p string) string {
	if p == "/" {
		return "Shared files"
	}
	return path.Base(p)
}

// megabytes says a size limit in the owner's form's unit, MB (of 2^20
// bytes), when it is a whole number of them.
func megabytes(n int64) string {
	if n > 0 && n%(1<<20) == 0 {
		return strconv.FormatInt(n>>20, 10) + " MB"
	}
	return web.Size(n)
}

// allowedNames says a drop box's name patterns in words: "*.csv" as
// "ending in .csv"; others as they are.
func allowedNames(globs []string) string {
	words := make([]string, 0, len(globs))
	for _, g := range globs {
		if ext, ok := strings.CutPrefix(g, "*."); ok && !strings.ContainsAny(ext, "*?[\\") {
			words = append(words, "ending in ."+ext)
		} else {
			words = append(words, "named like "+g)
		}
	}
	switch len(words) {
	case 0:
		return ""
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// shareDownload counts a use and streams file p.
func (u *Pages) shareDownload(w http.ResponseWriter, r *http.Request, s *shared, p string) error {
	if err := u.countUse(r.Context(), s.share); err != nil {
		return err
	}
	return u.SendFile(w, r, s.token, s.conn, p, false)
}

// ShareUploads forwards a drop box's tus requests: a creation counts a
// use, and names a file directly in the shared folder, of an allowed
// name and size, never replacing one.
func (u *Pages) ShareUploads(w http.ResponseWriter, r *http.Request, s *shared) error {
	if s.share.Spec.Mode != v1alpha1.ShareUpload {
		return errShareMode
	}
	name := ""
	metadata := func(h http.Header) (err error) {
		if name, err = shareUploadName(s.share, h); err != nil {
			return err
		}
		if err := u.countUse(r.Context(), s.share); err != nil {
			return err
		}
		h.Set("Upload-Metadata", shareUploadMetadata(s.share, name))
		return nil
	}
	return u.ProxyUpload(w, r, s.token, s.conn, "/s/"+chi.URLParam(r, "token")+"/uploads/",
		gw.UploadRules{Metadata: metadata, Answer: func(resp *http.Response) error { return partnerAnswer(resp, name) }})
}

// partnerAnswer puts the gateway's refusal of a drop box's upload (of
// name, when a creation) in words for the partner, keeping its status and
// code: the gateway's own words name the owner's folder.
func partnerAnswer(resp *http.Response, name string) error {
	if resp.StatusCode < http.StatusBadRequest {
		return nil
	}
	var got struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&got)
	_ = resp.Body.Close()
	message := "The file was not taken. Send it again, or ask whoever sent you this link."
	switch {
	case got.Error.Code == "already_exists" && name != "":
		message = "A file named " + name + " was sent here already. Rename yours and send it again."
	case got.Error.Code == "already_exists":
		message = "A file of that name was sent here already. Rename yours and send it again."
	case resp.StatusCode == http.StatusRequestEntityTooLarge:
		message = "The file is larger than this link takes."
	case resp.StatusCode >= http.StatusInternalServerError || resp.StatusCode == http.StatusLocked || resp.StatusCode == http.StatusTooManyRequests:
		message = "The server cannot take the file just now."
	}
	body, err := json.Marshal(map[string]any{"error": map[string]string{"code": cmp.Or(got.Error.Code, "refused"), "message": message}})
	if err != nil {
		return err
	}
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	resp.Header.Set("Content-Type", "application/json")
	return nil
}

// shareUploadName is the name of the file a drop box's new upload makes,
// from the tus headers of its creation (h), if the link takes it: an
// allowed name, of an allowed size.
func shareUploadName(share *v1alpha1.ShareLink, h http.Header) (string, error) {
	name, err := gw.EntryName(path.Base("/" + uploadrecord.MetadataValue(h.Get("Upload-Metadata"), "path")))
	if err != nil {
		// The partner's own words back, bounded: a name is at most 255.
		raw := statuspatch.Cut(path.Base("/"+uploadrecord.MetadataValue(h.Get("Upload-Metadata"), "path")), 255)
		return "", &shareRefusal{status: http.StatusBadRequest, code: "name_not_allowed", title: "Not this name", message: "A file's name cannot be " + strconv.Quote(raw) + ": rename it and send it again."}
	}
	if up := share.Spec.Upload; up != nil {
		if len(up.AllowedNames) > 0 && !slices.ContainsFunc(up.AllowedNames, func(g string) bool { ok, _ := path.Match(g, name); return ok }) {
			return "", &shareRefusal{status: http.StatusBadRequest, code: "name_not_allowed", title: "Not this name", message: "This link takes only files " + allowedNames(up.AllowedNames) + "."}
		}
		if n, err := strconv.ParseInt(h.Get("Upload-Length"), 10, 64); up.MaxFileBytes != nil && (err != nil || n > *up.MaxFileBytes) {
			return "", &shareRefusal{status: http.StatusRequestEntityTooLarge, code: "too_large", title: "Too large", message: "This link takes files of at most " + megabytes(*up.MaxFileBytes) + "."}
		}
	}
	return name, nil
}

// shareUploadMetadata is the Upload-Metadata a drop box's upload of name
// is created with, whatever its client sent: the file directly in the
// shared folder, never replacing one.
func shareUploadMetadata(share *v1alpha1.ShareLink, name string) string {
	enc := base64.StdEncoding.EncodeToString
	return "path " + enc([]byte(path.Join(share.Spec.Path, name))) + ",overwrite " + enc([]byte("false")) + ",filename " + enc([]byte(name))
}

// prefixContains says whether CIDR c holds addr.
func prefixContains(c string, addr netip.Addr) bool {
	p, err := netip.ParsePrefix(c)
	return err == nil && p.Contains(addr)
}
