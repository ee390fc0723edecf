package tenant

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/apitoken"
	"github.com/sftpgate/sftpgate/webui/internal/gw"
	"github.com/sftpgate/sftpgate/webui/internal/share"
	"github.com/sftpgate/sftpgate/webui/internal/web"
)

// keyView is an API key as the pages show it: never its token.
type keyView struct {
	// Name is the ApiKey's; Title what the person named it (may be empty).
	Name, KeyID, Title string
	// Scope is the connection the key is for; empty: all of the account's.
	Scope string
	// Paths are the folders the key is limited to; empty: all.
	Paths   string
	Expires *time.Time
	Status  string
	Created time.Time
	// LastUsed is when a gateway last let a request in with the key;
	// zero for never.
	LastUsed time.Time
}

// keys lists the account's keys; with connection set, those that can use
// it.
func (u *Pages) keys(ctx context.Context, connection string) ([]keyView, error) {
	acct := web.AccountFrom(ctx)
	var list v1alpha1.ApiKeyList
	if err := u.Client.List(ctx, &list, client.InNamespace(acct.Namespace)); err != nil {
		return nil, err
	}
	var views []keyView
	for _, k := range list.Items {
		if k.Labels[gw.LabelFilesKey] != "" || k.Labels[share.LabelShareKey] != "" {
			continue // the file browser's own (fileskey.go), or a share link's (sharepage.go)
		}
		if connection != "" && len(k.Spec.Connections) > 0 && !slices.Contains(k.Spec.Connections, connection) {
			continue
		}
		v := keyView{Name: k.Name, KeyID: cmp.Or(k.Status.KeyID, k.Spec.Token.KeyID), Title: k.Annotations[annotationKeyName], Scope: strings.Join(k.Spec.Connections, ", "),
			Paths: strings.Join(k.Spec.Paths, ", "), Created: k.CreationTimestamp.Time, Status: "Being issued…"}
		if k.Spec.ExpiresAt != nil {
			t := k.Spec.ExpiresAt.Time
			v.Expires = &t
		}
		if k.Status.LastUsedTime != nil {
			v.LastUsed = k.Status.LastUsedTime.Time
		}
		if ready := meta.FindStatusCondition(k.Status.Conditions, v1alpha1.ConditionReady); ready != nil && ready.ObservedGeneration == k.Generation {
			v.Status = ready.Reason
			if ready.Status == metav1.ConditionTrue {
				v.Status = "Active"
			}
		}
		views = append(views, v)
	}
	slices.SortFunc(views, func(a, b keyView) int { return b.Created.Compare(a.Created) })
	return views, nil
}

// ListKeys answers GET /keys.
func (u *Pages) ListKeys(w http.ResponseWriter, r *http.Request) error {
	keys, err := u.keys(r.Context(), "")
	if err != nil {
		return err
	}
	u.Render(w, r, http.StatusOK, "keys", web.Page{Title: "API keys", Data: keys})
	return nil
}

// keyFormData is the data of the new-key form: the connections to scope to.
type keyFormData struct {
	Connections []string
}

// NewKeyForm answers GET /keys/new.
func (u *Pages) NewKeyForm(w http.ResponseWriter, r *http.Request) error {
	return u.keyForm(map[string]string{"connection": r.URL.Query().Get("connection"), "expires": "never"})(w, r, http.StatusOK, web.Problems{})
}

// keyForm draws the new-key form, filled with values.
func (u *Pages) keyForm(values map[string]string) web.DrawForm {
	return func(w http.ResponseWriter, r *http.Request, status int, problem web.Problems) error {
		var list v1alpha1.SftpConnectionList
		if err := u.Client.List(r.Context(), &list, client.InNamespace(web.AccountFrom(r.Context()).Namespace)); err != nil {
			return err
		}
		var names []string
		for _, c := range list.Items {
			names = append(names, c.Name)
		}
		slices.Sort(names)
		u.Render(w, r, status, "key_form", web.Page{Title: "Create an API key", Form: values, Error: problem.Form, Errors: problem.Fields, Data: keyFormData{Connections: names}})
		return nil
	}
}

// expiries are the choices of the form.
var expiries = map[string]time.Duration{"30d": 30 * 24 * time.Hour, "90d": 90 * 24 * time.Hour, "1y": 365 * 24 * time.Hour}

