package team

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/webui/accounts"
	"github.com/sftpgate/sftpgate/webui/internal/web"
)

// Teams. An account's namespace is its team: its owner and the members
// granted a team role there by a RoleBinding (the Members page makes
// them; GitOps may too). Before every action the UI asks the API server
// whether the person may (a SubjectAccessReview of their user and
// groups, never cached: a member removed is refused at their next
// request), then acts with its own service account, whose rights cover
// any member's. So RBAC, not the UI, decides what each role may do
// (config/rbac/webui/team_roles.yaml).

// Permission is what an action needs: a verb on a resource of
// sftpgate.dev in the team's namespace.
type Permission struct{ Verb, resource string }

// FilePermissions are what the file browser's actions on a kind's files
// need: browse and download, upload, rename, delete.
type FilePermissions struct{ Read, Write, Rename, Delete Permission }

// SeeOf is the permission to list resource's objects ("ftpconnections").
func SeeOf(resource string) Permission { return Permission{"list", resource} }

// FilesOf are the permissions on the files of resource's objects
// ("sftpconnections"): verbs on its files subresource, which only the
// web UI asks about.
func FilesOf(resource string) FilePermissions {
	files := resource + "/files"
	return FilePermissions{Read: Permission{"get", files}, Write: Permission{"create", files},
		Rename: Permission{"update", files}, Delete: Permission{"delete", files}}
}

// What pages need, by the rules of config/rbac/webui/team_roles.yaml.
var (
	SeeConnections     = SeeOf("sftpconnections")
	CreateConnections  = Permission{"create", "sftpconnections"}
	UpdateConnections  = Permission{"update", "sftpconnections"}
	DeleteConnections  = Permission{"delete", "sftpconnections"}
	ReadFiles          = FilesOf("sftpconnections").Read
	CreateWatches      = Permission{"create", "sftpwatches"}
	DeleteWatches      = Permission{"delete", "sftpwatches"}
	SeeTransfers       = Permission{"list", "transfers"}
	CreateTransfers    = Permission{"create", "transfers"}
	DeleteTransfers    = Permission{"delete", "transfers"}
	SeeExpectations    = SeeOf("fileexpectations")
	CreateExpectations = Permission{"create", "fileexpectations"}
	DeleteExpectations = Permission{"delete", "fileexpectations"}
	ManageKeys         = Permission{"list", "apikeys"}
	CreateKeys         = Permission{"create", "apikeys"}
	DeleteKeys         = Permission{"delete", "apikeys"}
	ManageOpenPGPKeys  = Permission{"list", "openpgpkeys"}
	CreateOpenPGPKeys  = Permission{"create", "openpgpkeys"}
	DeleteOpenPGPKeys  = Permission{"delete", "openpgpkeys"}
	SeeMembers         = Permission{"list", "members"}
	AddMembers         = Permission{"create", "members"}
	RemoveMembers      = Permission{"delete", "members"}
	NameTeam           = Permission{"update", "members"}
	SeeActivity        = Permission{"get", "activity"}
	SeeShares          = Permission{"list", "sharelinks"}
	CreateShares       = Permission{"create", "sharelinks"}
	DeleteShares       = Permission{"delete", "sharelinks"}
	// roleMarkers tell admin, editor and viewer apart.
	roleMarkers = []Permission{AddMembers, FilesOf("sftpconnections").Write, SeeConnections}
)

// NewMember is the person of acct and their session's groups.
func NewMember(acct *accounts.Account, s web.Session) *web.Member {
	m := &web.Member{User: acct.RBACUser(), Account: acct}
	if !acct.NoOwnTeam {
		m.Own = acct.Namespace
	}
	for _, g := range s.Groups {
		m.Groups = append(m.Groups, accounts.GroupName(g))
	}
	return m
}

