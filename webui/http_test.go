package webui_test

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testwebui"
	"github.com/sftpgate/sftpgate/webui"
	"github.com/sftpgate/sftpgate/webui/accounts"
)

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// TestAccountsAreApart: one account sees none of another's connections or
// keys, and gets 404 on their URLs, for reading and changing alike.
func TestAccountsAreApart(t *testing.T) {
	t.Parallel()
	alice, bob := newClient(t), newClient(t)
	alice.SignUp(t)
	bob.SignUp(t)
	status, _ := alice.Form(t, "/connections", url.Values{"name": {"alices"}, "host": {"127.0.0.1"}, "port": {"2"},
		"username": {"alice"}, "auth": {"password"}, "password": {"secret"}, "trust": {"first-use"}})
	if status != http.StatusOK {
		t.Fatalf("alice adds a connection: %d", status)
	}
	if _, body := bob.Get(t, "/connections"); strings.Contains(body, "alices") {
		t.Error("bob's list shows alice's connection")
	}
	for _, path := range []string{"/connections/alices", "/connections/alices/status", "/connections/alices/edit", "/connections/alices/delete",
		"/connections/alices/files?path=/", "/connections/alices/files/view?path=/a.txt", "/connections/alices/files/download?path=/a.txt",
		"/connections/alices/files/download?path=/a.png&inline=1", "/connections/alices/files/delete?path=/a.txt"} {
		if status, _ := bob.Get(t, path); status != http.StatusNotFound {
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
		if status, _ := bob.Do(t, req); status != http.StatusNotFound {
			t.Errorf("bob %s an upload of alice's connection: %d, want 404", method, status)
		}
	}
	for _, path := range []string{"/connections/alices/delete", "/connections/alices/edit", "/connections/alices/try",
		"/connections/alices/files/mkdir", "/connections/alices/files/rename", "/connections/alices/files/delete"} {
		if status, _ := bob.Form(t, path, url.Values{"host": {"evil"}}); status != http.StatusNotFound {
			t.Errorf("bob POST %s: %d, want 404", path, status)
		}
	}
	if status, _ := alice.Get(t, "/connections/alices"); status != http.StatusOK {
		t.Errorf("alice lost her connection: %d", status)
	}
	// A key for a connection that is not bob's is refused.
	if status, _ := bob.Form(t, "/keys", url.Values{"connection": {"alices"}, "expires": {"never"}}); status != http.StatusUnprocessableEntity {
		t.Errorf("bob makes a key for alice's connection: %d", status)
	}
}

// TestCrossOriginPostRefused: a page elsewhere cannot post to the UI with
// the person's cookies.
func TestCrossOriginPostRefused(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.SignUp(t)
	req, err := http.NewRequest(http.MethodPost, c.Base+"/keys", strings.NewReader("expires=never"))
	must(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if status, _ := c.Do(t, req); status != http.StatusForbidden {
		t.Errorf("a cross-origin POST: %d, want 403", status)
	}
	if _, body := c.Get(t, "/keys"); !strings.Contains(body, "No API keys yet") {
		t.Error("the cross-origin POST made a key")
	}
}

// TestLogIn: the same answer for a wrong email and a wrong password; log-in
// and log-out work; pages need a log-in.
func TestLogIn(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.SignUp(t)
	// A copy of the session, as a stolen cookie would be.
	copied := newClient(t)
	u, err := url.Parse(c.Base)
	must(t, err)
	copied.HTTP.Jar.SetCookies(u, c.HTTP.Jar.Cookies(u))
	if _, body := copied.Get(t, "/connections"); !strings.Contains(body, "Connections</h1>") {
		t.Fatal("the copied session does not work before the log-out")
	}
	status, _ := c.Form(t, "/logout", nil)
	if status != http.StatusOK {
		t.Fatalf("log out: %d", status)
	}
	if _, body := c.Get(t, "/connections"); !strings.Contains(body, "Log in</h1>") {
		t.Error("after logging out, /connections does not ask to log in")
	}
	if _, body := copied.Get(t, "/connections"); !strings.Contains(body, "Log in</h1>") {
		t.Error("after logging out, a copy of the session still works")
	}
	_, wrongPassword := c.Form(t, "/login", url.Values{"email": {c.Email}, "password": {"not the password"}})
	_, wrongEmail := c.Form(t, "/login", url.Values{"email": {"nobody-" + c.Email}, "password": {"not the password"}})
	if !strings.Contains(wrongPassword, "wrong email or password") || !strings.Contains(wrongEmail, "wrong email or password") {
		t.Errorf("wrong password and wrong email answer differently")
	}
	if status, body := c.Form(t, "/login", url.Values{"email": {strings.ToUpper(c.Email)}, "password": {testwebui.Password}}); status != http.StatusOK || !strings.Contains(body, "Connections</h1>") {
		t.Errorf("log in: %d", status)
	}
	// Sign-up checks: a taken email, a short password.
	other := newClient(t)
	other.Email = c.Email
	if _, body := other.Form(t, "/signup", url.Values{"email": {c.Email}, "password": {testwebui.Password}}); !strings.Contains(body, "already exists") {
		t.Error("signing up twice with one email is not refused")
	}
	if _, body := other.Form(t, "/signup", url.Values{"email": {"new-" + c.Email}, "password": {"short"}}); !strings.Contains(body, "at least 10 characters") {
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
	c.Base = newUI(func(o *webui.Options) { o.AuthPerMinute = 3 }).URL
	var statuses []int
	for i := range 5 {
		// A new email each time: only the address's limit can refuse.
		status, _ := c.Form(t, "/login", url.Values{"email": {fmt.Sprintf("x%d@example.com", i)}, "password": {"wrong password"}})
		statuses = append(statuses, status)
	}
	if statuses[0] != http.StatusUnauthorized || statuses[4] != http.StatusTooManyRequests {
		t.Errorf("five quick log-ins answered %v", statuses)
	}

	owner := newClient(t)
	owner.Base = newUI(func(o *webui.Options) { o.AuthPerMinute, o.TrustedProxies = 3, "127.0.0.1" }).URL
	owner.SignUp(t)
	browser := func() *testwebui.Client {
		b := newClient(t)
		b.Base = owner.Base
		return b
	}
	stranger := browser()
	// logIn posts the owner's email from a browser, at an address the
	// trusted proxy names.
	logIn := func(b *testwebui.Client, from, password string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, owner.Base+"/login",
			strings.NewReader(url.Values{"email": {owner.Email}, "password": {password}}.Encode()))
		must(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Forwarded-For", from)
		return b.Do(t, req)
	}
	statuses = nil
	for range 5 {
		status, _ := logIn(stranger, "198.51.100.1", "wrong password")
		statuses = append(statuses, status)
	}
	if statuses[0] != http.StatusUnauthorized || statuses[4] != http.StatusTooManyRequests {
		t.Errorf("a stranger's five log-ins to one account from one address answered %v", statuses)
	}
	if status, _ := logIn(browser(), "203.0.113.9", testwebui.Password); status != http.StatusOK {
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
	if status, page := logIn(browser(), "203.0.113.10", testwebui.Password); status != http.StatusTooManyRequests ||
		!strings.Contains(page, "a browser you have logged in to this account with before is not held up") {
		t.Errorf("a browser new to the account, while a botnet guesses: %d", status)
	}
	// From the stranger's own address, over every limit of its own.
	if status, _ := logIn(owner, "198.51.100.1", testwebui.Password); status != http.StatusOK {
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

// TestEditAfterAnotherChange: saving a form opened before someone else
// changed the connection is refused, not silently undoing their change.
func TestEditAfterAnotherChange(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.SignUp(t)
	form := url.Values{"name": {"shared"}, "host": {"127.0.0.1"}, "port": {"2"}, "username": {"u"},
		"auth": {"password"}, "password": {"x"}, "trust": {"first-use"}}
	if status, _ := c.Form(t, "/connections", form); status != http.StatusOK {
		t.Fatalf("adding: %d", status)
	}
	_, page := c.Get(t, "/connections/shared/edit")
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
	status, page := c.Form(t, "/connections/shared/edit", form)
	if status != http.StatusUnprocessableEntity || !strings.Contains(page, "changed while you edited it") {
		t.Errorf("saving a stale form: %d", status)
	}
}

// TestAccountLimits: an account holds at most its quota of connections and
// keys, enforced by the API server; the form says which limit it reached.
func TestAccountLimits(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.Base = newUI(func(o *webui.Options) { o.Quota = accounts.Quota{Connections: 1, Keys: 1, Secrets: 5, Watches: 1} }).URL
	c.SignUp(t)
	add := func(name string) (int, string) {
		return c.Form(t, "/connections", url.Values{"name": {name}, "host": {"127.0.0.1"}, "port": {"2"},
			"username": {"u"}, "auth": {"password"}, "password": {"secret"}, "trust": {"first-use"}})
	}
	if status, _ := add("first"); status != http.StatusOK {
		t.Fatalf("the first connection: %d", status)
	}
	if status, body := add("second"); status != http.StatusUnprocessableEntity || !strings.Contains(body, "limit of 1 connections") {
		t.Errorf("a connection over the limit: %d", status)
	}
	if status, _ := c.Form(t, "/keys", url.Values{"connection": {"first"}, "expires": {"30d"}}); status != http.StatusOK {
		t.Fatalf("the first key: %d", status)
	}
	if status, body := c.Form(t, "/keys", url.Values{"connection": {"first"}, "expires": {"30d"}}); status != http.StatusUnprocessableEntity || !strings.Contains(body, "limit of 1 API keys") {
		t.Errorf("a key over the limit: %d %s", status, body)
	}
	watch := url.Values{"path": {"/in"}, "url": {"https://example.com/hook"}, "created": {"on"}}
	if status, _ := c.Form(t, "/connections/first/watches", watch); status != http.StatusOK {
		t.Fatalf("the first watch: %d", status)
	}
	if status, body := c.Form(t, "/connections/first/watches", watch); status != http.StatusUnprocessableEntity || !strings.Contains(body, "limit of 1 watched folders") {
		t.Errorf("a watch over the limit: %d %s", status, body)
	}
}

// TestWatchForm: the watch form refuses what cannot work in its own words,
// keeps what was typed, and stops a watch only of the connection whose
// page it is on.
func TestWatchForm(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.SignUp(t)
	for _, name := range []string{"first", "second"} {
		if status, _ := c.Form(t, "/connections", url.Values{"name": {name}, "host": {"127.0.0.1"}, "port": {"2"},
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
		status, body := c.Form(t, "/connections/first/watches", tc.values)
		if status != http.StatusUnprocessableEntity || !strings.Contains(body, tc.says) || !strings.Contains(body, html.EscapeString(tc.values.Get("url"))) {
			t.Errorf("%v: %d, want 422 saying %q with the form filled", tc.values, status, tc.says)
		}
	}
	if status, _ := c.Form(t, "/connections/first/watches", url.Values{"path": {"/in"}, "url": {"https://example.com/h"}, "deleted": {"on"}}); status != http.StatusOK {
		t.Fatalf("a valid watch: %d", status)
	}
	_, page := c.Get(t, "/connections/first")
	name := regexp.MustCompile(`/connections/first/watches/([a-z0-9-]+)/delete`).FindStringSubmatch(page)
	if name == nil || !strings.Contains(page, "https://example.com/h") {
		t.Fatalf("the connection's page does not list the watch")
	}
	if status, _ := c.Form(t, "/connections/second/watches/"+name[1]+"/delete", nil); status != http.StatusNotFound {
		t.Errorf("stopping first's watch from second's page: %d, want 404", status)
	}
	if status, page := c.Get(t, "/connections/first/watches/"+name[1]+"/delete"); status != http.StatusOK ||
		!strings.Contains(page, "Stop watching /in on first?") || !strings.Contains(page, `action="/connections/first/watches/`+name[1]+`/delete"`) {
		t.Errorf("asking before the watch stops: %d", status)
	}
	if _, page := c.Get(t, "/connections/first"); !strings.Contains(page, name[1]) {
		t.Error("asking stopped the watch")
	}
	if status, page := c.Form(t, "/connections/first/watches/"+name[1]+"/delete", nil); status != http.StatusOK ||
		!strings.Contains(page, `role="status">No longer watching /in.`) {
		t.Errorf("stopping the watch: %d, or not said", status)
	}
	if _, page := c.Get(t, "/connections/first"); strings.Contains(page, name[1]) || strings.Contains(page, "No longer watching") {
		t.Error("the stopped watch is still listed, or its notice shown again")
	}
}

// TestFormSaysEveryMistake: a form sent with several mistakes comes back
// with each beside its field, all at once, and what was typed kept.
func TestFormSaysEveryMistake(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.SignUp(t)
	status, page := c.Form(t, "/connections", url.Values{"name": {"Not A Name"}, "host": {"sftp.example.com"}, "port": {"99999"},
		"username": {""}, "auth": {"password"}, "trust": {"first-use"}})
	if status != http.StatusUnprocessableEntity {
		t.Fatalf("%d, want 422", status)
	}
	for _, want := range []string{"Change the 4 fields marked below.", `id="name-error"`, `id="port-error"`, `id="username-error"`, `id="password-error"`,
		`aria-invalid="true" aria-describedby="name-error name-help"`, `value="Not A Name"`, `value="sftp.example.com"`, `value="99999"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the form does not show %s", want)
		}
	}
	if strings.Contains(page, `id="host-error"`) {
		t.Error("a good host is marked wrong")
	}
	// Sign-up and the Members page say theirs beside each field too.
	for form, sent := range map[string]url.Values{
		"/signup":  {"email": {"not an email"}, "password": {"short"}},
		"/members": {"kind": {"group"}, "name": {""}, "role": {"owner"}},
	} {
		status, page := c.Form(t, form, sent)
		if status != http.StatusUnprocessableEntity {
			t.Errorf("%s: %d, want 422", form, status)
		}
		for name := range sent {
			if name != "kind" && !strings.Contains(page, `id="`+name+`-error">`) {
				t.Errorf("%s does not mark %s", form, name)
			}
		}
	}
}

// TestRevokeAsksFirst: a key is revoked only from the page that says what
// that does, and the page after says it was.
func TestRevokeAsksFirst(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.SignUp(t)
	long := strings.Repeat("n", 64)
	if status, page := c.Form(t, "/keys", url.Values{"name": {long}, "expires": {"soon"}, "paths": {"incoming"}}); status != http.StatusUnprocessableEntity ||
		!strings.Contains(page, `id="name-error"`) || !strings.Contains(page, `id="expires-error"`) || !strings.Contains(page, `id="paths-error"`) ||
		!strings.Contains(page, `value="`+long+`"`) {
		t.Errorf("a key form with three mistakes: %d, not each beside its field with the name kept", status)
	}
	if status, _ := c.Form(t, "/keys", url.Values{"name": {"nightly export"}, "expires": {"never"}}); status != http.StatusOK {
		t.Fatalf("making a key: %d", status)
	}
	_, page := c.Get(t, "/keys")
	if !strings.Contains(page, `<td data-label="Name">nightly export</td>`) {
		t.Error("the keys page does not show the key's name")
	}
	revoke := regexp.MustCompile(`/keys/[a-z0-9-]+/revoke`).FindString(page)
	if revoke == "" || strings.Contains(page, `method="post" action="`+revoke) {
		t.Fatalf("the keys page has no link to revoke the key, or revokes it in one click")
	}
	if status, page := c.Get(t, revoke); status != http.StatusOK || !strings.Contains(page, "Revoke the API key nightly export (") ||
		!strings.Contains(page, "Programs that send it are refused") ||
		!strings.Contains(page, `action="`+revoke+`"`) {
		t.Errorf("asking before the key is revoked: %d", status)
	}
	if _, page := c.Get(t, "/keys"); !strings.Contains(page, revoke) {
		t.Error("asking revoked the key")
	}
	if status, page := c.Form(t, revoke, nil); status != http.StatusOK || !strings.Contains(page, "is revoked.") || strings.Contains(page, revoke) {
		t.Errorf("revoking: %d; the page does not say so, or still lists the key", status)
	}
	if _, page := c.Get(t, "/keys"); strings.Contains(page, "is revoked.") {
		t.Error("the notice shows again")
	}
}

// TestTransferForm: the form starts a Transfer between two of the
// account's connections, says in its own words what it refuses, and
// another account can neither see nor remove it.
func TestTransferForm(t *testing.T) {
	t.Parallel()
	c, other := newClient(t), newClient(t)
	c.SignUp(t)
	other.SignUp(t)
	for _, name := range []string{"partner", "archive"} {
		if status, _ := c.Form(t, "/connections", url.Values{"name": {name}, "host": {"127.0.0.1"}, "port": {"2"},
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
		status, body := c.Form(t, "/transfers", tc.values)
		if status != http.StatusUnprocessableEntity || !strings.Contains(body, tc.says) || !strings.Contains(body, html.EscapeString(tc.values.Get("path"))) {
			t.Errorf("%v: %d, want 422 saying %q with the form filled", tc.values, status, tc.says)
		}
	}
	if status, _ := c.Form(t, "/transfers", with("folder", "/outgoing")); status != http.StatusOK {
		t.Fatalf("a valid transfer: %d", status)
	}
	status, page := c.Get(t, "/transfers")
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
	if _, page := other.Get(t, "/transfers"); strings.Contains(page, name[1]) {
		t.Error("another account sees the transfer")
	}
	if status, _ := other.Form(t, "/transfers/"+name[1]+"/delete", nil); status != http.StatusNotFound {
		t.Errorf("another account removing it: %d, want 404", status)
	}
	if status, _ := c.Form(t, "/transfers/"+name[1]+"/delete", nil); status != http.StatusOK {
		t.Errorf("removing it: %d", status)
	}
	if _, page := c.Get(t, "/transfers"); strings.Contains(page, name[1]) {
		t.Error("the removed transfer is still listed")
	}
}

// TestClosedSignUp: with --signup=false, no one signs up; an operator adds
// accounts with "sftpgate webui add-account", and they log in.
func TestClosedSignUp(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.Base = newUI(func(o *webui.Options) { o.SignUp = false }).URL
	if status, _ := c.Get(t, "/signup"); status != http.StatusForbidden {
		t.Errorf("GET /signup: %d, want 403", status)
	}
	if status, _ := c.Form(t, "/signup", url.Values{"email": {c.Email}, "password": {testwebui.Password}}); status != http.StatusForbidden {
		t.Errorf("POST /signup: %d, want 403", status)
	}
	if _, body := c.Get(t, "/login"); strings.Contains(body, "/signup") {
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
	must(t, webui.AddAccount(context.Background(), []string{"--kubeconfig=" + path, "--email=" + c.Email,
		"--accounts-namespace=" + testwebui.AccountsNamespace, "--service-account=" + uiNamespace + "/" + uiServiceAccount, "--bcrypt-cost=4"},
		strings.NewReader("an operator's password\n"), &out))
	if !strings.Contains(out.String(), "added account "+c.Email) || strings.Contains(out.String(), "password") {
		t.Errorf("add-account said %q", out.String())
	}
	if status, body := c.Form(t, "/login", url.Values{"email": {c.Email}, "password": {"an operator's password"}}); status != http.StatusOK || !strings.Contains(body, "Connections</h1>") {
		t.Errorf("the added account logs in: %d", status)
	}
}

// TestSignUpsStopAtTheAccountsTotal: a stranger signing up account after
// account (as from many addresses: the per-address limit is raised here)
// gets none once the accounts there
// are, each with its quota of watches, could run all the watches the
// cluster lets web UI accounts run (--max-account-watches-total): the
// page says so, and no account or namespace is made; the accounts made
// before log in as ever. The worker's side, the operator's watches
// running while strangers' past the total are OverQuota, is
// worker/totals_test.go's. Not a row of TestIsolation (test/e2e/tenancy:
// this needs the web UI alone), nor parallel: it counts every account of
// the cluster, which no other test may add to meanwhile.
func TestSignUpsStopAtTheAccountsTotal(t *testing.T) {
	ctx := context.Background()
	accountNamespaces := func() int {
		t.Helper()
		var list metav1.PartialObjectMetadataList
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
		must(t, k8s.List(ctx, &list, client.HasLabels{v1alpha1.LabelAccount}))
		return len(list.Items)
	}
	before := accountNamespaces()
	// Room for two more accounts of 10 watches: the 9 watches left over
	// could not hold a third's quota.
	srv := newUI(func(o *webui.Options) {
		o.AuthPerMinute, o.Quota.Watches, o.AccountTotals.Watches = 1000, 10, (before+2)*10+9
	})
	person := func() *testwebui.Client {
		c := newClient(t)
		c.Base = srv.URL
		return c
	}
	var made []*testwebui.Client
	for range 2 {
		c := person()
		c.SignUp(t)
		made = append(made, c)
	}
	late := person()
	status, body := late.Form(t, "/signup", url.Values{"email": {late.Email}, "password": {testwebui.Password}})
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "This server has as many accounts as it can run") {
		t.Errorf("a sign-up past the total: %d %s", status, body)
	}
	if n := accountNamespaces(); n != before+2 {
		t.Errorf("%d account namespaces, want %d", n, before+2)
	}
	if _, body := late.Form(t, "/login", url.Values{"email": {late.Email}, "password": {testwebui.Password}}); !strings.Contains(body, "wrong email or password") {
		t.Error("the refused sign-up made an account")
	}
	for _, c := range made {
		if status, body := c.Form(t, "/login", url.Values{"email": {c.Email}, "password": {testwebui.Password}}); status != http.StatusOK || !strings.Contains(body, "Connections</h1>") {
			t.Errorf("an account made before the total cannot log in: %d", status)
		}
	}
}
