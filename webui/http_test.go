package webui_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"html"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/webui"
	"github.com/sftpgate/sftpgate/webui/accounts"
)

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// uiClient is a person using the UI without a browser: cookies, no
// JavaScript.
type uiClient struct {
	base  string
	http  *http.Client
	email string
}

func newClient(t *testing.T) *uiClient {
	jar, err := cookiejar.New(nil)
	must(t, err)
	return &uiClient{base: uiURL, http: &http.Client{Jar: jar}, email: newEmail(t)}
}

func (c *uiClient) do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := c.http.Do(req)
	must(t, err)
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	must(t, err)
	return resp.StatusCode, string(raw)
}

func (c *uiClient) get(t *testing.T, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, c.base+path, nil)
	must(t, err)
	return c.do(t, req)
}

// form posts values as a same-origin page would, following redirects.
func (c *uiClient) form(t *testing.T, path string, values url.Values) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.base+path, strings.NewReader(values.Encode()))
	must(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", c.base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return c.do(t, req)
}

func (c *uiClient) signUp(t *testing.T) {
	t.Helper()
	status, body := c.form(t, "/signup", url.Values{"email": {c.email}, "password": {"a long enough password"}})
	if status != http.StatusOK || !strings.Contains(body, "Add a connection") {
		t.Fatalf("sign-up: %d %s", status, body)
	}
}

// TestAccountsAreApart: one account sees none of another's connections or
// keys, and gets 404 on their URLs, for reading and changing alike.
func TestAccountsAreApart(t *testing.T) {
	t.Parallel()
	alice, bob := newClient(t), newClient(t)
	alice.signUp(t)
	bob.signUp(t)
	status, _ := alice.form(t, "/connections", url.Values{"name": {"alices"}, "host": {"127.0.0.1"}, "port": {"2"},
		"username": {"alice"}, "auth": {"password"}, "password": {"secret"}, "trust": {"first-use"}})
	if status != http.StatusOK {
		t.Fatalf("alice adds a connection: %d", status)
	}
	if _, body := bob.get(t, "/connections"); strings.Contains(body, "alices") {
		t.Error("bob's list shows alice's connection")
	}
	for _, path := range []string{"/connections/alices", "/connections/alices/status", "/connections/alices/edit", "/connections/alices/delete",
		"/connections/alices/files?path=/", "/connections/alices/files/view?path=/a.txt", "/connections/alices/files/download?path=/a.txt",
		"/connections/alices/files/download?path=/a.png&inline=1", "/connections/alices/files/delete?path=/a.txt"} {
		if status, _ := bob.get(t, path); status != http.StatusNotFound {
			t.Errorf("bob GET %s: %d, want 404", path, status)
		}
	}
	// The file browser's uploads (tus), every method.
	for _, method := range []string{http.MethodOptions, http.MethodPost, http.MethodHead, http.MethodPatch, http.MethodDelete} {
		req, err := http.NewRequest(method, uiURL+"/connections/alices/uploads/"+strings.Repeat("a", 26), strings.NewReader("x"))
		must(t, err)
		req.Header.Set("Tus-Resumable", "1.0.0")
		req.Header.Set("Origin", uiURL)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		if status, _ := bob.do(t, req); status != http.StatusNotFound {
			t.Errorf("bob %s an upload of alice's connection: %d, want 404", method, status)
		}
	}
	for _, path := range []string{"/connections/alices/delete", "/connections/alices/edit", "/connections/alices/try",
		"/connections/alices/files/mkdir", "/connections/alices/files/rename", "/connections/alices/files/delete"} {
		if status, _ := bob.form(t, path, url.Values{"host": {"evil"}}); status != http.StatusNotFound {
			t.Errorf("bob POST %s: %d, want 404", path, status)
		}
	}
	if status, _ := alice.get(t, "/connections/alices"); status != http.StatusOK {
		t.Errorf("alice lost her connection: %d", status)
	}
	// A key for a connection that is not bob's is refused.
	if status, _ := bob.form(t, "/keys", url.Values{"connection": {"alices"}, "expires": {"never"}}); status != http.StatusUnprocessableEntity {
		t.Errorf("bob makes a key for alice's connection: %d", status)
	}
}

