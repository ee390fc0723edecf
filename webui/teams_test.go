package webui_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
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
