package webui_test

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/bcrypt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/gateway"
	"github.com/sftpgate/sftpgate/gateway/kubeauth"
	"github.com/sftpgate/sftpgate/gateway/uploads"
	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/fixtures/testhttp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsink"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/internal/storedbytes"
	"github.com/sftpgate/sftpgate/webui"
	"github.com/sftpgate/sftpgate/worker"
	"github.com/sftpgate/sftpgate/worker/transfers"
	"github.com/sftpgate/sftpgate/worker/watches"
)

// The test kit's, as every test package has them.
var must = testkit.Must

// maxRequestsPerNamespace is the test gateway's bound, and the others
// the test worker's: small, so that the isolation test's attacker can
// fill them.
const (
	maxRequestsPerNamespace = 4
	maxUploadsPerNamespace  = 5
	maxWatchesPerNamespace  = 3
	// maxWatchTransfersPerNamespace bounds the Transfers watches keep.
	maxWatchTransfersPerNamespace = 2
	maxTransfersPerNamespace      = 2
	// statePerAccount is what sftpgate may store for an account (gateway
	// and worker): a few uploads with large metadata fill it.
	statePerAccount = 16 << 10
)

var (
	k8s client.Client
	// uiKube is the UI's service account's.
	uiKube     client.Client
	uiURL      string
	gatewayURL string
	// gatewayMetrics serves the test gateway's metrics.
	gatewayMetrics http.Handler
	// newUI serves a web UI with its flags' defaults, as mutate changes
	// them; newUIServer makes one (started) for the test to serve.
	newUI       func(mutate func(*webui.Options)) *httptest.Server
	newUIServer func(mutate func(*webui.Options)) *webui.Server
	// uiConfig reaches the control plane as the UI's service account, for
	// commands an operator runs in the UI's pod.
	uiConfig *rest.Config
)

// TestMain runs a control plane, the manager, a gateway and the web UI on
// loopback.
func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if testkit.Fuzzing() {
		return m.Run() // the fuzz tests need none of it
	}
	fail := func(err error) int { fmt.Fprintln(os.Stderr, err); return 1 }
	testcluster.LogErrors()
	env, c, err := testcluster.Start()
	if err != nil {
		return fail(err)
	}
	defer func() { _ = env.Stop() }()
	k8s = c
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := testcluster.StartManager(ctx, env.Config, 4); err != nil {
		return fail(err)
	}
	gw, err := gateway.New(env.Config, gateway.Options{BasePath: "/", DeniedNetworks: testcluster.LoopbackNetworks, Audience: kubeauth.DefaultAudience,
		IdleTimeout: time.Minute, Limits: gateway.Limits{MaxBodyBytes: 1 << 20, MaxUploadBytes: 64 << 20, RequestTimeout: 30 * time.Second,
			// Small, so that the isolation test's attacker can fill them.
			MemoryBudget: 8 << 20, MaxRequestsPerNamespace: maxRequestsPerNamespace, LargeTransferShare: 0.2},
		Uploads: uploads.Limits{MaxPerNamespace: maxUploadsPerNamespace}, StateBudget: storedbytes.Limits{PerAccount: statePerAccount},
		Log: testcluster.Log("gateway")})
	if err != nil {
		return fail(err)
	}
	gatewayMetrics = gw.MetricsHandler(false)
	if err := gw.Start(ctx); err != nil {
		return fail(err)
	}
	gwSrv := httptest.NewServer(gw.Handler())
	defer gwSrv.Close()
	gatewayURL = gwSrv.URL

	// The UI runs as its service account with only the rights config/default
	// gives it: what the tests do, it may do in production.
	uiKube, uiConfig, err = serviceAccountClient(ctx, env.Config)
	if err != nil {
		return fail(err)
	}
	// Parallel tests make UIs of their own at once.
	var (
		serversMu sync.Mutex
		servers   []*httptest.Server
	)
	newUIServer = func(mutate func(*webui.Options)) *webui.Server {
		var opts webui.Options
		opts.BindFlags(flag.NewFlagSet("webui", flag.ContinueOnError))
		opts.Namespace, opts.GatewayURL, opts.BcryptCost = accountsNamespace, gatewayURL, bcrypt.MinCost
		opts.ServiceAccount, opts.SystemNamespace = uiNamespace+"/"+uiServiceAccount, uiNamespace
		opts.Log = testcluster.Log("webui")
		// The tests make many more accounts than the default total leaves
		// room for; TestSignUpsStopAtTheAccountsTotal sets its own.
		opts.AccountTotals.Watches = 0
		if mutate != nil {
			mutate(&opts)
		}
		ui, err := webui.New(uiKube, opts)
		if err != nil {
			panic(err)
		}
		ui.Start()
		return ui
	}
	newUI = func(mutate func(*webui.Options)) *httptest.Server {
		srv := httptest.NewServer(newUIServer(mutate).Handler())
		serversMu.Lock()
		servers = append(servers, srv)
		serversMu.Unlock()
		return srv
	}
	defer func() {
		serversMu.Lock()
		defer serversMu.Unlock()
		for _, s := range servers {
			s.Close()
		}
	}()
	uiURL = newUI(func(o *webui.Options) {
		o.AuthPerMinute = 1000
		// envtest runs no quota controller: a deleted object stays counted
		// against its account, and the isolation test makes many watches.
		o.Quota.Watches = 100
	}).URL

	// The worker too runs as its service account of config/default.
	_, workerConfig, err := clientAs(ctx, env.Config, uiNamespace, "sftpgate-worker")
	if err != nil {
		return fail(err)
	}
	w, err := worker.New(workerConfig, worker.Options{Namespace: uiNamespace, Identity: "worker-0", DeniedNetworks: testcluster.LoopbackNetworks,
		LeaseDuration: 3 * time.Second, MetricsAddr: "0", ProbeAddr: "0", UploadSweepInterval: 500 * time.Millisecond,
		StateBudget: storedbytes.Limits{PerAccount: statePerAccount},
		Limits: watches.Limits{WriteEvery: 200 * time.Millisecond, PollTimeEvery: time.Nanosecond,
			MaxWatchesPerNamespace: maxWatchesPerNamespace, MaxTransfersPerNamespace: maxWatchTransfersPerNamespace},
		Transfers: transfers.Limits{WriteEvery: 200 * time.Millisecond, MaxRunningPerNamespace: maxTransfersPerNamespace, Streams: 4, StreamsPerNamespace: 2},
		Log:       testcluster.Log("worker")})
	if err != nil {
		return fail(err)
	}
	go func() {
		if err := w.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
		}
	}()
	return m.Run()
}

