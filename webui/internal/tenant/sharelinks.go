package tenant

import (
	"crypto/rand"
	"errors"
	"net/http"
	"net/netip"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"golang.org/x/crypto/bcrypt"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/apitoken"
	"github.com/sftpgate/sftpgate/webui/internal/gw"
	links "github.com/sftpgate/sftpgate/webui/internal/share"
	"github.com/sftpgate/sftpgate/webui/internal/web"
)

// Share links: a team's editors and admins share a file or a folder of a
// connection (to download), or a folder (to upload into), with someone
// who has no account. A link is a ShareLink (kubectl and GitOps make them
// too) holding its token's hash; the UI makes the token and shows the
// link once. sharepage.go serves the links.

// ListShares lists the team's share links.
func (u *Pages) ListShares(w http.ResponseWriter, r *http.Request) error {
	var list v1alpha1.ShareLinkList
	if err := u.Client.List(r.Context(), &list, client.InNamespace(web.AccountFrom(r.Context()).Namespace)); err != nil {
		return err
	}
	views := make([]links.LinkView, 0, len(list.Items))
	for i := range list.Items {
		views = append(views, links.ViewShare(&list.Items[i]))
	}
	u.Render(w, r, http.StatusOK, "shares", web.Page{Title: "Share links", Data: views})
	return nil
}

// shareForm is the new-link form's data: what it shares from, and its
// pages' base.
type shareForm struct {
	Conn, Base string
}

// NewShareForm answers GET /connections/{name}/shares/new.
func (u *Pages) NewShareForm(w http.ResponseWriter, r *http.Request, c v1alpha1.Endpoint) error {
	form := map[string]string{"path": web.BrowsePath(r.URL.Query().Get("path")), "mode": "Download", "expires": "7d"}
	return u.sharePage(c, form)(w, r, http.StatusOK, web.Problems{})
}

func (u *Pages) sharePage(c v1alpha1.Endpoint, form map[string]string) web.DrawForm {
	return func(w http.ResponseWriter, r *http.Request, status int, problem web.Problems) error {
		u.Render(w, r, status, "share_form", web.Page{Title: "Share " + form["path"], Error: problem.Form, Errors: problem.Fields, Form: form, Data: shareForm{Conn: c.GetName(), Base: base(c)}})
		return nil
	}
}

// shareExpiries are the form's choices.
var shareExpiries = map[string]time.Duration{"1d": 24 * time.Hour, "7d": 7 * 24 * time.Hour, "30d": 30 * 24 * time.Hour}

// CreateShare makes a link from the form, and shows it once.
func (u *Pages) CreateShare(w http.ResponseWriter, r *http.Request, c v1alpha1.Endpoint) error {
	form := formValues(r, "name", "path", "mode", "expires", "maxUses", "password", "cidrs", "maxFileMB", "names")
	again := u.sharePage(c, form)
	mistakes := web.FieldErrors{}
	share := &v1alpha1.ShareLink{ObjectMeta: metav1.ObjectMeta{Namespace: c.GetNamespace(), Name: strings.TrimSpace(form["name"])},
		Spec: v1alpha1.ShareLinkSpec{Connection: ref(c), Path: web.BrowsePath(form["path"]), Mode: v1alpha1.ShareMode(form["mode"])}}
	if share.Name == "" {
		share.Name = "share-" + strings.ToLower(rand.Text()[:8])
	}
	if errs := validation.IsDNS1123Label(share.Name); len(errs) > 0 || len(share.Name) > 48 {
		mistakes.Add("name", "The name must be at most 48 lower-case letters, digits and dashes.")
	}
	switch share.Spec.Mode {
	case v1alpha1.ShareDownload, v1alpha1.ShareUpload:
	default:
		mistakes.Add("mode", "Choose download or upload.")
	}
	if d, ok := shareExpiries[form["expires"]]; ok {
		share.Spec.ExpiresAt = &metav1.Time{Time: time.Now().Add(d).Truncate(time.Second)}
	} else if form["expires"] != "never" {
		mistakes.Add("expires", "Choose when the link expires.")
	}
	if v := strings.TrimSpace(form["maxUses"]); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > 1000000 {
			mistakes.Add("maxUses", "Most uses is a number from 1 to 1,000,000, or empty for no limit.")
		}
		share.Spec.MaxUses = &n
	}
	if p := form["password"]; p != "" {
		if len(p) < 8 || len(p) > 72 {
			mistakes.Add("password", "A link's password is 8 to 72 characters.")
		} else {
			hash, err := bcrypt.GenerateFromPassword([]byte(p), u.Accounts.Cost)
			if err != nil {
				return err
			}
			share.Spec.PasswordHash = string(hash)
		}
	}
	for c := range strings.FieldsFuncSeq(form["cidrs"], func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' }) {
		if _, err := netip.ParsePrefix(c); err != nil {
			mistakes.Add("cidrs", "Allowed addresses are CIDRs such as 203.0.113.0/24, separated by commas.")
		}
		share.Spec.AllowedCIDRs = append(share.Spec.AllowedCIDRs, c)
	}
	if share.Spec.Mode == v1alpha1.ShareUpload {
		limits := &v1alpha1.ShareUploadLimits{}
		if v := strings.TrimSpace(form["maxFileMB"]); v != "" {
			mb, err := strconv.ParseInt(v, 10, 64)
			if err != nil || mb < 1 || mb > 1<<20 {
				mistakes.Add("maxFileMB", "The largest file is a whole number of MB, from 1.")
			}
			b := mb << 20
			limits.MaxFileBytes = &b
		}
		for g := range strings.FieldsFuncSeq(form["names"], func(r rune) bool { return r == ',' || r == ' ' }) {
			if _, err := path.Match(g, ""); err != nil || strings.Contains(g, "/") {
				mistakes.Add("names", "Allowed names are patterns such as *.csv, separated by commas.")
			}
			limits.AllowedNames = append(limits.AllowedNames, g)
		}
		share.Spec.Upload = limits
	}
	// A link to nothing is refused when made, not when its partner opens
	// it.
	var st gw.Entry
	if err := u.Call(r.Context(), c, "stat", map[string]any{"path": share.Spec.Path}, &st); err != nil {
		f, ok := errors.AsType[*gw.GatewayFailure](err)
		switch {
		case ok && f.Code == "connection_not_ready":
			mistakes.Add("", "The files of "+c.GetName()+" cannot be reached now ("+f.Message+"): make the link once its test passed.")
		case !ok || f.Status == http.StatusTooManyRequests || f.Status >= http.StatusInternalServerError:
			return err
		case f.Code == "not_found":
			mistakes.Add("path", "There is no file or folder "+share.Spec.Path+" on "+c.GetName()+".")
		default:
			mistakes.Add("path", "The server would not show "+share.Spec.Path+": "+f.Message)
		}
	} else if share.Spec.Mode == v1alpha1.ShareUpload && st.Type != "directory" {
		mistakes.Add("path", "An upload link needs a folder, and "+share.Spec.Path+" is a file.")
	}
	if err := mistakes.Err(); err != nil {
		return web.OnForm(err, again)
	}
	share.Annotations = map[string]string{links.AnnotationSharedBy: web.AccountFrom(r.Context()).Email}
	token := v1alpha1.NewShareToken(share.Namespace, share.Name)
	share.Spec.TokenSHA256 = apitoken.Hash(token)
	web.NoteObject(r, "ShareLink", share.Name)
	if err := u.Client.Create(r.Context(), share); err != nil {
		switch {
		case apierrors.IsAlreadyExists(err):
			mistakes.Add("name", "A link of this name exists: choose another.")
		case apierrors.IsForbidden(err):
			mistakes.Add("", "The team has as many share links as it may have: delete one first.")
		case apierrors.IsInvalid(err):
			mistakes.Add("", err.Error())
		default:
			return err
		}
		return web.OnForm(mistakes, again)
	}
	if err := u.Cookies.Set(w, r, web.FlashCookie, web.NewKey{Name: share.Name, Token: token}); err != nil {
		return err
	}
	http.Redirect(w, r, "/shares/"+share.Name+"/created", http.StatusSeeOther)
	return nil
}

