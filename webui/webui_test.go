package webui_test

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/bcrypt"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testwebui"
	"github.com/sftpgate/sftpgate/webui"
)

// The test kit's, as every test package has them.
var must = testkit.Must

var (
	k8s client.Client
	// uiKube is the UI's service account's.
	uiKube client.Client
	uiURL  string
	// newUI serves a web UI with its flags' defaults, as flags and then
	// mutate change them; newUIServer makes one (started) for the test to
	// serve.
	newUI       func(mutate func(*webui.Options), flags ...string) *httptest.Server
	newUIServer func(mutate func(*webui.Options), flags ...string) *webui.Server
	// uiConfig reaches the control plane as the UI's service account, for
	// commands an operator runs in the UI's pod.
	uiConfig *rest.Config
)

// noGateway is the web UI's --gateway-url: nothing listens there. The web
// UI's own tests need no gateway, nor the manager or the worker; those of
// the UI with them are test/e2e/tenancy's.
const noGateway = "http://127.0.0.1:9"

// TestMain runs a control plane and the web UI on loopback.
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
	newUIServer = func(mutate func(*webui.Options), flags ...string) *webui.Server {
		var opts webui.Options
		fs := flag.NewFlagSet("webui", flag.ContinueOnError)
		opts.BindFlags(fs)
		if err := fs.Parse(flags); err != nil {
			panic(err)
		}
		opts.Namespace, opts.GatewayURL, opts.BcryptCost = testwebui.AccountsNamespace, noGateway, bcrypt.MinCost
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
	newUI = func(mutate func(*webui.Options), flags ...string) *httptest.Server {
		srv := httptest.NewServer(newUIServer(mutate, flags...).Handler())
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
		// against its account.
		o.Quota.Watches = 100
	}).URL
	return m.Run()
}

// newClient is a person at the web UI, not yet signed up.
func newClient(t *testing.T) *testwebui.Client { return testwebui.New(t, uiURL) }

// TestHTMLIsText: what people type is shown as text, never as markup.
func TestHTMLIsText(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.SignUp(t)
	status, body := c.Form(t, "/connections", url.Values{"name": {"markup"}, "host": {"127.0.0.1"}, "port": {"22"},
		"username": {`<b id="injected">bold</b>`}, "auth": {"password"}, "password": {"x"}, "trust": {"first-use"}})
	if status != http.StatusOK || strings.Contains(body, `<b id="injected">`) || !strings.Contains(body, `&lt;b id=&#34;injected&#34;&gt;`) {
		t.Errorf("the connection page with HTML in its username: %d %s", status, body)
	}
	// A name with HTML is refused, and the form shows it back as text.
	status, body = c.Form(t, "/connections", url.Values{"name": {`<script>alert(1)</script>`}, "host": {"127.0.0.1"},
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
	first, second := testwebui.Browser(t), testwebui.Browser(t)
	testwebui.SignUp(t, first, uiURL)
	must(t, chromedp.Do(first,
		chromedp.SendKeys(chromedp.ID("name"), "private"),
		chromedp.SendKeys(chromedp.ID("host"), "127.0.0.1"),
		chromedp.SendKeys(chromedp.ID("username"), "someone"),
		chromedp.SendKeys(chromedp.ID("password"), "secret"),
		chromedp.Submit(chromedp.ID("host")),
		chromedp.WaitVisible(chromedp.CSS("section.status")),
	))
	testwebui.SignUp(t, second, uiURL)
	// The new-connection form with a private key and a pinned host key.
	must(t, chromedp.Do(second,
		chromedp.Click(chromedp.CSS(`input[name="auth"][value="key"]`)),
		chromedp.Click(chromedp.CSS(`input[name="trust"][value="pinned"]`)),
		chromedp.WaitVisible(chromedp.ID("hostKey")),
	))
	testwebui.CheckPage(t, second, "new connection (private key, pinned host key)")
	must(t, chromedp.Do(second, chromedp.Navigate(uiURL+"/connections"), chromedp.WaitVisible(chromedp.CSS(".empty"))))
	testwebui.CheckPage(t, second, "connections (none)")
	must(t, chromedp.Do(second, chromedp.Navigate(uiURL+"/connections/private"), chromedp.WaitVisible(chromedp.CSS("main h1"))))
	if title, err := chromedp.Run(second, chromedp.Text(chromedp.CSS("main h1"))); err != nil || title != "Not found" {
		t.Errorf("the second account opens the first's connection: %q %v", title, err)
	}
	testwebui.CheckPage(t, second, "not found")

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
	testwebui.CheckPage(t, first, "refused")
	must(t, chromedp.Do(first, chromedp.Navigate(uiURL+"/keys"), chromedp.WaitVisible(chromedp.CSS("main h1"))))
	if html, err := chromedp.Run(first, chromedp.OuterHTML(chromedp.CSS("main"))); err != nil || !strings.Contains(html, "No API keys yet") {
		t.Errorf("a cross-origin form made a key: %v", err)
	}
	testwebui.CheckPage(t, first, "keys (none)")
}