// TestCrossOriginPostRefused: a page elsewhere cannot post to the UI with
// the person's cookies.
func TestCrossOriginPostRefused(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.signUp(t)
	req, err := http.NewRequest(http.MethodPost, c.base+"/keys", strings.NewReader("expires=never"))
	must(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if status, _ := c.do(t, req); status != http.StatusForbidden {
		t.Errorf("a cross-origin POST: %d, want 403", status)
	}
	if _, body := c.get(t, "/keys"); !strings.Contains(body, "No API keys yet") {
		t.Error("the cross-origin POST made a key")
	}
}

// TestLogIn: the same answer for a wrong email and a wrong password; log-in
// and log-out work; pages need a log-in.
func TestLogIn(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.signUp(t)
	// A copy of the session, as a stolen cookie would be.
	copied := newClient(t)
	u, err := url.Parse(c.base)
	must(t, err)
	copied.http.Jar.SetCookies(u, c.http.Jar.Cookies(u))
	if _, body := copied.get(t, "/connections"); !strings.Contains(body, "Connections</h1>") {
		t.Fatal("the copied session does not work before the log-out")
	}
	status, _ := c.form(t, "/logout", nil)
	if status != http.StatusOK {
		t.Fatalf("log out: %d", status)
	}
	if _, body := c.get(t, "/connections"); !strings.Contains(body, "Log in</h1>") {
		t.Error("after logging out, /connections does not ask to log in")
	}
	if _, body := copied.get(t, "/connections"); !strings.Contains(body, "Log in</h1>") {
		t.Error("after logging out, a copy of the session still works")
	}
	_, wrongPassword := c.form(t, "/login", url.Values{"email": {c.email}, "password": {"not the password"}})
	_, wrongEmail := c.form(t, "/login", url.Values{"email": {"nobody-" + c.email}, "password": {"not the password"}})
	if !strings.Contains(wrongPassword, "wrong email or password") || !strings.Contains(wrongEmail, "wrong email or password") {
		t.Errorf("wrong password and wrong email answer differently")
	}
	if status, body := c.form(t, "/login", url.Values{"email": {strings.ToUpper(c.email)}, "password": {"a long enough password"}}); status != http.StatusOK || !strings.Contains(body, "Connections</h1>") {
		t.Errorf("log in: %d", status)
	}
	// Sign-up checks: a taken email, a short password.
	other := newClient(t)
	other.email = c.email
	if _, body := other.form(t, "/signup", url.Values{"email": {c.email}, "password": {"a long enough password"}}); !strings.Contains(body, "already exists") {
		t.Error("signing up twice with one email is not refused")
	}
	if _, body := other.form(t, "/signup", url.Values{"email": {"new-" + c.email}, "password": {"short"}}); !strings.Contains(body, "at least 10 characters") {
		t.Error("a short password is not refused")
	}
}

// TestAuthRateLimited: log-in attempts from one address are limited; so
// are those on one account from one address, which never lock out the
// owner at another; those on one account from many addresses (a botnet)
// share a budget of a few addresses; and a browser that has logged in to
// the account before has a limit of its own, so no stranger's failures
// lock the owner out of it.
func TestAuthRateLimited(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.base = newUI(func(o *webui.Options) { o.AuthPerMinute = 3 }).URL
	var statuses []int
	for i := range 5 {
		// A new email each time: only the address's limit can refuse.
		status, _ := c.form(t, "/login", url.Values{"email": {fmt.Sprintf("x%d@example.com", i)}, "password": {"wrong password"}})
		statuses = append(statuses, status)
	}
	if statuses[0] != http.StatusUnauthorized || statuses[4] != http.StatusTooManyRequests {
		t.Errorf("five quick log-ins answered %v", statuses)
	}

	owner := newClient(t)
	owner.base = newUI(func(o *webui.Options) { o.AuthPerMinute, o.TrustedProxies = 3, "127.0.0.1" }).URL
	owner.signUp(t)
	browser := func() *uiClient {
		b := newClient(t)
		b.base = owner.base
		return b
	}
	stranger := browser()
	// logIn posts the owner's email from a browser, at an address the
	// trusted proxy names.
	logIn := func(b *uiClient, from, password string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, owner.base+"/login",
			strings.NewReader(url.Values{"email": {owner.email}, "password": {password}}.Encode()))
		must(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Forwarded-For", from)
		return b.do(t, req)
	}
	statuses = nil
	for range 5 {
		status, _ := logIn(stranger, "198.51.100.1", "wrong password")
		statuses = append(statuses, status)
	}
	if statuses[0] != http.StatusUnauthorized || statuses[4] != http.StatusTooManyRequests {
		t.Errorf("a stranger's five log-ins to one account from one address answered %v", statuses)
	}
	if status, _ := logIn(browser(), "203.0.113.9", "a long enough password"); status != http.StatusOK {
		t.Errorf("the owner, from another address and a new browser, after one address's failures: %d", status)
	}
	// A botnet: two tries from each of six more addresses.
	statuses = nil
	for i := range 6 {
		for range 2 {
			status, _ := logIn(stranger, fmt.Sprintf("198.51.100.%d", i+2), "wrong password")
			statuses = append(statuses, status)
		}
	}
	if !slices.Contains(statuses, http.StatusTooManyRequests) {
		t.Errorf("twelve log-ins to one account from six addresses answered %v", statuses)
	}
	if status, page := logIn(browser(), "203.0.113.10", "a long enough password"); status != http.StatusTooManyRequests ||
		!strings.Contains(page, "a browser you have logged in to this account with before is not held up") {
		t.Errorf("a browser new to the account, while a botnet guesses: %d", status)
	}
	// From the stranger's own address, over every limit of its own.
	if status, _ := logIn(owner, "198.51.100.1", "a long enough password"); status != http.StatusOK {
		t.Errorf("the owner, from a browser it signed up with, while a botnet guesses: %d", status)
	}
}

// TestSecurityHeaders: no inline script, no framing.
func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	resp, err := http.Get(uiURL + "/login")
	must(t, err)
	_ = resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("Content-Security-Policy: %q", csp)
	}
}