// CreateKey makes a token, creates an ApiKey holding only its hash, and
// hands the token to the one page that shows it.
func (u *Pages) CreateKey(w http.ResponseWriter, r *http.Request) error {
	acct := web.AccountFrom(r.Context())
	values := map[string]string{"name": strings.TrimSpace(r.PostFormValue("name")), "connection": r.PostFormValue("connection"),
		"expires": r.PostFormValue("expires"), "paths": r.PostFormValue("paths")}
	key, err := u.readKeyForm(r, acct.Namespace, values)
	if err == nil {
		err = u.quotaReached(u.Client.Create(r.Context(), key.ApiKey))
		web.NoteObject(r, "ApiKey", key.Name)
	}
	if err != nil {
		return web.OnForm(err, u.keyForm(values))
	}
	if err := u.Cookies.Set(w, r, web.FlashCookie, web.NewKey{Name: key.Name, Token: key.token}); err != nil {
		return err
	}
	http.Redirect(w, r, "/keys/"+key.Name+"/created", http.StatusSeeOther)
	return nil
}

// madeKey is an ApiKey the form describes, and the token whose hash it
// holds.
type madeKey struct {
	*v1alpha1.ApiKey
	token string
}

// readKeyForm checks the new-key form's values and makes the key they
// describe in namespace.
func (u *Pages) readKeyForm(r *http.Request, namespace string, values map[string]string) (madeKey, error) {
	mistakes := web.FieldErrors{}
	key := &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: namespace}}
	if name := values["name"]; name != "" {
		if utf8.RuneCountInString(name) > maxKeyName || strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
			mistakes.Add("name", fmt.Sprintf("A key's name is at most %d letters, digits, spaces or signs.", maxKeyName))
		}
		key.Annotations = map[string]string{annotationKeyName: name}
	}
	if c := values["connection"]; c != "" {
		var conn v1alpha1.SftpConnection
		if err := u.Client.Get(r.Context(), client.ObjectKey{Namespace: namespace, Name: c}, &conn); apierrors.IsNotFound(err) {
			mistakes.Add("connection", "That connection does not exist any more.")
		} else if err != nil {
			return madeKey{}, err
		}
		key.Spec.Connections = []string{c}
	}
	switch e := values["expires"]; {
	case e == "never" || e == "":
	case expiries[e] > 0:
		key.Spec.ExpiresAt = &metav1.Time{Time: time.Now().Add(expiries[e]).Truncate(time.Second)}
	default:
		mistakes.Add("expires", "Choose when the key expires.")
	}
	paths, problem := parsePaths(values["paths"])
	if problem != "" {
		mistakes.Add("paths", problem)
	}
	if err := mistakes.Err(); err != nil {
		return madeKey{}, err
	}
	key.Spec.Paths = paths
	token, keyID := apitoken.NewToken()
	key.Name = "key-" + keyID
	key.Spec.Token = v1alpha1.TokenSource{SHA256: apitoken.Hash(token), KeyID: keyID}
	return madeKey{ApiKey: key, token: token}, nil
}

// maxKeyPaths is the most folders a key may be limited to (the CRD's
// bound on spec.paths).
const maxKeyPaths = 32

// A key's name, for people: an annotation, at most maxKeyName characters.
const (
	annotationKeyName = "sftpgate.dev/name"
	maxKeyName        = 63
)

// parsePaths reads the form's folders, one per line or separated by
// commas, as ApiKey.spec.paths; problem says what is wrong, in words for
// the form.
func parsePaths(field string) (paths []string, problem string) {
	for _, p := range strings.FieldsFunc(field, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' }) {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		parts := strings.Split(p, "/")
		switch {
		case !strings.HasPrefix(p, "/") || len(p) > 1024 || strings.ContainsRune(p, 0):
			return nil, fmt.Sprintf("%q is not a folder of the connection: start it with / (such as /incoming/).", p)
		case slices.Contains(parts, ".") || slices.Contains(parts, ".."):
			return nil, fmt.Sprintf("%q has a . or .. part: name the folder itself.", p)
		case slices.Contains(paths, p):
			continue
		}
		paths = append(paths, p)
	}
	if len(paths) > maxKeyPaths {
		return nil, fmt.Sprintf("A key may be limited to at most %d folders.", maxKeyPaths)
	}
	return paths, ""
}

// newKeyPage is the data of the page that shows a new key once.
type newKeyPage struct {
	KeyID string
	Token string
	// Curl is a ready-to-paste write with the key.
	Curl string
	// Connection is the key's one connection, if it has one: where "Done"
	// leads.
	Connection string
}

