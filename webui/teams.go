package webui

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/webui/accounts"
)

// Teams. An account's namespace is its team: its owner and the members
// granted a team role there by a RoleBinding (the Members page makes
// them; GitOps may too). Before every action the UI asks the API server
// whether the person may (a SubjectAccessReview of their user and
// groups, never cached: a member removed is refused at their next
// request), then acts with its own service account, whose rights cover
// any member's. So RBAC, not the UI, decides what each role may do
// (config/rbac/webui/team_roles.yaml).

// Team roles: the ClusterRoles, least first, by the names the pages use.
var teamRoles = []struct{ name, clusterRole string }{
	{"viewer", "sftpgate-team-viewer"},
	{"editor", "sftpgate-team-editor"},
	{"admin", "sftpgate-team-admin"},
}

// roleRank orders roles: "" (none) below viewer below editor below admin.
func roleRank(role string) int {
	return 1 + slices.IndexFunc(teamRoles, func(r struct{ name, clusterRole string }) bool { return r.name == role })
}

func clusterRoleOf(role string) string {
	if i := roleRank(role); i > 0 {
		return teamRoles[i-1].clusterRole
	}
	return ""
}

func roleOfClusterRole(clusterRole string) string {
	for _, r := range teamRoles {
		if r.clusterRole == clusterRole {
			return r.name
		}
	}
	return ""
}

// permission is what an action needs: a verb on a resource of
// sftpgate.dev in the team's namespace.
type permission struct{ verb, resource string }

// What pages need, by the rules of config/rbac/webui/team_roles.yaml.
var (
	seeConnections    = permission{"list", "sftpconnections"}
	createConnections = permission{"create", "sftpconnections"}
	updateConnections = permission{"update", "sftpconnections"}
	deleteConnections = permission{"delete", "sftpconnections"}
	readFiles         = permission{"get", "sftpconnections/files"}
	writeFiles        = permission{"create", "sftpconnections/files"}
	renameFiles       = permission{"update", "sftpconnections/files"}
	deleteFiles       = permission{"delete", "sftpconnections/files"}
	createWatches     = permission{"create", "sftpwatches"}
	deleteWatches     = permission{"delete", "sftpwatches"}
	seeTransfers      = permission{"list", "transfers"}
	createTransfers   = permission{"create", "transfers"}
	deleteTransfers   = permission{"delete", "transfers"}
	manageKeys        = permission{"list", "apikeys"}
	createKeys        = permission{"create", "apikeys"}
	deleteKeys        = permission{"delete", "apikeys"}
	manageOpenPGPKeys = permission{"list", "openpgpkeys"}
	createOpenPGPKeys = permission{"create", "openpgpkeys"}
	deleteOpenPGPKeys = permission{"delete", "openpgpkeys"}
	seeMembers        = permission{"list", "members"}
	addMembers        = permission{"create", "members"}
	removeMembers     = permission{"delete", "members"}
	renameTeam        = permission{"update", "members"}
	seeActivity       = permission{"get", "activity"}
	seeShares         = permission{"list", "sharelinks"}
	createShares      = permission{"create", "sharelinks"}
	deleteShares      = permission{"delete", "sharelinks"}
	// roleMarkers tell admin, editor and viewer apart.
	roleMarkers = []permission{addMembers, writeFiles, seeConnections}
)

// member is the person a request acts for, in the team it acts in.
type member struct {
	// user and groups are theirs to RBAC.
	user   string
	groups []string
	// own is their account's namespace ("" before they make their own
	// team); team the one they act in (none, Namespace "", when they have
	// no team at all), and role theirs there ("" when RBAC grants them
	// none of the roles).
	own  string
	team accounts.Team
	role string
}

type memberKey struct{}

func memberFrom(ctx context.Context) *member {
	m, _ := ctx.Value(memberKey{}).(*member)
	return m
}

// newMember is the person of acct and their session's groups.
func newMember(acct *accounts.Account, s session) *member {
	m := &member{user: acct.RBACUser()}
	if !acct.NoOwnTeam {
		m.own = acct.Namespace
	}
	for _, g := range s.Groups {
		m.groups = append(m.groups, accounts.GroupName(g))
	}
	return m
}

