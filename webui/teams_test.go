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
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testoidc"
	"github.com/sftpgate/sftpgate/hack/fixtures/testwebui"
	"github.com/sftpgate/sftpgate/webui/accounts"
)

// TestTeamIndexBound: a team indexes at most as many people and groups as
// it may have members, so that no one team fills anyone's switcher; an
// entry whose binding was removed some other way makes room; and a
// person's index holds the entries of many teams, each within its own
// bound.
func TestTeamIndexBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := &accounts.Store{Client: k8s, Namespace: testwebui.AccountsNamespace, Quota: accounts.Quota{Members: 2}}
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
	person, colleague, third := accounts.UserName(testwebui.NewEmail(t)), accounts.UserName(testwebui.NewEmail(t)), accounts.UserName(testwebui.NewEmail(t))
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

// TestInvitedPeopleChooseTheirTeam: people whom an owner of a verified
// email added (through a provider's group, or by email) sign in through
// the provider for the first time: no empty team of their own is made,
// and they choose the team to work in (nothing chooses for them), which
// goes by the name its admin gave it, beside the owner's email. Asked,
// they get a team of their own; removed from the only team they had,
// they reach the teams page and nothing else. A team of an unverified
// owner keeps no one from a team of their own, and its name is not said
// to them at sign-in.
func TestInvitedPeopleChooseTheirTeam(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := newUIServer(nil).Accounts()
	owner := newClient(t)
	team, err := store.SignUpWithNamespace(ctx, owner.Email, testwebui.Password, accounts.NewNamespaceName(), true)
	must(t, err)
	if status, body := owner.Form(t, "/login", url.Values{"email": {owner.Email}, "password": {testwebui.Password}}); status != http.StatusOK {
		t.Fatalf("the owner logs in: %d %s", status, body)
	}
	if status, body := owner.Form(t, "/members/team-name", url.Values{"team": {"Pay\x00roll"}}); status != http.StatusUnprocessableEntity ||
		!strings.Contains(body, `id="team-error"`) {
		t.Errorf("a team name with a control character: %d %s", status, body)
	}
	if status, body := owner.Form(t, "/members/team-name", url.Values{"team": {" Payroll "}}); status != http.StatusOK ||
		!strings.Contains(body, "The team is now called Payroll.") {
		t.Fatalf("naming the team: %d %s", status, body)
	}
	grouped, byEmail, elsewhere := newClient(t), newClient(t), newClient(t)
	for _, add := range []url.Values{
		{"kind": {"group"}, "name": {"payroll"}, "role": {"viewer"}},
		{"kind": {"person"}, "name": {byEmail.Email}, "role": {"editor"}},
	} {
		if status, body := owner.Form(t, "/members", add); status != http.StatusOK {
			t.Fatalf("adding %v: %d %s", add, status, body)
		}
	}
	stranger := newClient(t)
	stranger.SignUp(t)
	if status, body := stranger.Form(t, "/members", url.Values{"kind": {"person"}, "name": {elsewhere.Email}, "role": {"editor"}}); status != http.StatusOK {
		t.Fatalf("an unverified owner adds a member: %d %s", status, body)
	}
	const password = "the provider's password"
	p := testwebui.StartProvider(t, testoidc.User{Email: grouped.Email, Password: password, Groups: []string{"payroll"}},
		testoidc.User{Email: byEmail.Email, Password: password}, testoidc.User{Email: elsewhere.Email, Password: password})
	sso := ssoUI(p, time.Minute)
	hasOwnTeam := func(email string) bool {
		t.Helper()
		acct, err := store.SignIn(ctx, email, nil)
		must(t, err)
		err = k8s.Get(ctx, client.ObjectKey{Name: acct.Namespace}, &corev1.Namespace{})
		if made := err == nil; made == acct.NoOwnTeam {
			t.Fatalf("%s: namespace made %v (%v), the account says none %v", email, made, err, acct.NoOwnTeam)
		}
		return !acct.NoOwnTeam
	}

	browser := testwebui.Browser(t)
	must(t, chromedp.Do(browser, chromedp.Navigate(sso+"/login")))
	testwebui.SignInAtProvider(t, browser, grouped.Email, password)
	must(t, chromedp.Do(browser, chromedp.WaitVisible(chromedp.CSS(`form[action="/teams/own"]`))))
	notice, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(".alert.ok")))
	must(t, err)
	if !strings.Contains(notice, "Choose the team to work in: 1 team has added you.") {
		t.Errorf("a member's first sign-in says %q", notice)
	}
	testwebui.CheckPage(t, browser, "teams, none of one's own")
	if hasOwnTeam(grouped.Email) {
		t.Error("a member's first sign-in made them an empty team")
	}
	must(t, chromedp.Do(browser, chromedp.Click(chromedp.CSS(`button[aria-label="Switch to Payroll (`+owner.Email+`)"]`)),
		chromedp.WaitVisible(chromedp.CSS("main h1"))))
	where, err := chromedp.Run(browser, chromedp.TextContent(chromedp.CSS(".team")))
	must(t, err)
	if want := "Payroll (" + owner.Email + ") (viewer)"; !strings.Contains(where, want) {
		t.Errorf("the member chose the team, and the menu says %q; want %q", where, want)
	}
	testwebui.CheckPage(t, browser, "connections of a named team")
	must(t, chromedp.Do(browser, chromedp.Navigate(sso+"/teams"), chromedp.WaitVisible(chromedp.CSS(`form[action="/teams/own"]`))))
	must(t, chromedp.Do(browser, chromedp.Click(chromedp.CSS(`form[action="/teams/own"] button`)), chromedp.WaitVisible(chromedp.CSS(".alert.ok"))))
	where, err = chromedp.Run(browser, chromedp.TextContent(chromedp.CSS(".team")))
	must(t, err)
	if !strings.Contains(where, grouped.Email+" (admin)") || !hasOwnTeam(grouped.Email) {
		t.Errorf("asked for a team of their own, the member is in %q", where)
	}

	byEmail.Base = sso
	if _, body := byEmail.SignInAtProvider(t, password); !strings.Contains(body, "Choose a team") || !strings.Contains(body, "Payroll") {
		t.Errorf("a person added by email signs in to: %s", body)
	}
	if status, body := byEmail.Form(t, "/teams", url.Values{"namespace": {team.Namespace}}); status != http.StatusOK || !strings.Contains(body, "Payroll") {
		t.Errorf("choosing the team: %d %s", status, body)
	}
	var bindings rbacv1.RoleBindingList
	must(t, k8s.List(ctx, &bindings, client.InNamespace(team.Namespace)))
	for _, b := range bindings.Items {
		if b.Subjects[0].Name == accounts.UserName(byEmail.Email) {
			if status, body := owner.Form(t, "/members/"+b.Name+"/remove", nil); status != http.StatusOK {
				t.Fatalf("removing a member: %d %s", status, body)
			}
		}
	}
	if status, body := byEmail.Get(t, "/connections"); status != http.StatusOK || !strings.Contains(body, "You are in no team now") || strings.Contains(body, "Payroll") {
		t.Errorf("removed from their only team, a person sees: %d %s", status, body)
	}
	if status, body := byEmail.Get(t, "/activity"); status != http.StatusOK || !strings.Contains(body, "Choose a team") {
		t.Errorf("with no team, a page answers %d, not the teams page", status)
	}

	elsewhere.Base = sso
	if _, body := elsewhere.SignInAtProvider(t, password); strings.Contains(body, "also a member") || !hasOwnTeam(elsewhere.Email) {
		t.Errorf("a member of an unverified owner's team signs in to: %s", body)
	}
}