// ShowNewKey answers GET /keys/{name}/created.
func (u *Pages) ShowNewKey(w http.ResponseWriter, r *http.Request) error {
	acct := web.AccountFrom(r.Context())
	name := chi.URLParam(r, "name")
	var key v1alpha1.ApiKey
	if err := u.Client.Get(r.Context(), client.ObjectKey{Namespace: acct.Namespace, Name: name}, &key); apierrors.IsNotFound(err) {
		return web.ErrNotFound
	} else if err != nil {
		return err
	}
	var flash web.NewKey
	got := u.Cookies.Get(r, web.FlashCookie, &flash) && flash.Name == name
	if got {
		u.Cookies.Clear(w, r, web.FlashCookie)
	}
	p := newKeyPage{KeyID: key.Spec.Token.KeyID}
	if len(key.Spec.Connections) == 1 {
		p.Connection = key.Spec.Connections[0]
	}
	if got {
		p.Token = flash.Token
		p.Curl = u.curl(r.Context(), acct.Namespace, key.Spec.Connections, flash.Token)
	}
	u.Render(w, r, http.StatusOK, "key_created", web.Page{Title: "Your new API key", Data: p})
	return nil
}

// curl is a write through the gateway with token, on the key's connection
// (or the account's first).
func (u *Pages) curl(ctx context.Context, namespace string, connections []string, token string) string {
	slug := "<connection>"
	var list v1alpha1.SftpConnectionList
	if err := u.Client.List(ctx, &list, client.InNamespace(namespace)); err == nil {
		for _, c := range list.Items {
			if len(connections) == 0 || slices.Contains(connections, c.Name) {
				slug = u.View(&c).Slug
				break
			}
		}
	}
	const body = `{"path": "hello.txt", "file": {"text": "Hello from sftpgate!"}}`
	return "curl -X POST " + u.GatewayURL + "/" + slug + "/write \\\n" +
		"  -H 'Authorization: Bearer " + token + "' \\\n" +
		"  -H 'Content-Type: application/json' \\\n" +
		"  -d '" + body + "'"
}

// keyOf is the team's API key the path names.
func (u *Pages) keyOf(r *http.Request) (*v1alpha1.ApiKey, error) {
	var key v1alpha1.ApiKey
	return &key, u.teamObject(r, &key)
}

// keyCalled names a key for people: its name and id, or its id.
func keyCalled(key *v1alpha1.ApiKey) string {
	id := cmp.Or(key.Status.KeyID, key.Spec.Token.KeyID)
	if name := key.Annotations[annotationKeyName]; name != "" {
		return name + " (" + id + ")"
	}
	return id
}

// keysPageOf is the page a key is revoked from: its connection's, when
// the form came from there, or the keys page.
func keysPageOf(connection string) string {
	if validation.IsDNS1123Label(connection) == nil {
		return "/connections/" + connection
	}
	return "/keys"
}

// ConfirmRevokeKey answers GET /keys/{name}/revoke.
func (u *Pages) ConfirmRevokeKey(w http.ResponseWriter, r *http.Request) error {
	key, err := u.keyOf(r)
	if err != nil {
		return err
	}
	connection := r.URL.Query().Get("connection")
	return u.Confirm(w, r, web.Confirmation{Question: "Revoke the API key " + keyCalled(key) + "?",
		Consequence: "Programs that send it are refused from their next request on. A revoked key cannot be restored: they need a new one.",
		Action:      r.URL.Path, Button: "Revoke the key", Hidden: map[string]string{"connection": connection}, Back: keysPageOf(connection)})
}

// RevokeKey answers POST /keys/{name}/revoke.
func (u *Pages) RevokeKey(w http.ResponseWriter, r *http.Request) error {
	key, err := u.keyOf(r)
	if err != nil {
		return err
	}
	if err := u.Client.Delete(r.Context(), key, client.Preconditions{UID: &key.UID}); apierrors.IsNotFound(err) {
		return web.ErrNotFound
	} else if err != nil {
		return err
	}
	u.Notify(w, r, "The API key "+keyCalled(key)+" is revoked.")
	http.Redirect(w, r, keysPageOf(r.PostFormValue("connection")), http.StatusSeeOther) //nolint:gosec // a path of this site
	return nil
}
