package webui

import (
	"crypto/rand"
	"encoding/base64"
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
)

// Share links: a team's editors and admins share a file or a folder of a
// connection (to download), or a folder (to upload into), with someone
// who has no account. A link is a ShareLink (kubectl and GitOps make them
// too) holding its token's hash; the UI makes the token and shows the
// link once. sharepage.go serves the links.

// shareTokenPrefix begins every share link's token.
const shareTokenPrefix = "sgs_"

// newShareToken is a token for the link namespace/name: it names the link,
// so that the UI finds it without reading every namespace's, and holds
// 260 random bits.
func newShareToken(namespace, name string) string {
	return shareTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(namespace+"/"+name)) + "_" + rand.Text() + rand.Text()
}

// shareLinkOf is where a share link's token names it.
func shareLinkOf(token string) (namespace, name string, ok bool) {
	rest, ok := strings.CutPrefix(token, shareTokenPrefix)
	if !ok {
		return "", "", false
	}
	// base64url has _ too: the secret (base32 or hex) is after the last.
	i := strings.LastIndexByte(rest, '_')
	if i < 0 {
		return "", "", false
	}
	locator := rest[:i]
	raw, err := base64.RawURLEncoding.DecodeString(locator)
	if err != nil {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(string(raw), "/")
	// Only names Kubernetes can hold: any other would reach the API
	// server's URL (a "/", "..", a megabyte) and fail there, not be found.
	return namespace, name, ok && len(validation.IsDNS1123Label(namespace)) == 0 && len(validation.IsDNS1123Subdomain(name)) == 0
}

// shareView is a link as the pages show it: never its token.
type shareView struct {
	Name, Connection, Path, Mode, State, Message string
	Uses                                         int64
	MaxUses                                      *int64
	Expires                                      *time.Time
	Password                                     bool
	CIDRs                                        string
}

func viewShare(s *v1alpha1.ShareLink) shareView {
	state, message := v1alpha1.ShareState(s, time.Now())
	v := shareView{Name: s.Name, Connection: s.Spec.Connection, Path: s.Spec.Path, Mode: string(s.Spec.Mode), State: state,
		Message: message, Uses: s.Status.Uses, MaxUses: s.Spec.MaxUses, Password: s.Spec.PasswordHash != "",
		CIDRs: strings.Join(s.Spec.AllowedCIDRs, ", ")}
	if s.Spec.ExpiresAt != nil {
		t := s.Spec.ExpiresAt.Time
		v.Expires = &t
	}
	return v
}

// listShares lists the team's share links.
func (u *ui) listShares(w http.ResponseWriter, r *http.Request) error {
	var list v1alpha1.ShareLinkList
	if err := u.client.List(r.Context(), &list, client.InNamespace(accountFrom(r.Context()).Namespace)); err != nil {
		return err
	}
	views := make([]shareView, 0, len(list.Items))
	for i := range list.Items {
		views = append(views, viewShare(&list.Items[i]))
	}
	u.render(w, r, http.StatusOK, "shares", page{Title: "Share links", Data: views})
	return nil
}

// shareForm is the new-link form's data.
type shareForm struct {
	Conn string
}

func (u *ui) newShareForm(w http.ResponseWriter, r *http.Request, c *v1alpha1.SftpConnection) error {
	form := map[string]string{"path": browsePath(r.URL.Query().Get("path")), "mode": "Download", "expires": "7d"}
	return u.sharePage(c, form)(w, r, http.StatusOK, problems{})
}

func (u *ui) sharePage(c *v1alpha1.SftpConnection, form map[string]string) drawForm {
	return func(w http.ResponseWriter, r *http.Request, status int, problem problems) error {
		u.render(w, r, status, "share_form", page{Title: "Share " + form["path"], Error: problem.form, Errors: problem.fields, Form: form, Data: shareForm{Conn: c.Name}})
		return nil
	}
}

// shareExpiries are the form's choices.
var shareExpiries = map[string]time.Duration{"1d": 24 * time.Hour, "7d": 7 * 24 * time.Hour, "30d": 30 * 24 * time.Hour}

// createShare makes a link from the form, and shows it once.
func (u *ui) createShare(w http.ResponseWriter, r *http.Request, c *v1alpha1.SftpConnection) error {
	form := formValues(r, "name", "path", "mode", "expires", "maxUses", "password", "cidrs", "maxFileMB", "names")
	again := u.sharePage(c, form)
	mistakes := fieldErrors{}
	share := &v1alpha1.ShareLink{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: strings.TrimSpace(form["name"])},
		Spec: v1alpha1.ShareLinkSpec{Connection: c.Name, Path: browsePath(form["path"]), Mode: v1alpha1.ShareMode(form["mode"])}}
	if share.Name == "" {
		share.Name = "share-" + strings.ToLower(rand.Text()[:8])
	}
	if errs := validation.IsDNS1123Label(share.Name); len(errs) > 0 || len(share.Name) > 48 {
		mistakes.add("name", "The name must be at most 48 lower-case letters, digits and dashes.")
	}
	switch share.Spec.Mode {
	case v1alpha1.ShareDownload, v1alpha1.ShareUpload:
	default:
		mistakes.add("mode", "Choose download or upload.")
	}
	if d, ok := shareExpiries[form["expires"]]; ok {
		share.Spec.ExpiresAt = &metav1.Time{Time: time.Now().Add(d).Truncate(time.Second)}
	} else if form["expires"] != "never" {
		mistakes.add("expires", "Choose when the link expires.")
	}
	if v := strings.TrimSpace(form["maxUses"]); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > 1000000 {
			mistakes.add("maxUses", "Most uses is a number from 1 to 1,000,000, or empty for no limit.")
		}
		share.Spec.MaxUses = &n
	}
	if p := form["password"]; p != "" {
		if len(p) < 8 || len(p) > 72 {
			mistakes.add("password", "A link's password is 8 to 72 characters.")
		} else {
			hash, err := bcrypt.GenerateFromPassword([]byte(p), u.accounts.Cost)
			if err != nil {
				return err
			}
			share.Spec.PasswordHash = string(hash)
		}
	}
	for c := range strings.FieldsFuncSeq(form["cidrs"], func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' }) {
		if _, err := netip.ParsePrefix(c); err != nil {
			mistakes.add("cidrs", "Allowed addresses are CIDRs such as 203.0.113.0/24, separated by commas.")
		}
		share.Spec.AllowedCIDRs = append(share.Spec.AllowedCIDRs, c)
	}
	if share.Spec.Mode == v1alpha1.ShareUpload {
		limits := &v1alpha1.ShareUploadLimits{}
		if v := strings.TrimSpace(form["maxFileMB"]); v != "" {
			mb, err := strconv.ParseInt(v, 10, 64)
			if err != nil || mb < 1 || mb > 1<<20 {
				mistakes.add("maxFileMB", "The largest file is a whole number of MB, from 1.")
			}
			b := mb << 20
			limits.MaxFileBytes = &b
		}
		for g := range strings.FieldsFuncSeq(form["names"], func(r rune) bool { return r == ',' || r == ' ' }) {
			if _, err := path.Match(g, ""); err != nil || strings.Contains(g, "/") {
				mistakes.add("names", "Allowed names are patterns such as *.csv, separated by commas.")
			}
			limits.AllowedNames = append(limits.AllowedNames, g)
		}
		share.Spec.Upload = limits
	}
	// A link to nothing is refused when made, not when its partner opens
	// it.
	var st entry
	if err := u.call(r.Context(), c, "stat", map[string]any{"path": share.Spec.Path}, &st); err != nil {
		f, ok := errors.AsType[*gatewayFailure](err)
		switch {
		case ok && f.Code == "connection_not_ready":
			mistakes.add("", "The files of "+c.Name+" cannot be reached now ("+f.Message+"): make the link once its test passed.")
		case !ok || f.Status == http.StatusTooManyRequests || f.Status >= http.StatusInternalServerError:
			return err
		case f.Code == "not_found":
			mistakes.add("path", "There is no file or folder "+share.Spec.Path+" on "+c.Name+".")
		default:
			mistakes.add("path", "The server would not show "+share.Spec.Path+": "+f.Message)
		}
	} else if share.Spec.Mode == v1alpha1.ShareUpload && st.Type != "directory" {
		mistakes.add("path", "An upload link needs a folder, and "+share.Spec.Path+" is a file.")
	}
	if err := mistakes.err(); err != nil {
		return onForm(err, again)
	}
	share.Annotations = map[string]string{annotationSharedBy: accountFrom(r.Context()).Email}
	token := newShareToken(share.Namespace, share.Name)
	share.Spec.TokenSHA256 = apitoken.Hash(token)
	noteObject(r, "ShareLink", share.Name)
	if err := u.client.Create(r.Context(), share); err != nil {
		switch {
		case apierrors.IsAlreadyExists(err):
			mistakes.add("name", "A link of this name exists: choose another.")
		case apierrors.IsForbidden(err):
			mistakes.add("", "The team has as many share links as it may have: delete one first.")
		case apierrors.IsInvalid(err):
			mistakes.add("", err.Error())
		default:
			return err
		}
		return onForm(mistakes, again)
	}
	if err := u.cookies.set(w, r, flashCookie, newKey{Name: share.Name, Token: token}); err != nil {
		return err
	}
	http.Redirect(w, r, "/shares/"+share.Name+"/created", http.StatusSeeOther)
	return nil
}

