package tenant

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/webui/internal/web"
)

// connView is a connection, an FTP connection or a store as the pages
// show it.
type connView struct {
	Name, Slug, Endpoint string
	// Kind says in a word what it is (EndpointKind.Label); Base is where
	// its pages are, Home the one its name links to.
	Kind, Base, Home string
	// Server is where it leads, in words.
	Server   string
	Host     string
	Port     int32
	Username string
	// State is "testing", "ready" or "failed".
	State         string
	Headline      string
	Message       string
	Fingerprint   string
	ServerVersion string
	LastTest      time.Time
	// CallerRBAC is the Role and RoleBinding that let a ServiceAccount
	// call the connection.
	CallerRBAC string
}

// headlines say in words what a Ready reason means.
var headlines = map[string]string{
	v1alpha1.ReasonConnected:             "Connected",
	v1alpha1.ReasonSecretNotFound:        "The credentials are missing",
	v1alpha1.ReasonInvalidCredentials:    "The password or private key cannot be used",
	v1alpha1.ReasonInvalidHostKey:        "The pinned host key is not valid",
	v1alpha1.ReasonDNSError:              "The host name could not be found",
	v1alpha1.ReasonDestinationNotAllowed: "This address is not allowed from here",
	v1alpha1.ReasonConnectionRefused:     "Nothing answers on that port",
	v1alpha1.ReasonHostUnreachable:       "The host cannot be reached",
	v1alpha1.ReasonTimeout:               "The server did not answer in time",
	v1alpha1.ReasonHostKeyMismatch:       "The server's host key does not match",
	v1alpha1.ReasonAuthenticationFailed:  "The server refused the username, password or key",
	v1alpha1.ReasonSSHHandshakeFailed:    "The SSH handshake failed",
	v1alpha1.ReasonSFTPUnavailable:       "The server does not offer SFTP",
	v1alpha1.ReasonRootPathNotFound:      "The folder does not exist on the server",
	v1alpha1.ReasonRootPathInaccessible:  "The folder cannot be opened",
	v1alpha1.ReasonSlugConflict:          "The endpoint name is taken",
	v1alpha1.ReasonTLSHandshakeFailed:    "The TLS handshake failed",
	v1alpha1.ReasonCertificateNotTrusted: "The server's certificate is not the one trusted",
	v1alpha1.ReasonPassiveModeFailed:     "Logged in, but no data connection opened",
	v1alpha1.ReasonFTPUnavailable:        "The server does not speak FTP",
	v1alpha1.ReasonPlaintextNotAllowed:   "Plain FTP is not allowed here",
	v1alpha1.ReasonBucketNotFound:        "The bucket does not exist",
	v1alpha1.ReasonStoreUnavailable:      "The store did not answer",
}

// View is a connection as its own pages show it.
func (u *Pages) View(c *v1alpha1.SftpConnection) connView {
	v := u.endpointView(c)
	v.Host, v.Port, v.Username = c.Spec.Host, c.Spec.Port, c.Spec.Username
	v.Fingerprint, v.ServerVersion, v.CallerRBAC = c.Status.HostKeyFingerprint, c.Status.ServerVersion, callerRBAC(c.Namespace, c.Name)
	return v
}

// ListConnections answers GET /connections: the account's SFTP
// connections, and its FTP connections and stores, whose names lead to
// their files.
func (u *Pages) ListConnections(w http.ResponseWriter, r *http.Request) error {
	all, err := u.endpoints(r.Context(), web.AccountFrom(r.Context()).Namespace)
	if err != nil {
		return err
	}
	views := make([]connView, 0, len(all))
	testing := false
	for _, e := range all {
		v := u.endpointView(e)
		testing = testing || v.State == "testing"
		views = append(views, v)
	}
	slices.SortStableFunc(views, func(a, b connView) int { return strings.Compare(a.Name, b.Name) })
	u.Render(w, r, http.StatusOK, "connections", web.Page{Title: "Connections", Data: views, Refresh: testing})
	return nil
}

// WithConnection runs fn with the named SftpConnection of the request's
// account, or answers 404 (WithEndpoint).
func (u *Pages) WithConnection(fn func(http.ResponseWriter, *http.Request, *v1alpha1.SftpConnection) error) web.PageFunc {
	return u.WithEndpoint(v1alpha1.KindSftpConnection, func(w http.ResponseWriter, r *http.Request, e v1alpha1.Endpoint) error {
		return fn(w, r, e.(*v1alpha1.SftpConnection)) //nolint:forcetypeassert // NewEndpoint's of the kind
	})
}

