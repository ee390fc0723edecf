package webui_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testoidc"
	"github.com/sftpgate/sftpgate/webui/accounts"
)

// addMember makes who ("person" or "group", by email or group name) a
// member of owner's team with role.
func addMember(t *testing.T, owner *uiClient, kind, who, role string) {
	t.Helper()
	status, body := owner.form(t, "/members", url.Values{"kind": {kind}, "name": {who}, "role": {role}})
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

// TestTeamMemberView: an account's owner makes a provider's group its
// team's viewers; a person of that group signs in through the provider,
// finds the team, and sees its connection and files, without the
// buttons to change them; made an admin, they see the members.
func TestTeamMemberView(t *testing.T) {
	t.Parallel()
	owner := newTenant(t, "owner")
	addMember(t, owner.ui, "group", "auditors", "viewer")
	email, password := newEmail(t), "the member's password"
	p := startProvider(t, testoidc.User{Email: email, Password: password, Groups: []string{"auditors"}})
	ui := ssoUI(p, time.Minute)
	ctx := browser(t)

	must(t, chromedp.Do(ctx, chromedp.Navigate(ui+"/login")))
	signInAtProvider(t, ctx, email, password)
	must(t, chromedp.Do(ctx, chromedp.Navigate(ui+"/teams"), chromedp.WaitVisible(chromedp.CSS("ul.teams"))))
	checkA11y(t, ctx, "teams")
	must(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`button[aria-label="Switch to `+owner.ui.email+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/connections/`+owner.uiConn+`"]`))))
	team, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(".team")))
	must(t, err)
	if !strings.Contains(team, owner.ui.email) || !strings.Contains(team, "(viewer)") {
		t.Errorf("the header says %q, not the owner's team and the viewer's role", team)
	}
	checkA11y(t, ctx, "connections as a viewer")
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
	checkA11y(t, ctx, "files as a viewer")

	// Made an admin by email, the same person sees the members.
	addMember(t, owner.ui, "person", email, "admin")
	must(t, chromedp.Do(ctx, chromedp.Navigate(ui+"/members"), chromedp.WaitVisible(chromedp.CSS(`tr[data-member="group:auditors"]`))))
	checkA11y(t, ctx, "members")
	if n := count(t, ctx, `tr[data-member="`+owner.ui.email+`"] button`); n != 0 {
		t.Error("the owner can be removed")
	}
	_ = memberBinding(t, owner.ns, accounts.UserName(email))
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

// TestTeamIndexBound: a team indexes at most as many people and groups as
// it may have members, so that no one team fills anyone's switcher; an
// entry whose binding was removed some other way makes room; and a
// person's index holds the entries of many teams, each within its own
// bound.
func TestTeamIndexBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := &accounts.Store{Client: k8s, Namespace: accountsNamespace, Quota: accounts.Quota{Members: 2}}
	bind := func(namespace, name, subject string) *rbacv1.RoleBinding {
		b := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "sftpgate-team-viewer"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: subject}}}
		must(t, k8s.Create(ctx, b))
		return b
	}
	teams := func(subject string) []string {
		list, err := store.Teams(ctx, []string{subject})
		must(t, err)
		var namespaces []string
		for _, team := range list {
			namespaces = append(namespaces, team.Namespace)
		}
		slices.Sort(namespaces)
		return namespaces
	}
	first, second := testkit.Namespace(t, k8s, "team-"), testkit.Namespace(t, k8s, "team-")
	person, colleague, third := accounts.UserName(newEmail(t)), accounts.UserName(newEmail(t)), accounts.UserName(newEmail(t))
	bind(first, "person", person)
	gone := bind(first, "colleague", colleague)
	bind(first, "third", third)
	for _, subject := range []string{person, colleague} {
		must(t, store.IndexTeam(ctx, subject, accounts.Team{Namespace: first, Name: "first@example.com"}))
	}
	if err := store.IndexTeam(ctx, third, accounts.Team{Namespace: first, Name: "first@example.com"}); !errors.Is(err, accounts.ErrTeamIndexFull) {
		t.Errorf("a team indexes more subjects than it may have members: %v", err)
	}
	must(t, store.IndexTeam(ctx, person, accounts.Team{Namespace: first, Name: "first@example.com"})) // again: no new entry

	must(t, k8s.Delete(ctx, gone)) // as kubectl would: the index is not told
	must(t, store.IndexTeam(ctx, third, accounts.Team{Namespace: first, Name: "first@example.com"}))
	if got := teams(colleague); len(got) != 0 {
		t.Errorf("a subject the team binds no more is still indexed in %v", got)
	}

	bind(second, "person", person)
	must(t, store.IndexTeam(ctx, person, accounts.Team{Namespace: second, Name: "second@example.com", Unverified: true}))
	if got, want := teams(person), slices.Sorted(slices.Values([]string{first, second})); !slices.Equal(got, want) {
		t.Errorf("the person's teams: %v, want %v", got, want)
	}
	must(t, store.UnindexTeam(ctx, person, first))
	if got, want := teams(person), []string{second}; !slices.Equal(got, want) {
		t.Errorf("the person's teams once one removed them: %v, want %v", got, want)
	}
}