// browser is a fresh headless Chromium with the flags this machine needs.
func browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat("/usr/bin/chromium"); err != nil {
		t.Fatal("no /usr/bin/chromium: make test-prereqs installs it")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath("/usr/bin/chromium"), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1200, 900),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	// A guard against a browser that hangs, not a speed check: the file
	// browser's test (a 50 MB upload, cut and resumed) has taken over 2
	// minutes under make test's load.
	ctx, cancelTimeout := context.WithTimeout(ctx, 5*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	return ctx
}

// screenshot saves the page as docs/screenshots/<name>.png when
// SFTPGATE_SCREENSHOTS names a directory.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("SFTPGATE_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
}

var accountCount atomic.Int64

func newEmail(t *testing.T) string {
	return fmt.Sprintf("%s-%d@example.com", strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), accountCount.Add(1))
}

// signUp signs a new account up in the browser.
func signUp(t *testing.T, ctx context.Context) {
	t.Helper()
	must(t, chromedp.Do(ctx, chromedp.Navigate(uiURL+"/signup"), chromedp.WaitVisible(chromedp.ID("email"))))
	checkA11y(t, ctx, "sign-up")
	must(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("email"), newEmail(t)),
		chromedp.SendKeys(chromedp.ID("password"), "a long enough password"),
		chromedp.Submit(chromedp.ID("password")),
		chromedp.WaitVisible(chromedp.ID("host")),
	))
}

// addConnection fills the new-connection form for sshd with password and
// submits it.
func addConnection(t *testing.T, ctx context.Context, name string, sshd *testsshd.Server, password string) {
	t.Helper()
	addConnectionAt(t, ctx, name, sshd.Host, sshd.Port, sshd, password)
}

// addConnectionAt is addConnection to sshd through host:port (a proxy).
func addConnectionAt(t *testing.T, ctx context.Context, name, host string, port int32, sshd *testsshd.Server, password string) {
	t.Helper()
	must(t, chromedp.Do(ctx,
		chromedp.Navigate(uiURL+"/connections/new"),
		chromedp.SendKeys(chromedp.ID("name"), name),
		chromedp.SendKeys(chromedp.ID("host"), host),
		chromedp.SetValue(chromedp.ID("port"), fmt.Sprint(port)),
		chromedp.SendKeys(chromedp.ID("username"), testsshd.User),
		chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.SendKeys(chromedp.ID("rootPath"), sshd.Dir),
	))
	// Keys are shown in a monospace font, the other fields in the page's.
	mono, err := chromedp.Run(ctx, chromedp.Evaluate[bool](
		`getComputedStyle(document.getElementById("hostKey")).fontFamily.includes("mono") &&
		 !getComputedStyle(document.getElementById("host")).fontFamily.includes("mono")`))
	if err != nil || !mono {
		t.Errorf("the host key box is not in a monospace font, or the host field is (%v)", err)
	}
	screenshot(t, ctx, "add-connection")
	checkA11y(t, ctx, "new connection")
	must(t, chromedp.Do(ctx, chromedp.Submit(chromedp.ID("host")), chromedp.WaitVisible(chromedp.CSS("section.status"))))
	checkA11y(t, ctx, "connection (just added)")
}