// shareCreated is the one page that shows a new link.
type shareCreated struct {
	Share shareView
	URL   string
}

func (u *ui) showNewShare(w http.ResponseWriter, r *http.Request) error {
	var flash newKey
	name := chi.URLParam(r, "name")
	if !u.cookies.get(r, flashCookie, &flash) || flash.Name != name {
		return errNotFound
	}
	u.cookies.clear(w, r, flashCookie)
	var share v1alpha1.ShareLink
	if err := u.client.Get(r.Context(), client.ObjectKey{Namespace: accountFrom(r.Context()).Namespace, Name: name}, &share); err != nil {
		if apierrors.IsNotFound(err) {
			return errNotFound
		}
		return err
	}
	u.render(w, r, http.StatusOK, "share_created", page{Title: "Share link created",
		Data: shareCreated{Share: viewShare(&share), URL: requestBase(r) + "/s/" + flash.Token}})
	return nil
}

// requestBase is the UI's address as the browser reached it.
func requestBase(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// shareOf is the team's link the path names.
func (u *ui) shareOf(r *http.Request) (*v1alpha1.ShareLink, error) {
	var share v1alpha1.ShareLink
	return &share, u.teamObject(r, &share)
}

func (u *ui) confirmDeleteShare(w http.ResponseWriter, r *http.Request) error {
	share, err := u.shareOf(r)
	if err != nil {
		return err
	}
	return u.confirm(w, r, confirmation{Question: "Delete the link " + share.Name + "?",
		Consequence: "Whoever has it is refused from their next visit on, and a download under way stops. The files stay on " + share.Spec.Connection + ".",
		Action:      r.URL.Path, Button: "Delete the link", Back: "/shares"})
}

// deleteShare revokes a link: refused from the next request on.
func (u *ui) deleteShare(w http.ResponseWriter, r *http.Request) error {
	ns := accountFrom(r.Context()).Namespace
	share, err := u.shareOf(r)
	if err != nil {
		return err
	}
	if err := u.client.Delete(r.Context(), share, client.Preconditions{UID: &share.UID}); err != nil {
		if apierrors.IsNotFound(err) {
			return errNotFound
		}
		return err
	}
	// Its key is owned by the link; without a garbage collector at hand,
	// the UI deletes it too.
	key := shareKeyOf(share)
	if err := u.client.Delete(r.Context(), key); err != nil && !apierrors.IsNotFound(err) {
		u.log.Warn("deleting a share link's key", "namespace", ns, "key", key.Name, "error", err)
	}
	u.notify(w, r, "The link "+share.Name+" is deleted: it opens nothing any more.")
	http.Redirect(w, r, "/shares", http.StatusSeeOther)
	return nil
}
