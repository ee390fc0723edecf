package accounts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/lru"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Team is an account's namespace as a team. Owner is its owner's email;
// Name what its admins call it (Owner until they name it). Unverified
// says no one vouched for Owner (a password sign-up): whoever made the
// team may not be its holder.
type Team struct {
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Owner      string `json:"owner,omitempty"`
	Unverified bool   `json:"unverified,omitempty"`
}

// Title is how a line of text names the team: by its name, with its
// owner's email when the name is another (any admin may choose a name),
// and whether no one vouched for that email.
func (t Team) Title() string {
	var also []string
	if t.Owner != "" && t.Name != t.Owner {
		also = append(also, t.Owner)
	}
	if t.Unverified {
		also = append(also, "email not verified")
	}
	if len(also) == 0 {
		return t.Name
	}
	return t.Name + " (" + strings.Join(also, ", ") + ")"
}

// AnnotationTeamName is the team's name, on its owner's binding.
const AnnotationTeamName = "sftpgate.dev/team-name"

// MaxTeamName bounds a team's name, in characters.
const MaxTeamName = 60

// ErrTeamName refuses a team name.
var ErrTeamName = fmt.Errorf("a team's name is 1 to %d letters, digits, single spaces and %s", MaxTeamName, teamNamePunctuation)

// teamNamePunctuation is what a name may hold besides letters, digits
// and spaces: no "@", brackets or parentheses, which could make a name
// pass for an owner's email beside it.
const teamNamePunctuation = "- _ . , & ' / + # : !"

// maxMarks bounds the combining marks on one letter: more stack into
// the lines around.
const maxMarks = 2

// CheckTeamName returns name trimmed and in NFC, or ErrTeamName: letters
// (not those that draw nothing), digits, single spaces and
// teamNamePunctuation; no control or format characters (which could
// turn the line around).
func CheckTeamName(name string) (string, error) {
	name = norm.NFC.String(strings.TrimSpace(name))
	if name == "" || !utf8.ValidString(name) || utf8.RuneCountInString(name) > MaxTeamName {
		return "", ErrTeamName
	}
	marks, prev := 0, rune(0)
	for _, r := range name {
		if unicode.IsMark(r) {
			if marks++; marks > maxMarks || prev == 0 || prev == ' ' {
				return "", ErrTeamName
			}
			continue
		}
		switch {
		case r == ' ' && prev == ' ', blankLetter(r):
			return "", ErrTeamName
		case r == ' ', unicode.IsLetter(r), unicode.IsDigit(r), r != ' ' && strings.ContainsRune(teamNamePunctuation, r):
		default:
			return "", ErrTeamName
		}
		marks, prev = 0, r
	}
	return name, nil
}

// blankLetter says whether r is a letter that draws nothing (Hangul
// fillers).
func blankLetter(r rune) bool { return r == 0x115F || r == 0x1160 || r == 0x3164 || r == 0xFFA0 }

// ErrNoTeam says a namespace is not an account's team, or not one the UI
// may read.
var ErrNoTeam = errors.New("not a team")

// TeamOf is the team of namespace, named by its owner's binding (which
// names the owner as RBAC knows them: verified or not).
func (s *Store) TeamOf(ctx context.Context, namespace string) (Team, error) {
	if validation.IsDNS1123Label(namespace) != nil {
		return Team{}, ErrNoTeam
	}
	var owner rbacv1.RoleBinding
	err := s.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: OwnerBinding}, &owner)
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		return Team{}, ErrNoTeam
	case err != nil:
		return Team{}, err
	case len(owner.Subjects) != 1:
		return Team{}, ErrNoTeam
	}
	t := Team{Namespace: namespace}
	subject := owner.Subjects[0].Name
	if email, ok := strings.CutPrefix(subject, UserName("")); ok {
		t.Owner = email
	} else if email, ok := strings.CutPrefix(subject, unverifiedUser); ok {
		t.Owner, t.Unverified = email, true
	} else {
		return Team{}, ErrNoTeam
	}
	t.Name = t.Owner
	if name, err := CheckTeamName(owner.Annotations[AnnotationTeamName]); err == nil {
		t.Name = name
	}
	return t, nil
}