// TestFlow is the whole flow: sign up, add a connection and watch its test
// pass, create a key, and write a file through the gateway with it.
func TestFlow(t *testing.T) {
	t.Parallel()
	sshd := testsshd.Start(t)
	ctx := browser(t)
	signUp(t, ctx)
	addConnection(t, ctx, "reports", sshd, sshd.Password)
	// The page updates by itself when the test ends.
	must(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("section.status.ready .when-ready"))))
	fingerprint, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-field="fingerprint"]`)))
	must(t, err)
	if !strings.HasPrefix(fingerprint, "SHA256:") {
		t.Errorf("the fingerprint shown is %q", fingerprint)
	}
	screenshot(t, ctx, "connection-ready")
	checkA11y(t, ctx, "connection (ready)")

	must(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(".next a.button")), chromedp.WaitVisible(chromedp.ID("expires"))))
	checkA11y(t, ctx, "new key")
	must(t, chromedp.Do(ctx, chromedp.Submit(chromedp.ID("expires")), chromedp.WaitVisible(chromedp.ID("token"))))
	checkA11y(t, ctx, "key created")
	token, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("token")))
	must(t, err)
	curl, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("curl")))
	must(t, err)
	screenshot(t, ctx, "key-created")
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
	checkA11y(t, ctx, "key created (reloaded)")

	// The connections list, and "try it" with the key.
	must(t, chromedp.Do(ctx, chromedp.Navigate(uiURL+"/connections"), chromedp.WaitVisible(chromedp.CSS(".conn.ready .badge"))))
	screenshot(t, ctx, "connections")
	checkA11y(t, ctx, "connections")
	must(t, chromedp.Do(ctx, chromedp.Navigate(uiURL+"/keys"), chromedp.WaitVisible(chromedp.CSS("table.list"))))
	checkA11y(t, ctx, "keys")
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
	checkA11y(t, ctx, "connection (tried)")

	// Watch the folder: a file that arrives is told to the webhook.
	sink := testsink.Start(t)
	must(t, chromedp.Do(ctx,
		chromedp.Navigate(uiURL+"/connections/reports"),
		chromedp.Click(chromedp.CSS(`#watches a.button`)),
		chromedp.WaitVisible(chromedp.ID("url")),
	))
	checkA11y(t, ctx, "new watch")
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
	screenshot(t, ctx, "watch")
	checkA11y(t, ctx, "connection (watching)")
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
	checkA11y(t, ctx, "transfers (none)")
	must(t, chromedp.Do(ctx, chromedp.Navigate(uiURL+"/transfers/new"), chromedp.WaitVisible(chromedp.ID("path"))))
	checkA11y(t, ctx, "new transfer")
	must(t, chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("path"), "/hello.txt"),
		chromedp.SetValue(chromedp.ID("folder"), "/copies"),
		chromedp.Submit(chromedp.ID("path")),
		chromedp.WaitVisible(chromedp.CSS("table.transfers")),
	))
	checkA11y(t, ctx, "transfers")

	// On a phone's width, nothing needs scrolling sideways.
	must(t, chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile)))
	for _, path := range []string{"/connections", "/connections/reports", "/connections/new", "/connections/reports/watches/new", "/keys", "/keys/new", "/openpgp"} {
		must(t, chromedp.Do(ctx, chromedp.Navigate(uiURL+path), chromedp.WaitVisible(chromedp.CSS("main h1"))))
		fits, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("document.documentElement.scrollWidth <= window.innerWidth"))
		must(t, err)
		if !fits {
			t.Errorf("%s is wider than a phone", path)
		}
		if path == "/connections/reports" {
			screenshot(t, ctx, "connection-phone")
		}
	}
}

