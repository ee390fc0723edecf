package accounts

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
)

// TestTeamNames: a team's name is letters, digits, single spaces and a
// little punctuation; nothing that could pass for an owner's email
// beside it, draw nothing, stack over its neighbours or turn the line
// around.
func TestTeamNames(t *testing.T) {
	for name, want := range map[string]string{
		" Payroll ":              "Payroll",
		"R&D: north-east #2":     "R&D: north-east #2",
		"Équipe Paie":            "Équipe Paie",
		"Equipe\u0301":           "Equipé",
		"経理チーム":                  "経理チーム",
		"Payroll (cfo@acme.com)": "",
		"Pay  roll":              "",
		"Pay\u202eroll":          "",
		"Pay\u200broll":          "",
		"Pay\u3164roll":          "",
		"a\u030d\u030d\u030d":    "",
		"\u0301a":                "",
		"Pay\x00roll":            "",
		"<b>":                    "",
		"":                       "",
	} {
		got, err := CheckTeamName(name)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("%q: %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := CheckTeamName(strings.Repeat("a", MaxTeamName+1)); err == nil {
		t.Error("a name longer than MaxTeamName is taken")
	}
}

// FuzzTeamName: whatever an admin types, a name taken is at most
// MaxTeamName printable characters with no "@", bracket or format
// character, and taken again unchanged.
func FuzzTeamName(f *testing.F) {
	for _, seed := range []string{"Payroll", " R&D ", "Pay\u202eroll", "a\u030d\u030d\u030d", "x@y", "経理", "\xff"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, name string) {
		got, err := CheckTeamName(name)
		if err != nil {
			return
		}
		if !utf8.ValidString(got) || got == "" || utf8.RuneCountInString(got) > MaxTeamName || strings.ContainsAny(got, "@()[]<>") ||
			strings.ContainsFunc(got, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }) {
			t.Fatalf("%q is taken as %q", name, got)
		}
		if again, err := CheckTeamName(got); err != nil || again != got {
			t.Fatalf("%q, taken as %q, is taken again as %q (%v)", name, got, again, err)
		}
	})
}

// TestLegacyTeamIndex: a subject's entries of the previous release's
// index (a Secret per subject) are moved into the current one at the
// first reading of its teams, a team gone since and one whose bindings
// no longer name the subject left out, and the Secret deleted; another
// subject's Secret is left alone.
func TestLegacyTeamIndex(t *testing.T) {
	ctx := context.Background()
	accounts, teamA, teamB := testkit.Namespace(t, k8s, "accounts-"), testkit.Namespace(t, k8s, "team-a-"), testkit.Namespace(t, k8s, "team-b-")
	member, other := UserName("member@example.com"), UserName("other@example.com")
	legacy := func(subject, teams string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: accounts, Name: legacyIndexName(subject)},
			Type: legacyIndexType, Data: map[string][]byte{"teams": []byte(teams)}}
	}
	binding := func(namespace, name, subject string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: subject}}}
	}
	for _, obj := range []client.Object{
		binding(teamA, OwnerBinding, UserName("owner@example.com")),
		binding(teamA, "member", member),
		binding(teamB, OwnerBinding, UserName("owner-b@example.com")), // the member was removed
		legacy(member, fmt.Sprintf(`[{"namespace":%q,"name":"a"},{"namespace":%q,"name":"b"},{"namespace":"gone","name":"x"}]`, teamA, teamB)),
		legacy(other, fmt.Sprintf(`[{"namespace":%q,"name":"a"}]`, teamA)),
	} {
		testkit.Must(t, k8s.Create(ctx, obj))
	}
	s := &Store{Client: k8s, Namespace: accounts, Quota: Quota{Members: 10}}
	for range 2 {
		teams, err := s.Teams(ctx, []string{member})
		if err != nil {
			t.Fatal(err)
		}
		if len(teams) != 1 || teams[0].Namespace != teamA || teams[0].Owner != "owner@example.com" {
			t.Fatalf("the member's teams: %+v", teams)
		}
	}
	var left corev1.Secret
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(legacy(member, "")), &left); !apierrors.IsNotFound(err) {
		t.Errorf("the member's legacy index is still there: %v", err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(legacy(other, "")), &left); err != nil {
		t.Errorf("another subject's legacy index: %v", err)
	}
}