// TestKeyLoginPinnedKeyRevokeDelete: a connection with a private key file
// and a pinned host key passes its test; a key made for it is listed and
// revoked; deleting the connection (after a confirmation page) removes it
// and its credentials.
func TestKeyLoginPinnedKeyRevokeDelete(t *testing.T) {
	t.Parallel()
	sshd := testsshd.Start(t)
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	must(t, err)
	sshPub, err := ssh.NewPublicKey(pub)
	must(t, err)
	sshd.AuthorizeKey(t, sshPub)
	block, err := ssh.MarshalPrivateKey(priv, "")
	must(t, err)

	c := newClient(t)
	c.signUp(t)
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for k, v := range map[string]string{"name": "keyed", "host": sshd.Host, "port": fmt.Sprint(sshd.Port), "username": testsshd.User,
		"auth": "key", "trust": "pinned", "hostKey": sshd.HostKeyLine, "rootPath": sshd.Dir} {
		must(t, mw.WriteField(k, v))
	}
	part, err := mw.CreateFormFile("privateKeyFile", "id_ed25519")
	must(t, err)
	_, _ = part.Write(pem.EncodeToMemory(block))
	must(t, mw.Close())
	req, err := http.NewRequest(http.MethodPost, c.base+"/connections", &body)
	must(t, err)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if status, page := c.do(t, req); status != http.StatusOK || !strings.Contains(page, "keyed</h1>") {
		t.Fatalf("adding a connection with a key file: %d %s", status, page)
	}
	testkit.EventuallyFound(t, "the connection is ready", func() (bool, string) {
		_, status := c.get(t, "/connections/keyed/status")
		return strings.Contains(status, `"state":"ready"`), status
	})

	if _, page := c.get(t, "/connections/keyed"); !strings.Contains(page, "sftpconnections/commands") || !strings.Contains(page, "resourceNames:") {
		t.Error("the connection page does not show the Role for a ServiceAccount")
	}

	status, page := c.form(t, "/keys", url.Values{"connection": {"keyed"}, "expires": {"30d"}})
	if status != http.StatusOK || !strings.Contains(page, "sgk_") {
		t.Fatalf("creating a key: %d", status)
	}
	var keys v1alpha1.ApiKeyList
	must(t, k8s.List(context.Background(), &keys, client.MatchingLabels{}))
	var key *v1alpha1.ApiKey
	for i := range keys.Items {
		if slices.Equal(keys.Items[i].Spec.Connections, []string{"keyed"}) {
			key = &keys.Items[i]
		}
	}
	if key == nil || key.Spec.ExpiresAt == nil || key.Spec.Token.SHA256 == "" || strings.Contains(page, key.Spec.Token.SHA256) {
		t.Fatalf("the ApiKey made: %+v", key)
	}
	if _, list := c.get(t, "/keys"); !strings.Contains(list, key.Spec.Token.KeyID) {
		t.Error("the keys page does not list the new key")
	}
	c.form(t, "/keys/"+key.Name+"/revoke", nil)
	if _, list := c.get(t, "/keys"); strings.Contains(list, key.Spec.Token.KeyID) {
		t.Error("a revoked key is still listed")
	}

	// A key for this connection alone, and one for all: deleting the
	// connection revokes the first only.
	c.form(t, "/keys", url.Values{"connection": {"keyed"}, "expires": {"never"}})
	c.form(t, "/keys", url.Values{"connection": {""}, "expires": {"never"}})
	var conn v1alpha1.SftpConnection
	must(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: key.Namespace, Name: "keyed"}, &conn))
	if status, page := c.get(t, "/connections/keyed/delete"); status != http.StatusOK || !strings.Contains(page, "Delete keyed?") {
		t.Errorf("the delete confirmation: %d", status)
	}
	if status, page := c.form(t, "/connections/keyed/delete", nil); status != http.StatusOK || strings.Contains(page, "keyed</a>") {
		t.Errorf("deleting: %d", status)
	}
	err = k8s.Get(context.Background(), client.ObjectKeyFromObject(&conn), &conn)
	secretErr := k8s.Get(context.Background(), client.ObjectKey{Namespace: conn.Namespace, Name: conn.Spec.Credentials.SecretRef.Name}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) || !apierrors.IsNotFound(secretErr) {
		t.Errorf("after deleting: connection %v, credentials %v", err, secretErr)
	}
	// The file browser's own key stays, as the key for all does.
	must(t, k8s.List(context.Background(), &keys, client.InNamespace(conn.Namespace), client.MatchingLabels{webui.LabelFilesKey: "true"}))
	files := len(keys.Items)
	must(t, k8s.List(context.Background(), &keys, client.InNamespace(conn.Namespace)))
	if files != 1 || len(keys.Items) != 2 || slices.ContainsFunc(keys.Items, func(k v1alpha1.ApiKey) bool { return len(k.Spec.Connections) != 0 }) {
		t.Errorf("after deleting the connection, the keys left are %+v", keys.Items)
	}
}