// TestWrongPassword: a failed test shows its reason in words, and the form
// to fix it comes back filled.
func TestWrongPassword(t *testing.T) {
	t.Parallel()
	sshd := testsshd.Start(t)
	ctx := browser(t)
	signUp(t, ctx)
	addConnection(t, ctx, "typo", sshd, "not the password")
	must(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("section.status.failed .when-failed"))))
	headline, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-field="headline"]`)))
	must(t, err)
	if headline != "The server refused the username, password or key" {
		t.Errorf("the failure shows %q", headline)
	}
	screenshot(t, ctx, "connection-failed")
	checkA11y(t, ctx, "connection (failed)")
	must(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(".when-failed a.button")), chromedp.WaitVisible(chromedp.ID("host"))))
	checkA11y(t, ctx, "connection settings")
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
		chromedp.WaitVisible(chromedp.CSS(".alert.error")),
	))
	alert, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(".alert.error")))
	must(t, err)
	if !strings.Contains(alert, "enter the password again") {
		t.Errorf("changing the host without the password shows %q", alert)
	}
	checkA11y(t, ctx, "connection settings (refused)")

	// The page that asks before deleting it.
	must(t, chromedp.Do(ctx, chromedp.Navigate(uiURL+"/connections/typo/delete"), chromedp.WaitVisible(chromedp.CSS("button.danger"))))
	checkA11y(t, ctx, "delete connection")
}

// TestHTMLIsText: what people type is shown as text, never as markup.
func TestHTMLIsText(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.signUp(t)
	status, body := c.form(t, "/connections", url.Values{"name": {"markup"}, "host": {"127.0.0.1"}, "port": {"22"},
		"username": {`<b id="injected">bold</b>`}, "auth": {"password"}, "password": {"x"}, "trust": {"first-use"}})
	if status != http.StatusOK || strings.Contains(body, `<b id="injected">`) || !strings.Contains(body, `&lt;b id=&#34;injected&#34;&gt;`) {
		t.Errorf("the connection page with HTML in its username: %d %s", status, body)
	}
	// A name with HTML is refused, and the form shows it back as text.
	status, body = c.form(t, "/connections", url.Values{"name": {`<script>alert(1)</script>`}, "host": {"127.0.0.1"},
		"username": {"u"}, "auth": {"password"}, "password": {"x"}, "trust": {"first-use"}})
	if status != http.StatusUnprocessableEntity || strings.Contains(body, "<script>alert") || !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("a connection named with HTML: %d %s", status, body)
	}
}

// TestBrowserBoundaries, in a real browser: a second account gets 404 on
// the first's connection, and a form on another origin cannot post to the
// UI with the person's cookies.
func TestBrowserBoundaries(t *testing.T) {
	t.Parallel()
	first, second := browser(t), browser(t)
	signUp(t, first)
	must(t, chromedp.Do(first,
		chromedp.SendKeys(chromedp.ID("name"), "private"),
		chromedp.SendKeys(chromedp.ID("host"), "127.0.0.1"),
		chromedp.SendKeys(chromedp.ID("username"), "someone"),
		chromedp.SendKeys(chromedp.ID("password"), "secret"),
		chromedp.Submit(chromedp.ID("host")),
		chromedp.WaitVisible(chromedp.CSS("section.status")),
	))
	signUp(t, second)
	// The new-connection form with a private key and a pinned host key.
	must(t, chromedp.Do(second,
		chromedp.Click(chromedp.CSS(`input[name="auth"][value="key"]`)),
		chromedp.Click(chromedp.CSS(`input[name="trust"][value="pinned"]`)),
		chromedp.WaitVisible(chromedp.ID("hostKey")),
	))
	checkA11y(t, second, "new connection (private key, pinned host key)")
	must(t, chromedp.Do(second, chromedp.Navigate(uiURL+"/connections"), chromedp.WaitVisible(chromedp.CSS(".empty"))))
	checkA11y(t, second, "connections (none)")
	must(t, chromedp.Do(second, chromedp.Navigate(uiURL+"/connections/private"), chromedp.WaitVisible(chromedp.CSS("main h1"))))
	if title, err := chromedp.Run(second, chromedp.Text(chromedp.CSS("main h1"))); err != nil || title != "Not found" {
		t.Errorf("the second account opens the first's connection: %q %v", title, err)
	}
	checkA11y(t, second, "not found")

	// Another origin (another port: the same site, not the same origin).
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprintf(w, `<!doctype html><form method="post" action="%s/keys"><input name="expires" value="never"><button id="go">Win a prize</button></form>`, uiURL)
	}))
	defer evil.Close()
	must(t, chromedp.Do(first, chromedp.Navigate(evil.URL), chromedp.WaitVisible(chromedp.ID("go")), chromedp.Click(chromedp.ID("go"))))
	testkit.EventuallyFound(t, "the cross-origin form submits", func() (bool, string) {
		location, err := chromedp.Run(first, chromedp.Location())
		must(t, err)
		return strings.HasPrefix(location, uiURL), location
	})
	if title, err := chromedp.Run(first, chromedp.Text(chromedp.CSS("main h1"))); err != nil || title != "Refused" {
		t.Errorf("the cross-origin form led to %q %v", title, err)
	}
	checkA11y(t, first, "refused")
	must(t, chromedp.Do(first, chromedp.Navigate(uiURL+"/keys"), chromedp.WaitVisible(chromedp.CSS("main h1"))))
	if html, err := chromedp.Run(first, chromedp.OuterHTML(chromedp.CSS("main"))); err != nil || !strings.Contains(html, "No API keys yet") {
		t.Errorf("a cross-origin form made a key: %v", err)
	}
	checkA11y(t, first, "keys (none)")
}