// connectionPage is the data of a connection's page.
type connectionPage struct {
	Conn    connView
	Keys    []keyView
	Watches []watchView
	Try     *tryResult
	// Commands are those "try it" offers.
	Commands []v1alpha1.Command
}

// ShowConnection answers GET /connections/{name}.
func (u *Pages) ShowConnection(w http.ResponseWriter, r *http.Request, c *v1alpha1.SftpConnection) error {
	return u.renderConnection(w, r, c, nil)
}

func (u *Pages) renderConnection(w http.ResponseWriter, r *http.Request, c *v1alpha1.SftpConnection, try *tryResult) error {
	keys, err := u.keys(r.Context(), c.Name)
	if err != nil {
		return err
	}
	watches, err := u.watches(r.Context(), c)
	if err != nil {
		return err
	}
	v := u.View(c)
	u.Render(w, r, http.StatusOK, "connection", web.Page{Title: c.Name, Data: connectionPage{Conn: v, Keys: keys, Watches: watches, Try: try, Commands: tryCommands},
		Refresh: v.State == "testing"})
	return nil
}

// The connection form's fields.
const (
	authPassword = "password"
	authKey      = "key"
	trustFirst   = "first-use"
	trustPinned  = "pinned"
)

// NewConnection answers GET /connections/new.
func (u *Pages) NewConnection(w http.ResponseWriter, r *http.Request) error {
	u.Render(w, r, http.StatusOK, "connection_form", web.Page{Title: "Add a connection",
		Form: map[string]string{"port": "22", "auth": authPassword, "trust": trustFirst}})
	return nil
}

// connectionForm is the submitted form, checked.
type connectionForm struct {
	values map[string]string
	// credentials are the Secret's data; empty when editing without
	// changing them.
	credentials map[string][]byte
	port        int32
	pinned      []string
}

// MaxKeyFile bounds a private key file: real ones are a few KiB.
const MaxKeyFile = 64 << 10

// MaxForm bounds a request body: the largest form holds a private key
// file.
const MaxForm = MaxKeyFile + 64<<10

// readConnectionForm reads and checks the form. creating: the name and
// the credentials are required; currentAuth is how an existing connection
// logs in now (authPassword or authKey).
// readConnectionForm reads the form of a new connection (current nil), or
// of current's edit, whose credentials log in with currentAuth.
func readConnectionForm(r *http.Request, current *v1alpha1.SftpConnection, currentAuth string) (*connectionForm, error) {
	creating := current == nil
	if err := r.ParseMultipartForm(MaxForm); err != nil && !errors.Is(err, http.ErrNotMultipart) { //nolint:gosec // bounded by MaxForm
		return nil, &web.PersonError{Msg: "the form is too large: a private key file is at most 64 KiB"}
	}
	f := &connectionForm{values: map[string]string{}}
	for _, k := range []string{"name", "host", "port", "username", "auth", "trust", "hostKey", "rootPath", "generation"} {
		f.values[k] = strings.TrimSpace(r.PostFormValue(k))
	}
	if !creating {
		f.values["name"] = chi.URLParam(r, "name")
	}
	v := f.values
	mistakes := web.FieldErrors{}
	if errs := validation.IsDNS1123Label(v["name"]); creating && (len(errs) > 0 || len(v["name"]) > 40) {
		mistakes.Add("name", "The name must be at most 40 lower-case letters, digits and dashes, starting and ending with a letter or digit.")
	}
	if v["host"] == "" || strings.ContainsAny(v["host"], " /@") {
		mistakes.Add("host", "Enter the server's host name or IP address, like sftp.example.com.")
	}
	port, err := strconv.ParseUint(cmp.Or(v["port"], "22"), 10, 16)
	if err != nil || port < 1 {
		mistakes.Add("port", "The port is a number from 1 to 65535 (SFTP is usually on 22).")
	}
	f.port = int32(port)
	if v["username"] == "" {
		mistakes.Add("username", "Enter the username to log in as.")
	}
	switch v["auth"] {
	case authPassword:
		if pw := r.PostFormValue("password"); pw != "" {
			f.credentials = map[string][]byte{v1alpha1.SecretKeyPassword: []byte(pw)}
		}
	case authKey:
		key := strings.TrimSpace(r.PostFormValue("privateKey"))
		if file, header, err := r.FormFile("privateKeyFile"); err == nil {
			b, _ := io.ReadAll(io.LimitReader(file, MaxKeyFile+1))
			_ = file.Close()
			if len(b) > MaxKeyFile {
				mistakes.Add("privateKey", header.Filename+" is not a private key: it is over 64 KiB.")
			}
			if len(b) > 0 && len(b) <= MaxKeyFile {
				key = strings.TrimSpace(string(b))
			}
		}
		if key != "" {
			f.credentials = map[string][]byte{v1alpha1.SecretKeyPrivateKey: []byte(key + "\n")}
			if pass := r.PostFormValue("passphrase"); pass != "" {
				f.credentials[v1alpha1.SecretKeyPassphrase] = []byte(pass)
			}
		}
	default:
		mistakes.Add("auth", "Choose how to log in: a password or a private key.")
	}
	// New credentials are needed for a new connection, when the way to log
	// in changes, and when the server or user does: stored credentials
	// never follow a changed host to a server of someone's choosing (a
	// stolen session cannot send the password there).
	moved := !creating && (v["host"] != current.Spec.Host || f.port != current.Spec.Port || v["username"] != current.Spec.Username)
	if f.credentials == nil && (creating || moved || v["auth"] != currentAuth) {
		again := ""
		if moved {
			again = " again: the server or the user changed, and stored credentials are never sent to another"
		}
		switch v["auth"] {
		case authKey:
			mistakes.Add("privateKey", "Paste the private key, or choose its file"+again+".")
		case authPassword:
			mistakes.Add("password", "Enter the password"+again+".")
		}
	}
	switch v["trust"] {
	case trustFirst:
	case trustPinned:
		for line := range strings.SplitSeq(v["hostKey"], "\n") {
			if line = strings.TrimSpace(line); line != "" {
				f.pinned = append(f.pinned, line)
			}
		}
		if len(f.pinned) == 0 {
			mistakes.Add("hostKey", `Paste the server's host key ("ssh-ed25519 AAAA…") or its fingerprint ("SHA256:…"), or choose to trust it on first use.`)
		}
	default:
		mistakes.Add("trust", "Choose how to trust the server's host key.")
	}
	return f, mistakes.Err()
}