// TestEditAfterAnotherChange: saving a form opened before someone else
// changed the connection is refused, not silently undoing their change.
func TestEditAfterAnotherChange(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.signUp(t)
	form := url.Values{"name": {"shared"}, "host": {"127.0.0.1"}, "port": {"2"}, "username": {"u"},
		"auth": {"password"}, "password": {"x"}, "trust": {"first-use"}}
	if status, _ := c.form(t, "/connections", form); status != http.StatusOK {
		t.Fatalf("adding: %d", status)
	}
	_, page := c.get(t, "/connections/shared/edit")
	generation := regexp.MustCompile(`name="generation" value="(\d+)"`).FindStringSubmatch(page)
	if generation == nil {
		t.Fatal("the edit form carries no generation")
	}
	// Someone else changes it (kubectl, say).
	var conns v1alpha1.SftpConnectionList
	must(t, k8s.List(context.Background(), &conns))
	for _, conn := range conns.Items {
		if conn.Name != "shared" || conn.Spec.Username != "u" {
			continue
		}
		// The controller writes the status meanwhile: retry on conflict.
		must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var latest v1alpha1.SftpConnection
			if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(&conn), &latest); err != nil {
				return err
			}
			latest.Spec.Username = "someone-else"
			return k8s.Update(context.Background(), &latest)
		}))
	}
	form.Set("generation", generation[1])
	form.Set("host", "example.com")
	status, page := c.form(t, "/connections/shared/edit", form)
	if status != http.StatusUnprocessableEntity || !strings.Contains(page, "changed while you edited it") {
		t.Errorf("saving a stale form: %d", status)
	}
}