// shareCreated is the one page that shows a new link.
type shareCreated struct {
	Share links.LinkView
	URL   string
}

// ShowNewShare answers GET /shares/{name}/created.
func (u *Pages) ShowNewShare(w http.ResponseWriter, r *http.Request) error {
	var flash web.NewKey
	name := chi.URLParam(r, "name")
	if !u.Cookies.Get(r, web.FlashCookie, &flash) || flash.Name != name {
		return web.ErrNotFound
	}
	u.Cookies.Clear(w, r, web.FlashCookie)
	var share v1alpha1.ShareLink
	if err := u.Client.Get(r.Context(), client.ObjectKey{Namespace: web.AccountFrom(r.Context()).Namespace, Name: name}, &share); err != nil {
		if apierrors.IsNotFound(err) {
			return web.ErrNotFound
		}
		return err
	}
	u.Render(w, r, http.StatusOK, "share_created", web.Page{Title: "Share link created",
		Data: shareCreated{Share: links.ViewShare(&share), URL: web.RequestBase(r) + "/s/" + flash.Token}})
	return nil
}

// shareOf is the team's link the path names.
func (u *Pages) shareOf(r *http.Request) (*v1alpha1.ShareLink, error) {
	var share v1alpha1.ShareLink
	return &share, u.teamObject(r, &share)
}

// ConfirmDeleteShare answers GET /shares/{name}/delete.
func (u *Pages) ConfirmDeleteShare(w http.ResponseWriter, r *http.Request) error {
	share, err := u.shareOf(r)
	if err != nil {
		return err
	}
	return u.Confirm(w, r, web.Confirmation{Question: "Delete the link " + share.Name + "?",
		Consequence: "Whoever has it is refused from their next visit on, and a download under way stops. The files stay on " + share.Spec.Connection + ".",
		Action:      r.URL.Path, Button: "Delete the link", Back: "/shares"})
}

// DeleteShare revokes a link: refused from the next request on.
func (u *Pages) DeleteShare(w http.ResponseWriter, r *http.Request) error {
	ns := web.AccountFrom(r.Context()).Namespace
	share, err := u.shareOf(r)
	if err != nil {
		return err
	}
	if err := u.Client.Delete(r.Context(), share, client.Preconditions{UID: &share.UID}); err != nil {
		if apierrors.IsNotFound(err) {
			return web.ErrNotFound
		}
		return err
	}
	// Its key is owned by the link; without a garbage collector at hand,
	// the UI deletes it too.
	key := links.KeyOf(share)
	if err := u.Client.Delete(r.Context(), key); err != nil && !apierrors.IsNotFound(err) {
		u.Log.Warn("deleting a share link's key", "namespace", ns, "key", key.Name, "error", err)
	}
	u.Notify(w, r, "The link "+share.Name+" is deleted: it opens nothing any more.")
	http.Redirect(w, r, "/shares", http.StatusSeeOther)
	return nil
}
