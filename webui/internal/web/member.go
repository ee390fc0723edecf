package web

import (
	"context"
	"slices"

	"github.com/sftpgate/sftpgate/webui/accounts"
)

// TeamRoles are the team roles: the ClusterRoles, least first, by the names the pages use.
var TeamRoles = []struct{ Name, clusterRole string }{
	{"viewer", "sftpgate-team-viewer"},
	{"editor", "sftpgate-team-editor"},
	{"admin", "sftpgate-team-admin"},
}

// RoleRank orders roles: "" (none) below viewer below editor below admin.
func RoleRank(role string) int {
	return 1 + slices.IndexFunc(TeamRoles, func(r struct{ Name, clusterRole string }) bool { return r.Name == role })
}

// ClusterRoleOf is the ClusterRole of a team role ("" for none).
func ClusterRoleOf(role string) string {
	if i := RoleRank(role); i > 0 {
		return TeamRoles[i-1].clusterRole
	}
	return ""
}

// RoleOfClusterRole is the team role a ClusterRole grants ("" for none).
func RoleOfClusterRole(clusterRole string) string {
	for _, r := range TeamRoles {
		if r.clusterRole == clusterRole {
			return r.Name
		}
	}
	return ""
}

// Member is the person a request acts for, in the team it acts in.
type Member struct {
	// Account is theirs (not the copy pages act with, in the team's
	// namespace).
	Account *accounts.Account
	// User and Groups are theirs to RBAC.
	User   string
	Groups []string
	// Own is their account's namespace ("" before they make their own
	// team); team the one they act in (none, Namespace "", when they have
	// no team at all), and role theirs there ("" when RBAC grants them
	// none of the roles).
	Own  string
	Team accounts.Team
	Role string
}

type memberKey struct{}

// WithMember is ctx acting as m.
func WithMember(ctx context.Context, m *Member) context.Context {
	return context.WithValue(ctx, memberKey{}, m)
}

// MemberFrom is who the request acts as (nil outside the log-in).
func MemberFrom(ctx context.Context) *Member {
	m, _ := ctx.Value(memberKey{}).(*Member)
	return m
}

// MaxGroupName bounds a provider's group name, in a session and on the
// Members page.
const MaxGroupName = 64

type accountKey struct{}

// WithAccount is ctx acting for acct.
func WithAccount(ctx context.Context, acct *accounts.Account) context.Context {
	return context.WithValue(ctx, accountKey{}, acct)
}

// AccountFrom is the account a request acts for, its Namespace the team's (nil outside the log-in).
func AccountFrom(ctx context.Context) *accounts.Account {
	a, _ := ctx.Value(accountKey{}).(*accounts.Account)
	return a
}
