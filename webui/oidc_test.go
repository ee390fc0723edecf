package webui_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sftpgate/sftpgate/hack/fixtures/testoidc"
	"github.com/sftpgate/sftpgate/hack/fixtures/testwebui"
)

// ssoUI is a web UI that signs people in with p only, checking sessions
// with it again after recheck.
func ssoUI(p *testoidc.Provider, recheck time.Duration) string {
	return newUI(nil, testwebui.OIDCFlags(p, recheck)...).URL
}

// atProviderLogin says whether the browser shows p's sign-in form.
func atProviderLogin(t *testing.T, ctx context.Context, p *testoidc.Provider) bool {
	t.Helper()
	must(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("h1"))))
	loc, err := chromedp.Run(ctx, chromedp.Location())
	must(t, err)
	return strings.HasPrefix(loc, p.Issuer+"/login")
}

// TestSignInWithProvider: with passwords off, the log-in page goes
// straight to the provider; signing in there makes the account of the
// email on the first time; the session outlives --oidc-recheck while the
// provider still vouches (its refresh token rotated); logging out ends
// the session here and at the provider; once the provider disables the
// person, their session ends at the first request after the recheck.
func TestSignInWithProvider(t *testing.T) {
	t.Parallel()
	email, password := testwebui.NewEmail(t), "the provider's password"
	p := testwebui.StartProvider(t, testoidc.User{Email: email, Password: password, Groups: []string{"payroll"}})
	const recheck = time.Second
	ui := ssoUI(p, recheck)
	ctx := testwebui.Browser(t)

	must(t, chromedp.Do(ctx, chromedp.Navigate(ui+"/login")))
	if !atProviderLogin(t, ctx, p) {
		t.Fatal("the log-in page did not go to the provider")
	}
	testwebui.SignInAtProvider(t, ctx, email, password)
	signedIn := func(want bool) {
		t.Helper()
		must(t, chromedp.Do(ctx, chromedp.Navigate(ui+"/connections"), chromedp.WaitVisible(chromedp.CSS("h1"))))
		if !want {
			if !atProviderLogin(t, ctx, p) {
				t.Fatal("a session the provider no longer vouches for still opens pages")
			}
			return
		}
		who, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(".who")))
		must(t, err)
		if who != email {
			t.Fatalf("signed in as %q, want %q", who, email)
		}
	}
	signedIn(true)
	testwebui.CheckPage(t, ctx, "connections")

	// Past the recheck, the provider is asked again, and still says yes.
	time.Sleep(recheck + 100*time.Millisecond)
	signedIn(true)

	// Through the provider's end-session endpoint, which the form's
	// Content-Security-Policy must allow the log-out to go on to.
	must(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS("details.account summary")), chromedp.Click(chromedp.CSS("form.logout button")),
		chromedp.WaitNotPresent(chromedp.CSS(".who")), chromedp.WaitVisible(chromedp.CSS("h1"))))
	heading, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("h1")))
	must(t, err)
	if heading != "Logged out" {
		t.Fatalf("after logging out the browser shows %q", heading)
	}
	testwebui.CheckPage(t, ctx, "logged out")
	signedIn(false)

	testwebui.SignInAtProvider(t, ctx, email, password)
	signedIn(true)
	p.Disable(email)
	time.Sleep(recheck + 100*time.Millisecond)
	signedIn(false)
}

// TestSignInRefusals: a callback that the browser did not start, a
// password log-in where passwords are off, and a sign-up there, are
// refused.
func TestSignInRefusals(t *testing.T) {
	t.Parallel()
	ui := ssoUI(testwebui.StartProvider(t), time.Minute)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/login/oidc/callback?state=forged&code=forged", http.StatusUnauthorized},
		{http.MethodPost, "/login", http.StatusForbidden},
		{http.MethodGet, "/signup", http.StatusForbidden},
		{http.MethodGet, "/login", http.StatusSeeOther},
	} {
		req, err := http.NewRequest(tc.method, ui+tc.path, strings.NewReader(url.Values{"email": {"x@example.com"}, "password": {"a long enough password"}}.Encode()))
		must(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := c.Do(req)
		must(t, err)
		_ = resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, resp.StatusCode, tc.want)
		}
	}
}
