package tenant

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/webui/accounts"
	"github.com/sftpgate/sftpgate/webui/internal/team"
	"github.com/sftpgate/sftpgate/webui/internal/web"
)

// The Members page: a team's people and the provider's groups, each with
// a role, as RoleBindings of the team roles in the team's namespace
// (those GitOps made listed too). The owner's binding is not removed here.

// LabelMember marks the RoleBindings the Members page made.
const LabelMember = "sftpgate.dev/member"

// memberView is one binding of a team role, as the page shows it.
type memberView struct {
	Binding string
	// Person is an email, Group a provider's group.
	Person, Group string
	Role          string
	Owner         bool
}

type membersPage struct {
	Members []memberView
	Roles   []string
	// Team is the team's name; MaxName bounds it.
	Team    accounts.Team
	MaxName int
}

// ListMembers answers GET /members.
func (u *Pages) ListMembers(w http.ResponseWriter, r *http.Request) error {
	return u.membersPage(w, r, http.StatusOK, web.Problems{})
}

// membersPage draws the members of the team, with problem on the form.
func (u *Pages) membersPage(w http.ResponseWriter, r *http.Request, status int, problem web.Problems) error {
	var list rbacv1.RoleBindingList
	if err := u.Client.List(r.Context(), &list, client.InNamespace(web.AccountFrom(r.Context()).Namespace)); err != nil {
		return err
	}
	var views []memberView
	for _, b := range list.Items {
		role := web.RoleOfClusterRole(b.RoleRef.Name)
		if b.RoleRef.Kind != "ClusterRole" || role == "" {
			continue
		}
		for _, s := range b.Subjects {
			v := memberView{Binding: b.Name, Role: role, Owner: b.Name == accounts.OwnerBinding}
			switch {
			case s.Kind == rbacv1.UserKind && strings.HasPrefix(s.Name, accounts.UserName("")):
				v.Person = strings.TrimPrefix(s.Name, accounts.UserName(""))
			case s.Kind == rbacv1.GroupKind && strings.HasPrefix(s.Name, accounts.GroupName("")):
				v.Group = strings.TrimPrefix(s.Name, accounts.GroupName(""))
			default:
				continue
			}
			views = append(views, v)
		}
	}
	slices.SortFunc(views, func(a, b memberView) int {
		return strings.Compare(a.Person+"\x00"+a.Group, b.Person+"\x00"+b.Group)
	})
	roles := make([]string, len(web.TeamRoles))
	for i, tr := range web.TeamRoles {
		roles[i] = tr.Name
	}
	form := formValues(r, "kind", "name", "role", "team")
	team := web.MemberFrom(r.Context()).Team
	if form["team"] == "" {
		form["team"] = team.Name
	}
	u.Render(w, r, status, "members", web.Page{Title: "Members", Error: problem.Form, Errors: problem.Fields, Form: form,
		Data: membersPage{Members: views, Roles: roles, Team: team, MaxName: accounts.MaxTeamName}})
	return nil
}

// RenameTeam names the team: its members see the name in their menus and
// team lists, beside the owner's email.
func (u *Pages) RenameTeam(w http.ResponseWriter, r *http.Request) error {
	team, err := u.Accounts.RenameTeam(r.Context(), web.AccountFrom(r.Context()).Namespace, r.PostFormValue("team"))
	switch {
	case errors.Is(err, accounts.ErrTeamName):
		return web.OnForm(web.FieldErrors{"team": err.Error()}, u.membersPage)
	case err != nil:
		return err
	}
	web.NoteObject(r, "RoleBinding", accounts.OwnerBinding)
	u.Notify(w, r, "The team is now called "+team.Name+".")
	http.Redirect(w, r, "/members", http.StatusSeeOther)
	return nil
}

func formValues(r *http.Request, names ...string) map[string]string {
	m := map[string]string{}
	for _, n := range names {
		m[n] = r.PostFormValue(n)
	}
	return m
}

// memberBinding names the binding of a subject: one per person or group,
// so that adding one again changes their role.
func memberBinding(subject rbacv1.Subject) string {
	sum := sha256.Sum256([]byte(subject.Kind + "\x00" + subject.Name))
	return "sftpgate-member-" + hex.EncodeToString(sum[:8])
}

