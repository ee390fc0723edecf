package tenancy

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testhttp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsink"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/hack/fixtures/testwebui"
)

// TestFlow is the whole flow: sign up, add a connection and watch its test
// pass, create a key, and write a file through the gateway with it.
func TestFlow(t *testing.T) {
	t.Parallel()
	sshd := testsshd.Start(t)
	ctx := testwebui.Browser(t)
	testwebui.SignUp(t, ctx, uiURL)
	testwebui.AddConnection(t, ctx, uiURL, "reports", sshd, sshd.Password)
	// The page updates by itself when the test ends.
	must(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("section.status.ready .when-ready"))))
	fingerprint, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-field="fingerprint"]`)))
	must(t, err)
	if !strings.HasPrefix(fingerprint, "SHA256:") {
		t.Errorf("the fingerprint shown is %q", fingerprint)
	}
	testwebui.CheckPage(t, ctx, "connection (ready)")

	must(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(".next a.button")), chromedp.WaitVisible(chromedp.ID("expires"))))
	testwebui.CheckPage(t, ctx, "new key")
	must(t, chromedp.Do(ctx, chromedp.Submit(chromedp.ID("expires")), chromedp.WaitVisible(chromedp.ID("token"))))
	testwebui.CheckPage(t, ctx, "key created")
	token, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("token")))
	must(t, err)
	curl, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("curl")))
	must(t, err)
	testwebui.CheckPage(t, ctx, "key created")
	if !strings.HasPrefix(token, "sgk_") || !strings.Contains(curl, token) || !strings.Contains(curl, gatewayURL+"/reports-") {
		t.Fatalf("the key page shows %q and %q", token, curl)
	}

	// The key works at once through the gateway, as the curl shows.
	_, rest, _ := strings.Cut(curl, gatewayURL+"/")
	slug, _, _ := strings.Cut(rest, "/")
	// (Once the gateway's cache catches up.)
	testkit.EventuallyFound(t, "a write with the new key", func() (bool, string) {
		status, body := testhttp.PostJSON(t, gatewayURL+"/"+slug+"/write", token, `{"path": "hello.txt", "file": {"text": "Hello from sftpgate!"}}`)
		return status == http.StatusOK && !strings.Contains(body, `"error"`), fmt.Sprintf("%d %s", status, body)
	})
	if got, _ := os.ReadFile(filepath.Join(sshd.Dir, "hello.txt")); string(got) != "Hello from sftpgate!" {
		t.Errorf("the file on the server holds %q", got)
	}

	// Reloading the key page shows no key.
	must(t, chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("main h1"))))
	html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("main")))
	must(t, err)
	if strings.Contains(html, token) || !strings.Contains(html, "cannot be shown again") {
		t.Errorf("after a reload the key page shows: %s", html)
	}
	testwebui.CheckPage(t, ctx, "key created (reloaded)")

	// The connections list, and "try it" with the key.
	must(t, chromedp.Do(ctx, chromedp.Navigate(uiURL+"/connections"), chromedp.WaitVisible(chromedp.CSS(".conn.ready .badge"))))
	testwebui.CheckPage(t, ctx, "connections")
	must(t, chromedp.Do(ctx, chromedp.Navigate(uiURL+"/keys"), chromedp.WaitVisible(chromedp.CSS("table.list"))))
	testwebui.CheckPage(t, ctx, "keys")
	must(t, chromedp.Do(ctx,
		chromedp.Navigate(uiURL+"/connections/reports"),
		chromedp.SendKeys(chromedp.ID("key"), token),
		chromedp.SetValue(chromedp.ID("command"), "list"),
		chromedp.Submit(chromedp.ID("key")),
		chromedp.WaitVisible(chromedp.CSS("[data-try-answer]")),
	))
	answer, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("[data-try-answer]")))
	must(t, err)
	if !strings.Contains(answer, `"hello.txt"`) {
		t.Errorf("try it answered %s", answer)
	}
	testwebui.CheckPage(t, ctx, "connection (tried)")

	// Watch the folder: a file that arrives is told to the webhook.
	sink := testsink.Start(t)
	must(t, chromedp.Do(ctx,
		chromedp.Navigate(uiURL+"/connections/reports"),
		chromedp.Click(chromedp.CSS(`#watches a.button`)),
		chromedp.WaitVisible(chromedp.ID("url")),
	))
	testwebui.CheckPage(t, ctx, "new watch")
	must(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("url"), sink.URL+"/hooks"),
		chromedp.Submit(chromedp.ID("url")),
		chromedp.WaitVisible(chromedp.CSS("table.watches")),
	))
	var watches v1alpha1.SftpWatchList
	must(t, k8s.List(context.Background(), &watches))
	var watch *v1alpha1.SftpWatch
	for i := range watches.Items {
		if w := &watches.Items[i]; w.Spec.ConnectionRef.Name == "reports" && w.Spec.Sink != nil && w.Spec.Sink.URI == sink.URL+"/hooks" {
			watch = w
		}
	}
	if watch == nil || watch.Spec.Path != "/" || !slices.Equal(watch.Spec.Events, []v1alpha1.WatchEvent{v1alpha1.WatchCreated}) {
		t.Fatalf("the form made %+v", watch)
	}
	// Shorter waits than the form's defaults, for the test's sake.
	// The worker writes the watch's status meanwhile: retried on conflict.
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(watch), watch); err != nil {
			return err
		}
		watch.Spec.PollInterval, watch.Spec.Stability.MinAge = &metav1.Duration{Duration: 5 * time.Second}, &metav1.Duration{}
		return k8s.Update(context.Background(), watch)
	}))
	// What the worker has done shows on a reload.
	testkit.Eventually(t, "the watch is shown as watching", func() bool {
		must(t, chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("table.watches"))))
		watching, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.querySelector("table.watches tr.ready .badge")`))
		must(t, err)
		return watching
	})
	testwebui.CheckPage(t, ctx, "connection (watching)")
	// The Role for pods reads as text on the dark block, not as light bars.
	background, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector("pre.answer code")).backgroundColor`))
	must(t, err)
	if background != "rgba(0, 0, 0, 0)" {
		t.Errorf("the Role's code has background %s inside its dark block", background)
	}
	must(t, os.WriteFile(filepath.Join(sshd.Dir, "arrived.csv"), []byte("id\n1\n"), 0o644))
	testkit.EventuallyFound(t, "the webhook is told of the file", func() (bool, string) {
		subjects := sink.Subjects()
		return slices.Contains(subjects, "dev.sftpgate.file.created /arrived.csv"), fmt.Sprint(subjects)
	})

	// A transfer: the list with none, the form, the list with one.
	must(t, chromedp.Do(ctx, chromedp.Navigate(uiURL+"/transfers"), chromedp.WaitVisible(chromedp.CSS("main h1"))))
	testwebui.CheckPage(t, ctx, "transfers (none)")
	must(t, chromedp.Do(ctx, chromedp.Navigate(uiURL+"/transfers/new"), chromedp.WaitVisible(chromedp.ID("path"))))
	testwebui.CheckPage(t, ctx, "new transfer")
	must(t, chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("path"), "/hello.txt"),
		chromedp.SetValue(chromedp.ID("folder"), "/copies"),
		chromedp.Submit(chromedp.ID("path")),
		chromedp.WaitVisible(chromedp.CSS("table.transfers")),
	))
	testwebui.CheckPage(t, ctx, "transfers")

	// A share link: the form, the link shown once, the list, and the
	// question before deleting it.
	must(t, chromedp.Do(ctx, chromedp.Navigate(uiURL+"/connections/reports/shares/new?path=/hello.txt"), chromedp.WaitVisible(chromedp.ID("path"))))
	testwebui.CheckPage(t, ctx, "new share link")
	must(t, chromedp.Do(ctx, chromedp.SetValue(chromedp.ID("name"), "hello"), chromedp.Submit(chromedp.ID("path")),
		chromedp.WaitVisible(chromedp.ID("share-url"))))
	testwebui.CheckPage(t, ctx, "share link created")
	deleteLink := `a[href="/shares/hello/delete"]`
	must(t, chromedp.Do(ctx, chromedp.Navigate(uiURL+"/shares"), chromedp.WaitVisible(chromedp.CSS(deleteLink))))
	testwebui.CheckPage(t, ctx, "share links")
	must(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(deleteLink)), chromedp.WaitVisible(chromedp.CSS(`form[action="/shares/hello/delete"]`))))
	testwebui.CheckPage(t, ctx, "delete a share link")
	must(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`form[action="/shares/hello/delete"] button`)), chromedp.WaitVisible(chromedp.CSS(".alert.ok"))))
	if n := count(t, ctx, `tr[data-share="hello"]`); n != 0 {
		t.Error("the deleted link is still listed")
	}
}