// TestAccountLimits: an account holds at most its quota of connections and
// keys, enforced by the API server; the form says which limit it reached.
func TestAccountLimits(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.base = newUI(func(o *webui.Options) { o.Quota = accounts.Quota{Connections: 1, Keys: 1, Secrets: 5, Watches: 1} }).URL
	c.signUp(t)
	add := func(name string) (int, string) {
		return c.form(t, "/connections", url.Values{"name": {name}, "host": {"127.0.0.1"}, "port": {"2"},
			"username": {"u"}, "auth": {"password"}, "password": {"secret"}, "trust": {"first-use"}})
	}
	if status, _ := add("first"); status != http.StatusOK {
		t.Fatalf("the first connection: %d", status)
	}
	if status, body := add("second"); status != http.StatusUnprocessableEntity || !strings.Contains(body, "limit of 1 connections") {
		t.Errorf("a connection over the limit: %d", status)
	}
	if status, _ := c.form(t, "/keys", url.Values{"connection": {"first"}, "expires": {"30d"}}); status != http.StatusOK {
		t.Fatalf("the first key: %d", status)
	}
	if status, body := c.form(t, "/keys", url.Values{"connection": {"first"}, "expires": {"30d"}}); status != http.StatusUnprocessableEntity || !strings.Contains(body, "limit of 1 API keys") {
		t.Errorf("a key over the limit: %d %s", status, body)
	}
	watch := url.Values{"path": {"/in"}, "url": {"https://example.com/hook"}, "created": {"on"}}
	if status, _ := c.form(t, "/connections/first/watches", watch); status != http.StatusOK {
		t.Fatalf("the first watch: %d", status)
	}
	if status, body := c.form(t, "/connections/first/watches", watch); status != http.StatusUnprocessableEntity || !strings.Contains(body, "limit of 1 watched folders") {
		t.Errorf("a watch over the limit: %d %s", status, body)
	}
}