// RenameTeam names the team of namespace, and says so in the index.
func (s *Store) RenameTeam(ctx context.Context, namespace, name string) (Team, error) {
	name, err := CheckTeamName(name)
	if err != nil {
		return Team{}, err
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var owner rbacv1.RoleBinding
		if err := s.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: OwnerBinding}, &owner); err != nil {
			return err
		}
		metav1.SetMetaDataAnnotation(&owner.ObjectMeta, AnnotationTeamName, name)
		return s.Client.Update(ctx, &owner)
	})
	if err != nil {
		return Team{}, fmt.Errorf("naming the team: %w", err)
	}
	t, err := s.TeamOf(ctx, namespace)
	if err != nil {
		return Team{}, err
	}
	return t, s.reindex(ctx, t)
}

// reindex updates the index entries of team t, which name it.
func (s *Store) reindex(ctx context.Context, t Team) error {
	var entries corev1.ConfigMapList
	if err := s.Client.List(ctx, &entries, client.InNamespace(s.Namespace), client.MatchingLabels{labelIndexTeam: t.Namespace}); err != nil {
		return err
	}
	for i := range entries.Items {
		if err := s.IndexTeam(ctx, entries.Items[i].Data[keyIndexSubject], t); err != nil {
			return fmt.Errorf("renaming the team in its members' lists: %w", err)
		}
	}
	return nil
}

// The team index: for the team switcher, which teams name a person or a
// group (by their RBAC name). A ConfigMap per team and subject in the
// accounts namespace, labelled with both: each team indexes at most as
// many subjects as it may have members (Quota.Members), so that no one
// team fills anyone's index, and a subject's index holds entries of any
// number of teams. It decides nothing: RBAC does, asked at each switch.
const (
	labelIndexSubject = "sftpgate.dev/team-subject"
	labelIndexTeam    = "sftpgate.dev/team"
	keyIndexSubject   = "subject"
	keyIndexTeam      = "team"
)

// ErrTeamIndexFull refuses to index a team for more subjects than it may
// have members.
var ErrTeamIndexFull = errors.New("the team is indexed for as many people and groups as it may have members")

func indexLabel(subject string) string {
	sum := sha256.Sum256([]byte(subject))
	return hex.EncodeToString(sum[:12])
}

func indexEntryName(subject, namespace string) string {
	sum := sha256.Sum256([]byte(subject + "\x00" + namespace))
	return "team-" + hex.EncodeToString(sum[:12])
}

// Teams are the teams indexed for subjects (RBAC user and group names),
// each once.
func (s *Store) Teams(ctx context.Context, subjects []string) ([]Team, error) {
	var all []Team
	for _, subject := range subjects {
		if err := s.moveLegacyIndex(ctx, subject); err != nil {
			return nil, fmt.Errorf("moving the teams of %s from the previous release's index: %w", subject, err)
		}
		var list corev1.ConfigMapList
		if err := s.Client.List(ctx, &list, client.InNamespace(s.Namespace), client.MatchingLabels{labelIndexSubject: indexLabel(subject)}); err != nil {
			return nil, fmt.Errorf("reading the teams of %s: %w", subject, err)
		}
		for _, cm := range list.Items {
			var t Team
			if cm.Data[keyIndexSubject] != subject || json.Unmarshal([]byte(cm.Data[keyIndexTeam]), &t) != nil {
				continue // another subject's, of the same label, or not an entry
			}
			if !slices.ContainsFunc(all, func(x Team) bool { return x.Namespace == t.Namespace }) {
				all = append(all, t)
			}
		}
	}
	return all, nil
}

// legacyIndexType is the previous release's team index: a Secret per
// subject, named after its hash, listing its teams. The first reading of
// a subject's teams in a process moves its entries into the current index
// and deletes it; the web UI may get Secrets here by name, not list them.
const legacyIndexType corev1.SecretType = "sftpgate.dev/teams"

// legacyIndexMax bounds the entries read from one legacy Secret: the
// previous release kept at most as many.
const legacyIndexMax = 100

func legacyIndexName(subject string) string {
	sum := sha256.Sum256([]byte(subject))
	return "teams-" + hex.EncodeToString(sum[:12])
}