// allowed asks the API server whether m may do p in namespace.
func (u *ui) allowed(ctx context.Context, m *member, namespace string, p permission) (bool, error) {
	resource, sub, _ := strings.Cut(p.resource, "/")
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: m.user, Groups: m.groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: p.verb,
			Group: v1alpha1.GroupVersion.Group, Resource: resource, Subresource: sub}}}
	if err := u.client.Create(ctx, sar); err != nil {
		return false, fmt.Errorf("asking RBAC what a member may do: %w", err)
	}
	return sar.Status.Allowed && !sar.Status.Denied, nil
}

// roleIn is the highest team role whose rights m has in namespace.
func (u *ui) roleIn(ctx context.Context, m *member, namespace string) (string, error) {
	for i, p := range roleMarkers {
		ok, err := u.allowed(ctx, m, namespace, p)
		if err != nil {
			return "", err
		}
		if ok {
			return teamRoles[len(teamRoles)-1-i].name, nil
		}
	}
	return "", nil
}

// joinTeam is m in the team the browser chose (its own account's when
// none, or when it is a member there no more), with their role there. A
// person without a team of their own acts in the first team that lists
// them where they still have a role (none left: no team). An owner whose
// namespace lacks its owner binding (an account made before teams) gets
// it.
func (u *ui) joinTeam(w http.ResponseWriter, r *http.Request, acct *accounts.Account, m *member) error {
	ctx := r.Context()
	var chosen accounts.Team
	if u.cookies.get(r, teamCookie, &chosen) && chosen.Namespace != m.own {
		role, err := u.roleIn(ctx, m, chosen.Namespace)
		if err != nil {
			return err
		}
		if role != "" {
			m.team, m.role = chosen, role
			return nil
		}
		u.cookies.clear(w, r, teamCookie)
	}
	if m.own == "" {
		return u.landInTeam(w, r, m)
	}
	m.team = accounts.Team{Namespace: acct.Namespace, Name: acct.Email, Owner: acct.Email, Unverified: !acct.Verified}
	role, err := u.roleIn(ctx, m, acct.Namespace)
	if err == nil && role == "" {
		if err = u.accounts.EnsureOwner(ctx, acct); err == nil {
			role, err = u.roleIn(ctx, m, acct.Namespace)
		}
	}
	m.role = role
	return err
}

// landInTeam is m, who has no team of their own, in the first team of
// their index where RBAC grants them a role, those of verified owners
// first; the browser keeps it. None: m.team stays empty.
func (u *ui) landInTeam(w http.ResponseWriter, r *http.Request, m *member) error {
	teams, err := u.otherTeams(r.Context(), m)
	if err != nil {
		return err
	}
	for _, t := range teams {
		role, err := u.roleIn(r.Context(), m, t.Namespace)
		if err != nil {
			return err
		}
		if role != "" {
			m.team, m.role = t, role
			return u.cookies.set(w, r, teamCookie, t)
		}
	}
	return nil
}

// otherTeams are the teams the index lists for m, other than their own,
// those of verified owners first.
func (u *ui) otherTeams(ctx context.Context, m *member) ([]accounts.Team, error) {
	teams, err := u.accounts.Teams(ctx, append([]string{m.user}, m.groups...))
	if err != nil {
		return nil, err
	}
	teams = slices.DeleteFunc(teams, func(t accounts.Team) bool { return t.Namespace == m.own })
	slices.SortStableFunc(teams, func(a, b accounts.Team) int {
		switch {
		case a.Unverified == b.Unverified:
			return 0
		case a.Unverified:
			return 1
		}
		return -1
	})
	return teams, nil
}

// may lets h serve only people whom RBAC allows p in the team they act
// in; others get 403 and a page that says their role does not allow it.
func (u *ui) may(p permission, h pageFunc) pageFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		m := memberFrom(r.Context())
		ok, err := u.allowed(r.Context(), m, m.team.Namespace, p)
		if err != nil {
			return err
		}
		if !ok {
			role := m.role
			if role == "" {
				role = "none"
			}
			u.render(w, r, http.StatusForbidden, "message", page{Title: "Not allowed",
				Message: "Your role in this team (" + role + ") does not allow this. Ask one of its admins."})
			return nil
		}
		return h(w, r)
	}
}