// quotaReached says in words which of the account's limits a create ran
// into (the ResourceQuota of its namespace); other errors pass as they are.
func (u *Pages) quotaReached(err error) error {
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota") {
		return err
	}
	switch msg := err.Error(); {
	case strings.Contains(msg, "count/sftpconnections"):
		return &web.PersonError{Msg: fmt.Sprintf("this account has reached its limit of %d connections: delete one to add another", u.Quota.Connections)}
	case strings.Contains(msg, "count/apikeys"):
		return &web.PersonError{Msg: fmt.Sprintf("this account has reached its limit of %d API keys: revoke one to make another", u.Quota.Keys)}
	case strings.Contains(msg, "count/transfers"):
		return &web.PersonError{Msg: fmt.Sprintf("this account has reached its limit of %d transfers: remove finished ones to start another", u.Quota.Transfers)}
	case strings.Contains(msg, "count/sftpwatches"):
		return &web.PersonError{Msg: fmt.Sprintf("this account has reached its limit of %d watched folders: stop watching one to add another", u.Quota.Watches)}
	}
	return &web.PersonError{Msg: fmt.Sprintf("this account has reached its limit of %d stored credentials: delete a connection to add another", u.Quota.Secrets)}
}

// apply sets what the form says on a connection's spec.
func (f *connectionForm) apply(c *v1alpha1.SftpConnection) {
	c.Spec.Host, c.Spec.Port, c.Spec.Username = f.values["host"], f.port, f.values["username"]
	c.Spec.RootPath = f.values["rootPath"]
	c.Spec.HostKey = v1alpha1.HostKeyTrust{Trusted: f.pinned}
}

// CreateConnection answers POST /connections.
func (u *Pages) CreateConnection(w http.ResponseWriter, r *http.Request) error {
	acct := web.AccountFrom(r.Context())
	f, err := readConnectionForm(r, nil, "")
	if err == nil {
		err = u.create(r.Context(), acct.Namespace, f)
	}
	if err != nil {
		return web.OnForm(err, u.connectionForm("Add a connection", f))
	}
	http.Redirect(w, r, "/connections/"+f.values["name"], http.StatusSeeOther)
	return nil
}