// moveLegacyIndex moves subject's entries of the legacy index, if it
// has any, into the current one: each team that is there and has a
// binding naming subject (an entry of a member removed since is left
// out), as the team is now. The Secret is deleted once every entry is
// moved; one that a full index refuses keeps it for a later try.
func (s *Store) moveLegacyIndex(ctx context.Context, subject string) error {
	if _, done := s.checked().Get(subject); done {
		return nil
	}
	var legacy corev1.Secret
	err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: legacyIndexName(subject)}, &legacy)
	if apierrors.IsNotFound(err) || (err == nil && legacy.Type != legacyIndexType) {
		s.checked().Add(subject, nil)
		return nil
	}
	if err != nil {
		return err
	}
	var teams []struct {
		Namespace string `json:"namespace"`
	}
	if json.Unmarshal(legacy.Data["teams"], &teams) != nil {
		teams = nil // unreadable: nothing to move
	}
	full := false
	for _, t := range teams[:min(len(teams), legacyIndexMax)] {
		team, err := s.TeamOf(ctx, t.Namespace)
		if errors.Is(err, ErrNoTeam) {
			continue
		}
		if err != nil {
			return err
		}
		bound, err := s.boundSubjects(ctx, t.Namespace)
		if err != nil {
			return err
		}
		if !bound[subject] {
			continue
		}
		if err := s.IndexTeam(ctx, subject, team); errors.Is(err, ErrTeamIndexFull) {
			full = true
		} else if err != nil {
			return err
		}
	}
	if full {
		return nil
	}
	if err := s.Client.Delete(ctx, &legacy, client.Preconditions{UID: &legacy.UID}); client.IgnoreNotFound(err) != nil {
		return err
	}
	s.checked().Add(subject, nil)
	return nil
}

// boundSubjects are the subjects (RBAC user and group names) the
// RoleBindings of namespace name.
func (s *Store) boundSubjects(ctx context.Context, namespace string) (map[string]bool, error) {
	var bindings rbacv1.RoleBindingList
	if err := s.Client.List(ctx, &bindings, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	bound := map[string]bool{}
	for _, b := range bindings.Items {
		for _, subject := range b.Subjects {
			bound[subject.Name] = true
		}
	}
	return bound, nil
}

// legacyCheckedMax bounds the subjects a process remembers as having
// no legacy index left; one forgotten costs a look more.
const legacyCheckedMax = 10000

// checked are the subjects whose legacy index this process found gone
// or moved: not looked for again.
func (s *Store) checked() *lru.Cache {
	s.legacyOnce.Do(func() { s.legacyChecked = lru.New(legacyCheckedMax) })
	return s.legacyChecked
}

// IndexTeam indexes t for subject, once the binding that makes subject
// its member is made. At the team's bound, the entries of subjects no
// binding of the team names any more (removed some other way) make room.
func (s *Store) IndexTeam(ctx context.Context, subject string, t Team) error {
	data, err := json.Marshal(t)
	if err != nil {
		return err
	}
	entry := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: indexEntryName(subject, t.Namespace),
			Labels: map[string]string{labelIndexSubject: indexLabel(subject), labelIndexTeam: t.Namespace}},
		Data: map[string]string{keyIndexSubject: subject, keyIndexTeam: string(data)},
	}
	var have corev1.ConfigMap
	err = s.Client.Get(ctx, client.ObjectKeyFromObject(entry), &have)
	switch {
	case err == nil:
		if equality.Semantic.DeepEqual(have.Data, entry.Data) {
			return nil
		}
		have.Data = entry.Data
		return s.Client.Update(ctx, &have)
	case !apierrors.IsNotFound(err):
		return err
	}
	if err := s.teamRoom(ctx, t.Namespace); err != nil {
		return err
	}
	if err := s.Client.Create(ctx, entry); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// teamRoom makes sure the team of namespace may index one more subject:
// fewer than Quota.Members entries, after those of subjects no binding
// there names are removed. Two adds at once may each pass it.
func (s *Store) teamRoom(ctx context.Context, namespace string) error {
	var entries corev1.ConfigMapList
	if err := s.Client.List(ctx, &entries, client.InNamespace(s.Namespace), client.MatchingLabels{labelIndexTeam: namespace}); err != nil {
		return err
	}
	if len(entries.Items) < s.Quota.Members {
		return nil
	}
	bound, err := s.boundSubjects(ctx, namespace)
	if err != nil {
		return err
	}
	left := len(entries.Items)
	for i := range entries.Items {
		if e := &entries.Items[i]; !bound[e.Data[keyIndexSubject]] {
			if err := s.Client.Delete(ctx, e); client.IgnoreNotFound(err) != nil {
				return err
			}
			left--
		}
	}
	if left >= s.Quota.Members {
		return ErrTeamIndexFull
	}
	return nil
}

// UnindexTeam takes the team of namespace out of subject's index.
func (s *Store) UnindexTeam(ctx context.Context, subject, namespace string) error {
	entry := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: indexEntryName(subject, namespace)}}
	return client.IgnoreNotFound(s.Client.Delete(ctx, entry))
}