// allowed asks the API server whether m may do p in namespace.
func (u *Teams) allowed(ctx context.Context, m *web.Member, namespace string, p Permission) (bool, error) {
	resource, sub, _ := strings.Cut(p.resource, "/")
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: m.User, Groups: m.Groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: p.Verb,
			Group: v1alpha1.GroupVersion.Group, Resource: resource, Subresource: sub}}}
	if err := u.Client.Create(ctx, sar); err != nil {
		return false, fmt.Errorf("asking RBAC what a member may do: %w", err)
	}
	return sar.Status.Allowed && !sar.Status.Denied, nil
}

// RoleIn is the highest team role whose rights m has in namespace.
func (u *Teams) RoleIn(ctx context.Context, m *web.Member, namespace string) (string, error) {
	for i, p := range roleMarkers {
		ok, err := u.allowed(ctx, m, namespace, p)
		if err != nil {
			return "", err
		}
		if ok {
			return web.TeamRoles[len(web.TeamRoles)-1-i].Name, nil
		}
	}
	return "", nil
}

// Chosen is what the browser keeps of the team its person chose: the
// account's and the team's namespace only. What the pages say of the
// team is read again at each request (TeamOf), never from the cookie.
type Chosen struct{ Account, Namespace string }

// JoinTeam is m in the team the browser chose (its own account's when
// none, or when it is a member there no more), with their role there. A
// person without a team of their own who chose none acts in no team:
// they choose on the Teams page (no one else chooses for them). An owner
// whose namespace lacks its owner binding (an account made before teams)
// gets it.
func (u *Teams) JoinTeam(w http.ResponseWriter, r *http.Request, acct *accounts.Account, m *web.Member) error {
	ctx := r.Context()
	var chosen Chosen
	if u.Cookies.Get(r, web.TeamCookie, &chosen) && chosen.Account == acct.ID && chosen.Namespace != m.Own {
		team, err := u.Accounts.TeamOf(ctx, chosen.Namespace)
		role := ""
		if err == nil {
			role, err = u.RoleIn(ctx, m, chosen.Namespace)
		}
		switch {
		case err != nil && !errors.Is(err, accounts.ErrNoTeam):
			return err
		case role != "":
			m.Team, m.Role = team, role
			// Kept for as long as the session is used, not 12 hours from
			// the choice.
			return u.Cookies.Set(w, r, web.TeamCookie, chosen)
		}
		u.Cookies.Clear(w, r, web.TeamCookie)
	}
	if m.Own == "" {
		return nil
	}
	m.Team = accounts.Team{Namespace: acct.Namespace, Name: acct.Email, Owner: acct.Email, Unverified: !acct.Verified}
	if team, err := u.Accounts.TeamOf(ctx, acct.Namespace); err == nil {
		m.Team = team
	}
	role, err := u.RoleIn(ctx, m, acct.Namespace)
	if err == nil && role == "" {
		if err = u.Accounts.EnsureOwner(ctx, acct); err == nil {
			role, err = u.RoleIn(ctx, m, acct.Namespace)
		}
	}
	m.Role = role
	return err
}

// OtherTeams are the teams the index lists for m, other than their own,
// those of verified owners first.
func (u *Teams) OtherTeams(ctx context.Context, m *web.Member) ([]accounts.Team, error) {
	teams, err := u.Accounts.Teams(ctx, append([]string{m.User}, m.Groups...))
	if err != nil {
		return nil, err
	}
	teams = slices.DeleteFunc(teams, func(t accounts.Team) bool { return t.Namespace == m.Own })
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

// May lets h serve only people whom RBAC allows p in the team they act
// in; others get 403 and a page that says their role does not allow it.
func (u *Teams) May(p Permission, h web.PageFunc) web.PageFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		m := web.MemberFrom(r.Context())
		ok, err := u.allowed(r.Context(), m, m.Team.Namespace, p)
		if err != nil {
			return err
		}
		if !ok {
			role := m.Role
			if role == "" {
				role = "none"
			}
			u.Render(w, r, http.StatusForbidden, "message", web.Page{Title: "Not allowed",
				Message: "Your role in this team (" + role + ") does not allow this. Ask one of its admins."})
			return nil
		}
		return h(w, r)
	}
}