// TestWatchForm: the watch form refuses what cannot work in its own words,
// keeps what was typed, and stops a watch only of the connection whose
// page it is on.
func TestWatchForm(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.signUp(t)
	for _, name := range []string{"first", "second"} {
		if status, _ := c.form(t, "/connections", url.Values{"name": {name}, "host": {"127.0.0.1"}, "port": {"2"},
			"username": {"u"}, "auth": {"password"}, "password": {"secret"}, "trust": {"first-use"}}); status != http.StatusOK {
			t.Fatalf("adding %s: %d", name, status)
		}
	}
	for _, tc := range []struct {
		values url.Values
		says   string
	}{
		{url.Values{"path": {"incoming"}, "url": {"https://example.com/h"}, "created": {"on"}}, "start it with /"},
		{url.Values{"path": {"/in/../etc"}, "url": {"https://example.com/h"}, "created": {"on"}}, "no . or .. parts"},
		{url.Values{"path": {"/in"}, "url": {"ftp://example.com/h"}, "created": {"on"}}, "the webhook&#39;s address"},
		{url.Values{"path": {"/in"}, "url": {"https://user:pw@example.com/h"}, "created": {"on"}}, "the webhook&#39;s address"},
		{url.Values{"path": {"/in"}, "url": {"https://example.com/h"}}, "at least one change"},
	} {
		status, body := c.form(t, "/connections/first/watches", tc.values)
		if status != http.StatusUnprocessableEntity || !strings.Contains(body, tc.says) || !strings.Contains(body, html.EscapeString(tc.values.Get("url"))) {
			t.Errorf("%v: %d, want 422 saying %q with the form filled", tc.values, status, tc.says)
		}
	}
	if status, _ := c.form(t, "/connections/first/watches", url.Values{"path": {"/in"}, "url": {"https://example.com/h"}, "deleted": {"on"}}); status != http.StatusOK {
		t.Fatalf("a valid watch: %d", status)
	}
	_, page := c.get(t, "/connections/first")
	name := regexp.MustCompile(`/connections/first/watches/([a-z0-9-]+)/delete`).FindStringSubmatch(page)
	if name == nil || !strings.Contains(page, "https://example.com/h") {
		t.Fatalf("the connection's page does not list the watch")
	}
	if status, _ := c.form(t, "/connections/second/watches/"+name[1]+"/delete", nil); status != http.StatusNotFound {
		t.Errorf("stopping first's watch from second's page: %d, want 404", status)
	}
	if status, _ := c.form(t, "/connections/first/watches/"+name[1]+"/delete", nil); status != http.StatusOK {
		t.Errorf("stopping the watch: %d", status)
	}
	if _, page := c.get(t, "/connections/first"); strings.Contains(page, name[1]) {
		t.Error("the stopped watch is still listed")
	}
}

