package tenancy

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/hack/fixtures/testoidc"
	"github.com/sftpgate/sftpgate/hack/fixtures/testwebui"
)

// addMember makes who ("person" or "group", by email or group name) a
// member of owner's team with role.
func addMember(t *testing.T, owner *testwebui.Client, kind, who, role string) {
	t.Helper()
	status, body := owner.Form(t, "/members", url.Values{"kind": {kind}, "name": {who}, "role": {role}})
	if status != http.StatusOK || !strings.Contains(body, who) {
		t.Fatalf("adding %s %s as %s: %d %s", kind, who, role, status, body)
	}
}

// memberBinding is the RoleBinding that makes subject (an RBAC user or
// group name) a member in namespace.
func memberBinding(t *testing.T, namespace, subject string) string {
	t.Helper()
	var list rbacv1.RoleBindingList
	must(t, k8s.List(context.Background(), &list, client.InNamespace(namespace)))
	for _, b := range list.Items {
		for _, s := range b.Subjects {
			if s.Name == subject {
				return b.Name
			}
		}
	}
	t.Fatalf("no binding in %s names %s", namespace, subject)
	return ""
}

// ssoUI is a web UI of its own that signs people in with p only,
// checking sessions with it again after recheck; it ends with the test.
func ssoUI(t *testing.T, p *testoidc.Provider, recheck time.Duration) string {
	t.Helper()
	ui, err := sys.Add(t.Context(), "webui", testwebui.OIDCFlags(p, recheck)...)
	must(t, err)
	t.Cleanup(func() { _ = ui.Stop() })
	return ui.URL
}

// TestTeamMemberView: an account's owner makes a provider's group its
// team's viewers; a person of that group signs in through the provider,
// finds the team, and sees its connection and files, without the
// buttons to change them; made an admin, they see the members.
func TestTeamMemberView(t *testing.T) {
	t.Parallel()
	owner := newTenant(t, "owner")
	addMember(t, owner.ui, "group", "auditors", "viewer")
	email, password := testwebui.NewEmail(t), "the member's password"
	p := testwebui.StartProvider(t, testoidc.User{Email: email, Password: password, Groups: []string{"auditors"}})
	ui := ssoUI(t, p, time.Minute)
	ctx := testwebui.Browser(t)

	must(t, chromedp.Do(ctx, chromedp.Navigate(ui+"/login")))
	testwebui.SignInAtProvider(t, ctx, email, password)
	must(t, chromedp.Do(ctx, chromedp.Navigate(ui+"/teams"), chromedp.WaitVisible(chromedp.CSS("ul.teams"))))
	testwebui.CheckPage(t, ctx, "teams")
	must(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`button[aria-label="Switch to `+owner.ui.Email+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/connections/`+owner.uiConn+`"]`))))
	team, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(".team")))
	must(t, err)
	if !strings.Contains(team, owner.ui.Email) || !strings.Contains(team, "(viewer)") {
		t.Errorf("the header says %q, not the owner's team and the viewer's role", team)
	}
	testwebui.CheckPage(t, ctx, "connections as a viewer")
	must(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`a[href="/connections/`+owner.uiConn+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`a.button[href*="/files?path="]`))))
	for _, sel := range []string{`a[href$="/edit"]`, `a[href$="/delete"]`, `a[href^="/keys/new"]`, `#serviceaccounts`, `a[href="/keys"]`, `a[href="/members"]`} {
		if n := count(t, ctx, sel); n != 0 {
			t.Errorf("a viewer's connection page has %s", sel)
		}
	}
	must(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`a.button[href*="/files?path="]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-name="from-`+owner.ns+`-setup"]`))))
	if n := count(t, ctx, "#upload-files, form[action$='/mkdir'], details.rename"); n != 0 {
		t.Errorf("a viewer's file browser offers %d ways to change files", n)
	}
	testwebui.CheckPage(t, ctx, "files as a viewer")
	// A page of a higher role, by its URL, says why not.
	must(t, chromedp.Do(ctx, chromedp.Navigate(ui+"/keys"), chromedp.WaitVisible(chromedp.CSS("main h1"))))
	if heading, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main h1"))); err != nil || heading != "Not allowed" {
		t.Errorf("a viewer opening the API keys sees %q (%v)", heading, err)
	}
	testwebui.CheckPage(t, ctx, "not allowed")

	// Made an admin by email, the same person sees the members.
	addMember(t, owner.ui, "person", email, "admin")
	must(t, chromedp.Do(ctx, chromedp.Navigate(ui+"/members"), chromedp.WaitVisible(chromedp.CSS(`tr[data-member="group:auditors"]`))))
	testwebui.CheckPage(t, ctx, "members")
	if n := count(t, ctx, `tr[data-member="`+owner.ui.Email+`"] button`); n != 0 {
		t.Error("the owner can be removed")
	}
	_ = memberBinding(t, owner.ns, accountUser(email))
}

// count is how many elements sel matches on the page.
func count(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+jsString(sel)+`).length`))
	must(t, err)
	return n
}

func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