// TestWrongPassword: a failed test shows its reason in words, and the form
// to fix it comes back filled.
func TestWrongPassword(t *testing.T) {
	t.Parallel()
	sshd := testsshd.Start(t)
	ctx := testwebui.Browser(t)
	testwebui.SignUp(t, ctx, uiURL)
	testwebui.AddConnection(t, ctx, uiURL, "typo", sshd, "not the password")
	must(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("section.status.failed .when-failed"))))
	headline, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-field="headline"]`)))
	must(t, err)
	if headline != "The server refused the username, password or key" {
		t.Errorf("the failure shows %q", headline)
	}
	testwebui.CheckPage(t, ctx, "connection (failed)")
	// Its files lead back to the connection's page, which says why they
	// cannot be reached, not to a page that says "retry shortly".
	must(t, chromedp.Do(ctx, chromedp.Navigate(uiURL+"/connections/typo/files?path=/"), chromedp.WaitVisible(chromedp.CSS(".alert.ok"))))
	said, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(".alert.ok")))
	must(t, err)
	if !strings.Contains(said, "cannot be reached until its test passes: The server refused the username, password or key") {
		t.Errorf("browsing a failed connection's files says %q", said)
	}
	must(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(".when-failed a.button")), chromedp.WaitVisible(chromedp.ID("host"))))
	testwebui.CheckPage(t, ctx, "connection settings")
	host, err := chromedp.Run(ctx, chromedp.Value(chromedp.ID("host")))
	must(t, err)
	if host != sshd.Host {
		t.Errorf("the form to fix it holds host %q", host)
	}
	// Fixing the password makes the test pass (after the backoff of one
	// failed test).
	must(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("password"), sshd.Password),
		chromedp.Submit(chromedp.ID("host")),
		chromedp.WaitVisible(chromedp.CSS("section.status.ready .when-ready")),
	))
	// Pointing it at another server asks for the password again: the
	// stored one never follows a changed host.
	must(t, chromedp.Do(ctx,
		chromedp.Navigate(uiURL+"/connections/typo/edit"),
		chromedp.SetValue(chromedp.ID("host"), "198.51.100.1"),
		chromedp.Submit(chromedp.ID("host")),
		chromedp.WaitVisible(chromedp.ID("password-error")),
	))
	alert, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("password-error")))
	must(t, err)
	if !strings.Contains(alert, "Enter the password again") {
		t.Errorf("changing the host without the password shows %q beside the password", alert)
	}
	testwebui.CheckPage(t, ctx, "connection settings (refused)")

	// The page that asks before deleting it.
	must(t, chromedp.Do(ctx, chromedp.Navigate(uiURL+"/connections/typo/delete"), chromedp.WaitVisible(chromedp.CSS("button.danger"))))
	testwebui.CheckPage(t, ctx, "delete connection")
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
	c.SignUp(t)
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
	req, err := http.NewRequest(http.MethodPost, c.Base+"/connections", &body)
	must(t, err)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if status, page := c.Do(t, req); status != http.StatusOK || !strings.Contains(page, "keyed</h1>") {
		t.Fatalf("adding a connection with a key file: %d %s", status, page)
	}
	testkit.EventuallyFound(t, "the connection is ready", func() (bool, string) {
		_, status := c.Get(t, "/connections/keyed/status")
		return strings.Contains(status, `"state":"ready"`), status
	})

	if _, page := c.Get(t, "/connections/keyed"); !strings.Contains(page, "sftpconnections/commands") || !strings.Contains(page, "resourceNames:") {
		t.Error("the connection page does not show the Role for a ServiceAccount")
	}

	status, page := c.Form(t, "/keys", url.Values{"connection": {"keyed"}, "expires": {"30d"}})
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
	if _, list := c.Get(t, "/keys"); !strings.Contains(list, key.Spec.Token.KeyID) {
		t.Error("the keys page does not list the new key")
	}
	c.Form(t, "/keys/"+key.Name+"/revoke", nil)
	if _, list := c.Get(t, "/keys"); strings.Contains(list, key.Spec.Token.KeyID) {
		t.Error("a revoked key is still listed")
	}

	// A key for this connection alone, and one for all: deleting the
	// connection revokes the first only.
	c.Form(t, "/keys", url.Values{"connection": {"keyed"}, "expires": {"never"}})
	c.Form(t, "/keys", url.Values{"connection": {""}, "expires": {"never"}})
	var conn v1alpha1.SftpConnection
	must(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: key.Namespace, Name: "keyed"}, &conn))
	if status, page := c.Get(t, "/connections/keyed/delete"); status != http.StatusOK || !strings.Contains(page, "Delete keyed?") {
		t.Errorf("the delete confirmation: %d", status)
	}
	if status, page := c.Form(t, "/connections/keyed/delete", nil); status != http.StatusOK || strings.Contains(page, "keyed</a>") {
		t.Errorf("deleting: %d", status)
	}
	err = k8s.Get(context.Background(), client.ObjectKeyFromObject(&conn), &conn)
	secretErr := k8s.Get(context.Background(), client.ObjectKey{Namespace: conn.Namespace, Name: conn.Spec.Credentials.SecretRef.Name}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) || !apierrors.IsNotFound(secretErr) {
		t.Errorf("after deleting: connection %v, credentials %v", err, secretErr)
	}
	// The file browser's own key stays, as the key for all does.
	must(t, k8s.List(context.Background(), &keys, client.InNamespace(conn.Namespace), client.MatchingLabels{labelFilesKey: "true"}))
	files := len(keys.Items)
	must(t, k8s.List(context.Background(), &keys, client.InNamespace(conn.Namespace)))
	if files != 1 || len(keys.Items) != 2 || slices.ContainsFunc(keys.Items, func(k v1alpha1.ApiKey) bool { return len(k.Spec.Connections) != 0 }) {
		t.Errorf("after deleting the connection, the keys left are %+v", keys.Items)
	}
}