// AddMember grants a person (by email) or a provider's group a role in
// the team, replacing the role they had.
func (u *Pages) AddMember(w http.ResponseWriter, r *http.Request) error {
	acct := web.AccountFrom(r.Context())
	role, name := r.PostFormValue("role"), strings.TrimSpace(r.PostFormValue("name"))
	subject := rbacv1.Subject{APIGroup: rbacv1.GroupName}
	mistakes := web.FieldErrors{}
	switch r.PostFormValue("kind") {
	case "person":
		email, err := accounts.NormalizeEmail(name)
		if err != nil {
			mistakes.Add("name", err.Error())
		}
		subject.Kind, subject.Name = rbacv1.UserKind, accounts.UserName(email)
		if team := web.MemberFrom(r.Context()).Team; email != "" && email == team.Owner && !team.Unverified {
			mistakes.Add("name", "the owner is always an admin of their team")
		}
	case "group":
		if name == "" || len(name) > web.MaxGroupName {
			mistakes.Add("name", "enter the group's name as the identity provider sends it (at most 64 characters)")
		}
		subject.Kind, subject.Name = rbacv1.GroupKind, accounts.GroupName(name)
	default:
		mistakes.Add("kind", "choose a person or a group")
	}
	clusterRole := web.ClusterRoleOf(role)
	if clusterRole == "" {
		mistakes.Add("role", "choose a role: viewer, editor or admin")
	}
	if err := mistakes.Err(); err != nil {
		return web.OnForm(err, u.membersPage)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: acct.Namespace, Name: memberBinding(subject), Labels: map[string]string{LabelMember: "true"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
		Subjects:   []rbacv1.Subject{subject},
	}
	web.NoteObject(r, "RoleBinding", binding.Name)
	// A role changes by a new binding: a binding's role cannot change.
	if err := u.Client.Delete(r.Context(), binding); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err := u.Client.Create(r.Context(), binding); err != nil {
		if apierrors.IsForbidden(err) {
			return &web.FormError{Problem: web.Problems{Form: "the team has as many members as it may have"}, Status: http.StatusForbidden, Form: u.membersPage}
		}
		return err
	}
	// The index only once the binding is made. It decides nothing: a
	// member it leaves out still has their role, and switches to the team
	// by its namespace.
	team, err := u.Accounts.TeamOf(r.Context(), acct.Namespace)
	if err == nil {
		err = u.Accounts.IndexTeam(r.Context(), subject.Name, team)
	}
	if err != nil {
		u.Log.Warn("indexing a member's team", "namespace", acct.Namespace, "error", err)
	}
	http.Redirect(w, r, "/members", http.StatusSeeOther)
	return nil
}

// memberOf is the member's role binding the path names: a member's, not
// the owner's.
func (u *Pages) memberOf(r *http.Request) (*rbacv1.RoleBinding, error) {
	var b rbacv1.RoleBinding
	err := u.teamObject(r, &b)
	switch {
	case err != nil:
		return nil, err
	case b.Name == accounts.OwnerBinding || web.RoleOfClusterRole(b.RoleRef.Name) == "":
		return nil, &web.PersonError{Msg: "this is not a member's role, or it is the owner's, which stays"}
	}
	return &b, nil
}

// memberName says who a binding names: a person's email, or a group.
func memberName(b *rbacv1.RoleBinding) string {
	names := make([]string, 0, len(b.Subjects))
	for _, s := range b.Subjects {
		if s.Kind == rbacv1.GroupKind {
			names = append(names, "the group "+strings.TrimPrefix(s.Name, accounts.GroupName("")))
		} else {
			names = append(names, strings.TrimPrefix(s.Name, accounts.UserName("")))
		}
	}
	return strings.Join(names, ", ")
}

// ConfirmRemoveMember answers GET /members/{name}/remove.
func (u *Pages) ConfirmRemoveMember(w http.ResponseWriter, r *http.Request) error {
	b, err := u.memberOf(r)
	if err != nil {
		return err
	}
	return u.Confirm(w, r, web.Confirmation{Question: "Remove " + memberName(b) + " from the team?",
		Consequence: "Their next request in this team is refused: they no longer see its connections, files or transfers. You can add them again.",
		Action:      r.URL.Path, Button: "Remove", Back: "/members"})
}

// RemoveMember takes a person's or group's role in the team away: their
// next request there is refused.
func (u *Pages) RemoveMember(w http.ResponseWriter, r *http.Request) error {
	acct := web.AccountFrom(r.Context())
	b, err := u.memberOf(r)
	if err != nil {
		return err
	}
	if err := u.Client.Delete(r.Context(), b); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	for _, s := range b.Subjects {
		if err := u.Accounts.UnindexTeam(r.Context(), s.Name, acct.Namespace); err != nil {
			u.Log.Warn("removing a team from a member's index", "namespace", acct.Namespace, "error", err)
		}
	}
	u.Notify(w, r, memberName(b)+" is no longer a member of the team.")
	http.Redirect(w, r, "/members", http.StatusSeeOther)
	return nil
}

// teamsPage lists the teams a person may switch to, their own (Own)
// first; Current is the one they act in.
type teamsPage struct {
	Teams        []accounts.Team
	Current, Own string
}

// ListTeams shows the person's own team and those they were made a member
// of (as a person or through a group), those of verified owners first.
func (u *Pages) ListTeams(w http.ResponseWriter, r *http.Request) error {
	m := web.MemberFrom(r.Context())
	teams, err := u.OtherTeams(r.Context(), m)
	if err != nil {
		return err
	}
	if m.Own != "" {
		own := accounts.Team{Namespace: m.Own, Name: "Your own team"}
		if m.Team.Namespace == m.Own {
			own = m.Team
		} else if t, err := u.Accounts.TeamOf(r.Context(), m.Own); err == nil {
			own = t
		}
		teams = append([]accounts.Team{own}, teams...)
	}
	u.Render(w, r, http.StatusOK, "teams", web.Page{Title: "Teams", Data: teamsPage{Teams: teams, Current: m.Team.Namespace, Own: m.Own}})
	return nil
}

// MakeOwnTeam makes the team of a person who had none of their own, and
// takes them there.
func (u *Pages) MakeOwnTeam(w http.ResponseWriter, r *http.Request) error {
	acct := web.MemberFrom(r.Context()).Account
	if !acct.NoOwnTeam { // it has one: back to it
		u.Cookies.Clear(w, r, web.TeamCookie)
		http.Redirect(w, r, "/connections", http.StatusSeeOther)
		return nil
	}
	made, err := u.Accounts.MakeOwnTeam(r.Context(), acct)
	if err != nil {
		if errors.Is(err, accounts.ErrFull) {
			u.Full(w, r, err)
			return nil
		}
		return err
	}
	// Recorded in the new team's trail, not the one the person acted in.
	web.NoteAccount(r, made)
	u.MakeFilesKey(r.Context(), made.Namespace)
	u.Cookies.Clear(w, r, web.TeamCookie)
	u.Notify(w, r, "Your own team is made: you are its admin.")
	http.Redirect(w, r, "/connections", http.StatusSeeOther)
	return nil
}

// SwitchTeam makes the browser act in the team of the namespace posted,
// where RBAC must grant the person a role: the index of teams lists
// them, but never decides, so no entry (missing, or crowded out) keeps a
// member from their team. Not an account's team, or not the person's, is
// not found, either way.
func (u *Pages) SwitchTeam(w http.ResponseWriter, r *http.Request) error {
	m := web.MemberFrom(r.Context())
	namespace := r.PostFormValue("namespace")
	web.NoteObject(r, "Namespace", namespace)
	if namespace == m.Own {
		u.Cookies.Clear(w, r, web.TeamCookie)
		http.Redirect(w, r, "/connections", http.StatusSeeOther)
		return nil
	}
	_, err := u.Accounts.TeamOf(r.Context(), namespace)
	switch {
	case errors.Is(err, accounts.ErrNoTeam):
		return web.ErrNotFound
	case err != nil:
		return err
	}
	role, err := u.RoleIn(r.Context(), m, namespace)
	switch {
	case err != nil:
		return err
	case role == "":
		return web.ErrNotFound
	}
	if err := u.Cookies.Set(w, r, web.TeamCookie, team.Chosen{Account: m.Account.ID, Namespace: namespace}); err != nil {
		return err
	}
	http.Redirect(w, r, "/connections", http.StatusSeeOther)
	return nil
}