// create makes the credentials Secret and the connection, owned by it.
func (u *Pages) create(ctx context.Context, namespace string, f *connectionForm) error {
	name := f.values["name"]
	var existing v1alpha1.SftpConnection
	if err := u.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &existing); err == nil {
		return &web.PersonError{Msg: fmt.Sprintf("you already have a connection named %q; choose another name", name)}
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: name + "-credentials-",
			Labels: map[string]string{labelConnection: name}},
		Data: f.credentials,
	}
	if err := u.Client.Create(ctx, secret); err != nil {
		return u.quotaReached(err)
	}
	// The slug is cluster-wide: a random suffix keeps two accounts' "prod"
	// apart.
	conn := &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	conn.Spec.Slug = name + "-" + strings.ToLower(rand.Text()[:6])
	conn.Spec.Credentials.SecretRef.Name = secret.Name
	f.apply(conn)
	if err := u.Client.Create(ctx, conn); err != nil {
		_ = u.Client.Delete(ctx, secret)
		if apierrors.IsAlreadyExists(err) {
			return &web.PersonError{Msg: fmt.Sprintf("you already have a connection named %q; choose another name", name)}
		}
		if apierrors.IsInvalid(err) {
			return &web.PersonError{Msg: "the server refused these settings: " + invalidCauses(err)}
		}
		return u.quotaReached(err)
	}
	// Deleting the connection (kubectl too) deletes its credentials. The
	// connection exists now: a failure here is only logged (the UI's own
	// delete finds the Secret by its label anyway).
	patch := client.MergeFrom(secret.DeepCopy())
	secret.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "SftpConnection",
		Name: conn.Name, UID: conn.UID}}
	if err := u.Client.Patch(ctx, secret, patch); err != nil {
		u.Log.Warn("setting the owner of a connection's credentials", "namespace", namespace, "connection", name, "error", err)
	}
	return nil
}

// labelConnection names the connection a credentials Secret belongs to.
const labelConnection = "sftpgate.dev/connection"

// invalidCauses lists what the API server's validation said, field by
// field: the CRD's own messages are written for people.
func invalidCauses(err error) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return "invalid"
	}
	var causes []string
	for _, c := range status.Status().Details.Causes {
		causes = append(causes, strings.TrimPrefix(c.Field, "spec.")+": "+c.Message)
	}
	return strings.Join(causes, "; ")
}

// connectionForm draws the connection form again, filled as f was sent.
func (u *Pages) connectionForm(title string, f *connectionForm) web.DrawForm {
	return func(w http.ResponseWriter, r *http.Request, status int, problem web.Problems) error {
		var values map[string]string
		if f != nil {
			values = f.values
		}
		u.Render(w, r, status, "connection_form", web.Page{Title: title, Error: problem.Form, Errors: problem.Fields, Form: values})
		return nil
	}
}

// EditConnection answers GET /connections/{name}/edit.
func (u *Pages) EditConnection(w http.ResponseWriter, r *http.Request, c *v1alpha1.SftpConnection) error {
	values := map[string]string{"name": c.Name, "host": c.Spec.Host, "port": strconv.Itoa(int(c.Spec.Port)),
		"username": c.Spec.Username, "rootPath": c.Spec.RootPath, "auth": u.currentAuth(r.Context(), c), "trust": trustFirst, "editing": "true",
		"generation": strconv.FormatInt(c.Generation, 10)}
	if len(c.Spec.HostKey.Trusted) > 0 {
		values["trust"], values["hostKey"] = trustPinned, strings.Join(c.Spec.HostKey.Trusted, "\n")
	}
	u.Render(w, r, http.StatusOK, "connection_form", web.Page{Title: "Edit " + c.Name, Form: values})
	return nil
}

// currentAuth is how a connection logs in now, as its credentials say.
func (u *Pages) currentAuth(ctx context.Context, c *v1alpha1.SftpConnection) string {
	var secret corev1.Secret
	if err := u.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.Credentials.SecretRef.Name}, &secret); err == nil {
		if _, ok := secret.Data[v1alpha1.SecretKeyPrivateKey]; ok {
			return authKey
		}
	}
	return authPassword
}

// UpdateConnection answers POST /connections/{name}/edit.
func (u *Pages) UpdateConnection(w http.ResponseWriter, r *http.Request, c *v1alpha1.SftpConnection) error {
	f, err := readConnectionForm(r, c, u.currentAuth(r.Context(), c))
	if err == nil {
		err = u.update(r.Context(), c, f)
	}
	if err != nil {
		if f != nil {
			f.values["editing"] = "true"
		}
		return web.OnForm(err, u.connectionForm("Edit "+c.Name, f))
	}
	http.Redirect(w, r, "/connections/"+c.Name, http.StatusSeeOther)
	return nil
}