// TestTransferForm: the form starts a Transfer between two of the
// account's connections, says in its own words what it refuses, and
// another account can neither see nor remove it.
func TestTransferForm(t *testing.T) {
	t.Parallel()
	c, other := newClient(t), newClient(t)
	c.signUp(t)
	other.signUp(t)
	for _, name := range []string{"partner", "archive"} {
		if status, _ := c.form(t, "/connections", url.Values{"name": {name}, "host": {"127.0.0.1"}, "port": {"2"},
			"username": {"u"}, "auth": {"password"}, "password": {"secret"}, "trust": {"first-use"}}); status != http.StatusOK {
			t.Fatalf("adding %s: %d", name, status)
		}
	}
	valid := url.Values{"from": {"partner"}, "path": {"/outgoing"}, "to": {"archive"}, "folder": {"/in"}, "mode": {"Move"},
		"overwrite": {"IfDifferent"}, "sha256": {"on"}}
	with := func(field, value string) url.Values {
		v := url.Values{}
		for k, vs := range valid {
			v[k] = vs
		}
		v.Set(field, value)
		return v
	}
	for _, tc := range []struct {
		values url.Values
		says   string
	}{
		{with("path", "outgoing"), "start it with /"},
		{with("folder", "/in/../etc"), "no . or .. parts"},
		{with("to", "someone-elses"), "no connection"},
		{with("mode", "Teleport"), "copy or to move"},
	} {
		status, body := c.form(t, "/transfers", tc.values)
		if status != http.StatusUnprocessableEntity || !strings.Contains(body, tc.says) || !strings.Contains(body, html.EscapeString(tc.values.Get("path"))) {
			t.Errorf("%v: %d, want 422 saying %q with the form filled", tc.values, status, tc.says)
		}
	}
	if status, _ := c.form(t, "/transfers", with("folder", "/outgoing")); status != http.StatusOK {
		t.Fatalf("a valid transfer: %d", status)
	}
	status, page := c.get(t, "/transfers")
	name := regexp.MustCompile(`/transfers/([a-z0-9-]+)/delete`).FindStringSubmatch(page)
	if status != http.StatusOK || name == nil || !strings.Contains(page, "partner:/outgoing") || !strings.Contains(page, "archive:/outgoing") {
		t.Fatalf("the transfers page does not list the transfer: %d", status)
	}
	var list v1alpha1.TransferList
	must(t, k8s.List(context.Background(), &list))
	for _, tr := range list.Items {
		if tr.Name == name[1] && (tr.Spec.Mode != v1alpha1.TransferMove || tr.Spec.Verify != v1alpha1.VerifySHA256 ||
			tr.Spec.Overwrite != v1alpha1.OverwriteIfDifferent || tr.Spec.TTLSecondsAfterFinished == nil) {
			t.Errorf("the transfer's spec: %+v", tr.Spec)
		}
	}
	if _, page := other.get(t, "/transfers"); strings.Contains(page, name[1]) {
		t.Error("another account sees the transfer")
	}
	if status, _ := other.form(t, "/transfers/"+name[1]+"/delete", nil); status != http.StatusNotFound {
		t.Errorf("another account removing it: %d, want 404", status)
	}
	if status, _ := c.form(t, "/transfers/"+name[1]+"/delete", nil); status != http.StatusOK {
		t.Errorf("removing it: %d", status)
	}
	if _, page := c.get(t, "/transfers"); strings.Contains(page, name[1]) {
		t.Error("the removed transfer is still listed")
	}
}

// TestClosedSignUp: with --signup=false, no one signs up; an operator adds
// accounts with "sftpgate webui add-account", and they log in.
func TestClosedSignUp(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.base = newUI(func(o *webui.Options) { o.SignUp = false }).URL
	if status, _ := c.get(t, "/signup"); status != http.StatusForbidden {
		t.Errorf("GET /signup: %d, want 403", status)
	}
	if status, _ := c.form(t, "/signup", url.Values{"email": {c.email}, "password": {"a long enough password"}}); status != http.StatusForbidden {
		t.Errorf("POST /signup: %d, want 403", status)
	}
	if _, body := c.get(t, "/login"); strings.Contains(body, "/signup") {
		t.Error("the log-in page offers to sign up")
	}
	// As the operator runs it: kubectl exec in the UI's pod, with its
	// service account's rights.
	path := filepath.Join(t.TempDir(), "kubeconfig")
	must(t, clientcmd.WriteToFile(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"c": {Server: uiConfig.Host, CertificateAuthorityData: uiConfig.CAData}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"ui": {Token: uiConfig.BearerToken}},
		Contexts:       map[string]*clientcmdapi.Context{"c": {Cluster: "c", AuthInfo: "ui"}},
		CurrentContext: "c",
	}, path))
	var out bytes.Buffer
	must(t, webui.AddAccount(context.Background(), []string{"--kubeconfig=" + path, "--email=" + c.email,
		"--accounts-namespace=" + accountsNamespace, "--service-account=" + uiNamespace + "/" + uiServiceAccount, "--bcrypt-cost=4"},
		strings.NewReader("an operator's password\n"), &out))
	if !strings.Contains(out.String(), "added account "+c.email) || strings.Contains(out.String(), "password") {
		t.Errorf("add-account said %q", out.String())
	}
	if status, body := c.form(t, "/login", url.Values{"email": {c.email}, "password": {"an operator's password"}}); status != http.StatusOK || !strings.Contains(body, "Connections</h1>") {
		t.Errorf("the added account logs in: %d", status)
	}
}