// update writes new credentials (if given) and the spec; either change
// makes the controller test again. The spec is checked by the API server
// first, so that refused settings leave the credentials as they were.
func (u *Pages) update(ctx context.Context, c *v1alpha1.SftpConnection, f *connectionForm) error {
	// Test again even when only the Secret changed, and let the page tell
	// when that test has answered.
	requested := time.Now().UTC().Format(time.RFC3339Nano)
	write := func(opts ...client.UpdateOption) error {
		// The controller writes status all the while (and tests at once
		// when the Secret changes): a conflict from that is retried on the
		// fresh object; a change of the spec by someone else is not.
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var fresh v1alpha1.SftpConnection
			if err := u.Client.Get(ctx, client.ObjectKeyFromObject(c), &fresh); err != nil {
				return err
			}
			// The generation the form was opened on, when it says.
			if seen := f.values["generation"]; fresh.Generation != c.Generation || (seen != "" && seen != strconv.FormatInt(fresh.Generation, 10)) {
				return errChangedMeanwhile
			}
			f.apply(&fresh)
			if fresh.Annotations == nil {
				fresh.Annotations = map[string]string{}
			}
			fresh.Annotations[v1alpha1.AnnotationTestRequestedAt] = requested
			return u.Client.Update(ctx, &fresh, opts...)
		})
	}
	if err := write(client.DryRunAll); err != nil {
		return updateError(err)
	}
	if f.credentials != nil {
		var secret corev1.Secret
		if err := u.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.Credentials.SecretRef.Name}, &secret); err != nil {
			return err
		}
		secret.Data = f.credentials
		if err := u.Client.Update(ctx, &secret); err != nil {
			return err
		}
	}
	return updateError(write())
}

// errChangedMeanwhile is a connection whose spec someone else changed
// while the form was open.
var errChangedMeanwhile = &web.PersonError{Msg: "the connection changed while you edited it; open it again and redo your change"}

func updateError(err error) error {
	switch {
	case apierrors.IsConflict(err):
		return errChangedMeanwhile
	case apierrors.IsInvalid(err):
		return &web.PersonError{Msg: "the server refused these settings: " + invalidCauses(err)}
	}
	return err
}

// forgetConnection takes a deleted connection out of its keys' scopes:
// keys for it alone are revoked and its watches deleted, so that a new
// connection of the same name does not inherit them; other keys keep their
// other connections.
func (u *Pages) forgetConnection(ctx context.Context, c *v1alpha1.SftpConnection) error {
	var watches v1alpha1.SftpWatchList
	if err := u.Client.List(ctx, &watches, client.InNamespace(c.Namespace)); err != nil {
		return err
	}
	for i := range watches.Items {
		if watches.Items[i].Spec.ConnectionRef.Name == c.Name {
			if err := client.IgnoreNotFound(u.Client.Delete(ctx, &watches.Items[i])); err != nil {
				return err
			}
		}
	}
	var keys v1alpha1.ApiKeyList
	if err := u.Client.List(ctx, &keys, client.InNamespace(c.Namespace)); err != nil {
		return err
	}
	for i := range keys.Items {
		key := &keys.Items[i]
		if !slices.Contains(key.Spec.Connections, c.Name) {
			continue
		}
		var err error
		if len(key.Spec.Connections) == 1 {
			err = client.IgnoreNotFound(u.Client.Delete(ctx, key))
		} else {
			key.Spec.Connections = slices.DeleteFunc(key.Spec.Connections, func(n string) bool { return n == c.Name })
			err = u.Client.Update(ctx, key)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ConfirmDeleteConnection answers GET /connections/{name}/delete.
func (u *Pages) ConfirmDeleteConnection(w http.ResponseWriter, r *http.Request, c *v1alpha1.SftpConnection) error {
	return u.Confirm(w, r, web.Confirmation{Question: "Delete " + c.Name + "?",
		Consequence: "Calls to " + u.View(c).Endpoint + " will stop working, its stored credentials are deleted, and API keys made for this connection alone are revoked. Files on the server are not touched.",
		Action:      r.URL.Path, Button: "Delete the connection", Back: "/connections/" + c.Name})
}

// DeleteConnection answers POST /connections/{name}/delete.
func (u *Pages) DeleteConnection(w http.ResponseWriter, r *http.Request, c *v1alpha1.SftpConnection) error {
	if err := client.IgnoreNotFound(u.Client.Delete(r.Context(), c)); err != nil {
		return err
	}
	// Its credentials too, when the UI made them for it (the owner
	// reference does the same where garbage collection runs).
	var secret corev1.Secret
	err := u.Client.Get(r.Context(), client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.Credentials.SecretRef.Name}, &secret)
	if err == nil && secret.Labels[labelConnection] == c.Name {
		err = u.Client.Delete(r.Context(), &secret)
	}
	if err = client.IgnoreNotFound(err); err == nil {
		err = u.forgetConnection(r.Context(), c)
	}
	if err != nil {
		return err
	}
	u.Notify(w, r, "The connection "+c.Name+" is deleted. Its files on the server are untouched.")
	http.Redirect(w, r, "/connections", http.StatusSeeOther)
	return nil
}
