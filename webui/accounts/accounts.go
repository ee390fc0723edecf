// Package accounts keeps the web UI's accounts in Kubernetes: a Secret per
// account in the UI's namespace, holding the email and a bcrypt hash of
// the password, and a namespace per account, where its Secrets,
// SftpConnections and ApiKeys live. There is no other database.
package accounts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/lru"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// Labels and Secret keys of accounts.
const (
	// LabelAccount marks an account's Secret, and names the account on the
	// namespace it owns (where the gateway and worker read it: a stranger's).
	LabelAccount = v1alpha1.LabelAccount
	// SecretType is the type of account Secrets.
	SecretType corev1.SecretType = "sftpgate.dev/account" //nolint:gosec // a type name, not a credential

	keyEmail     = "email"
	keyHash      = "passwordHash"
	keyNamespace = "namespace"
	// keySession changes at every log-out: sessions carry it, so logging
	// out ends every session of the account, and a session never outlives
	// the account it was made for.
	keySession = "session"
	// keyVerified says the account's email is its holder's: an identity
	// provider or the operator vouched for it. Only such accounts are the
	// people teams name by email.
	keyVerified = "emailVerified"
	// keyNoOwnTeam says the account's namespace is named but not made: its
	// person was a team's member before their first sign-in, and gets a
	// team of their own when they ask for one (MakeOwnTeam).
	keyNoOwnTeam = "noOwnTeam"
)

// Password length bounds: bcrypt reads at most 72 bytes.
const (
	MinPassword = 10
	MaxPassword = 72
)

// Errors a person can act on.
var (
	ErrInvalidEmail  = errors.New("enter an email address like name@example.com")
	ErrShortPassword = fmt.Errorf("the password must be at least %d characters", MinPassword)
	ErrLongPassword  = fmt.Errorf("the password must be at most %d bytes", MaxPassword)
	ErrEmailTaken    = errors.New("an account with this email already exists; log in instead")
	// ErrWrongCredentials is the one answer to a wrong email or password,
	// so that a log-in does not tell which accounts exist.
	ErrWrongCredentials = errors.New("wrong email or password")
	// ErrBusy is a password check that found every slot taken (Store.Hashes).
	ErrBusy = errors.New("the server is busy checking passwords; try again in a moment")
	// ErrFull refuses a new account: the accounts there are could run as
	// much as the cluster lets web UI accounts run together (Totals).
	ErrFull = errors.New("no room for another account: the accounts there are could run all the cluster lets web UI accounts run")
	// ErrUnverified refuses a provider's sign-in to an account someone
	// made with a password, which may not be the email's owner's.
	ErrUnverified = errors.New("an account with this email was made with a password, and its email was never verified: log in with its password, or ask the operator")
)

// QuotaName is the ResourceQuota in each account's namespace.
const QuotaName = "sftpgate-account"

// Quota caps what one account's namespace may hold, enforced by the API
// server whatever creates the objects (the UI, or kubectl by whoever the
// operator lets in).
type Quota struct {
	Connections, Keys, Secrets, Watches, Transfers, Members, Shares, Expectations int
}

func (q Quota) hard() corev1.ResourceList {
	return corev1.ResourceList{
		"count/sftpconnections.sftpgate.dev": *resource.NewQuantity(int64(q.Connections), resource.DecimalSI),
		// One more for the file browser's own key (webui/internal/gw/fileskey.go), and
		// one for each share link's (webui/internal/share).
		"count/apikeys.sftpgate.dev":          *resource.NewQuantity(int64(q.Keys)+1+int64(q.Shares), resource.DecimalSI),
		"count/sharelinks.sftpgate.dev":       *resource.NewQuantity(int64(q.Shares), resource.DecimalSI),
		"count/secrets":                       *resource.NewQuantity(int64(q.Secrets), resource.DecimalSI),
		"count/sftpwatches.sftpgate.dev":      *resource.NewQuantity(int64(q.Watches), resource.DecimalSI),
		"count/transfers.sftpgate.dev":        *resource.NewQuantity(int64(q.Transfers), resource.DecimalSI),
		"count/fileexpectations.sftpgate.dev": *resource.NewQuantity(int64(q.Expectations), resource.DecimalSI),
		// Two more for the UI's own binding and the owner's.
		"count/rolebindings.rbac.authorization.k8s.io": *resource.NewQuantity(int64(q.Members)+2, resource.DecimalSI),
	}
}

// Account is a person's account.
type Account struct {
	// ID names the account's Secret; it is derived from the email.
	ID        string
	Email     string
	Namespace string
	// Session is what the account's sessions must carry.
	Session string
	// Verified: an identity provider or the operator vouched for the email.
	Verified bool
	// NoOwnTeam: Namespace is not made yet (keyNoOwnTeam).
	NoOwnTeam bool
}

// RBACUser is who the account's person is to RBAC: by email when it is
// verified (teams name people by email), apart otherwise, so that whoever
// signs up first with someone's email never gets what a team gave them.
func (a *Account) RBACUser() string {
	if a.Verified {
		return UserName(a.Email)
	}
	return unverifiedUser + a.Email
}

// unverifiedUser is the start of the RBAC user of an account whose email
// no one vouched for.
const unverifiedUser = "sftpgate:unverified:"

// Store keeps accounts as Secrets in Namespace.
type Store struct {
	Client    client.Client
	Namespace string
	// TenantRole is the ClusterRole, and Subject who it is granted to (the
	// UI's service account), in each account's namespace; OwnerRole is
	// the one its owner has there.
	TenantRole string
	Subject    rbacv1.Subject
	OwnerRole  string
	// Cost is bcrypt's cost; bcrypt.DefaultCost when zero.
	Cost int
	// Quota is what each account's namespace may hold, and Totals what all
	// accounts together may run: no account is made past them (full.go).
	Quota  Quota
	Totals Totals
	// Hashes bounds the password hashes computed at once (bcrypt is made
	// to be slow): its capacity is the bound, and a check that finds every
	// slot taken for HashWait gets ErrBusy rather than queueing without
	// end. Nil is no bound.
	Hashes   chan struct{}
	HashWait time.Duration

	dummyOnce sync.Once
	dummy     []byte
	// legacyChecked are the subjects whose legacy team index is gone
	// (checked).
	legacyOnce    sync.Once
	legacyChecked *lru.Cache
	// making is held from counting the accounts to making the new one's
	// namespace, which counts it: two sign-ups cannot both take the last
	// place.
	making sync.Mutex
}

// NormalizeEmail checks an email address and returns it lower-cased.
func NormalizeEmail(email string) (string, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	addr, err := mail.ParseAddress(email)
	if err != nil || addr.Address != email || len(email) > 254 || !strings.Contains(email[strings.IndexByte(email, '@'):], ".") {
		return "", ErrInvalidEmail
	}
	return email, nil
}

// CheckEmail says whether email is one an account may have
// (ErrInvalidEmail if not).
func CheckEmail(email string) error {
	_, err := NormalizeEmail(email)
	return err
}

// CheckPassword says whether password is one an account may have
// (ErrShortPassword, ErrLongPassword if not).
func CheckPassword(password string) error {
	switch {
	case utf8.RuneCountInString(password) < MinPassword:
		return ErrShortPassword
	case len(password) > MaxPassword:
		return ErrLongPassword
	}
	return nil
}

// id is the name of the account Secret for an email: a lookup is a Get.
func id(email string) string {
	sum := sha256.Sum256([]byte(email))
	return "account-" + hex.EncodeToString(sum[:12])
}

// SignUp creates an account and its namespace. Once started it finishes
// (or undoes itself) even if the person goes away, so that no account is
// left without its namespace.
func (s *Store) SignUp(ctx context.Context, email, password string) (*Account, error) {
	return s.SignUpWithNamespace(ctx, email, password, NewNamespaceName(), false)
}

// SignUpWithNamespace is SignUp with the account's namespace named, for the
// demo account of sftpgate-dev (the namespace must not exist yet), and
// verified when the operator vouches for the email.
func (s *Store) SignUpWithNamespace(ctx context.Context, email, password, namespace string, verified bool) (*Account, error) {
	ctx = context.WithoutCancel(ctx)
	email, err := NormalizeEmail(email)
	if err != nil {
		return nil, err
	}
	if err := CheckPassword(password); err != nil {
		return nil, err
	}
	// No password is hashed for an account that could not be made.
	if err := s.room(ctx); err != nil {
		return nil, err
	}
	var hash []byte
	err = s.hashing(func() (err error) {
		hash, err = bcrypt.GenerateFromPassword([]byte(password), s.cost())
		return err
	})
	if err != nil {
		return nil, err
	}
	return s.create(ctx, email, hash, namespace, verified, true)
}

// SignIn returns the account of email, a person an identity provider
// vouched for, in groups (the provider's), making it on their first
// sign-in. An account made so has no password: only the provider signs it
// in. Its namespace is made with it, unless a team of a verified owner
// already lists the person or one of their groups: they came to work
// there, and get a team of their own when they ask (MakeOwnTeam).
func (s *Store) SignIn(ctx context.Context, email string, groups []string) (*Account, error) {
	ctx = context.WithoutCancel(ctx)
	email, err := NormalizeEmail(email)
	if err != nil {
		return nil, err
	}
	for range 2 {
		secret, err := s.secret(ctx, id(email))
		if !apierrors.IsNotFound(err) {
			if err != nil {
				return nil, err
			}
			if acct := fromSecret(secret); acct.Verified {
				return acct, nil
			}
			return nil, ErrUnverified
		}
		invited, err := s.invited(ctx, email, groups)
		if err != nil {
			return nil, err
		}
		acct, err := s.create(ctx, email, nil, NewNamespaceName(), true, !invited)
		if !errors.Is(err, ErrEmailTaken) {
			return acct, err
		}
		// Two first sign-ins at once: the other made it.
	}
	return nil, ErrEmailTaken
}

// NewNamespaceName is a new account namespace's name.
func NewNamespaceName() string { return strings.ToLower("sftpgate-" + rand.Text()[:12]) }

// create makes the account of email, with a password hash (none: only an
// identity provider signs it in), and its namespace unless not ownTeam.
func (s *Store) create(ctx context.Context, email string, hash []byte, namespace string, verified, ownTeam bool) (*Account, error) {
	acct := &Account{ID: id(email), Email: email, Namespace: namespace, Session: rand.Text(), Verified: verified, NoOwnTeam: !ownTeam}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: acct.ID, Labels: map[string]string{LabelAccount: "true"}},
		Type:       SecretType,
		Data:       map[string][]byte{keyEmail: []byte(email), keyNamespace: []byte(acct.Namespace), keySession: []byte(acct.Session)},
	}
	if hash != nil {
		secret.Data[keyHash] = hash
	}
	if verified {
		secret.Data[keyVerified] = []byte("true")
	}
	if !ownTeam {
		secret.Data[keyNoOwnTeam] = []byte("true")
		if err := s.Client.Create(ctx, secret); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return nil, ErrEmailTaken
			}
			return nil, fmt.Errorf("creating the account: %w", err)
		}
		return acct, nil
	}
	if err := s.claim(ctx, secret, acct); err != nil {
		return nil, err
	}
	if err := s.setUpNamespace(ctx, acct); err != nil {
		// Without its namespace the account is of no use: undo it, so the
		// person can sign up again. (An empty namespace may stay behind:
		// the UI may not delete namespaces.)
		_ = s.Client.Delete(ctx, secret)
		return nil, err
	}
	return acct, nil
}

// claim makes the account's Secret, then its namespace, if the accounts
// have room for one more (room): the Secret's Create is what makes an
// email taken, once; the namespace is what counts the account.
func (s *Store) claim(ctx context.Context, secret *corev1.Secret, acct *Account) error {
	s.making.Lock()
	defer s.making.Unlock()
	if err := s.room(ctx); err != nil {
		return err
	}
	if err := s.Client.Create(ctx, secret); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return ErrEmailTaken
		}
		return fmt.Errorf("creating the account: %w", err)
	}
	if err := s.makeNamespace(ctx, acct); err != nil {
		_ = s.Client.Delete(ctx, secret)
		return err
	}
	return nil
}

func (s *Store) makeNamespace(ctx context.Context, acct *Account) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: acct.Namespace, Labels: map[string]string{LabelAccount: acct.ID}}}
	if err := s.Client.Create(ctx, ns); err != nil {
		return fmt.Errorf("creating the account's namespace: %w", err)
	}
	return nil
}

// invited says whether a team of a verified owner lists the person of
// email, or one of their groups, as a member. A team of an unverified
// owner does not count: no one may make a person's first sign-in land
// them, without a team of their own, in a team named as they please.
func (s *Store) invited(ctx context.Context, email string, groups []string) (bool, error) {
	subjects := []string{UserName(email)}
	for _, g := range groups {
		subjects = append(subjects, GroupName(g))
	}
	teams, err := s.Teams(ctx, subjects)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(teams, func(t Team) bool { return !t.Unverified }), nil
}

// MakeOwnTeam makes the namespace of an account that has none yet, as
// sign-up would have. Two calls at once make one.
func (s *Store) MakeOwnTeam(ctx context.Context, acct *Account) (*Account, error) {
	if !acct.NoOwnTeam {
		return acct, nil
	}
	ctx = context.WithoutCancel(ctx)
	// A try cut off after the namespace was made finishes: its namespace
	// is counted already. (The UI may list namespaces, not get them.)
	var mine metav1.PartialObjectMetadataList
	mine.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	err := s.Client.List(ctx, &mine, client.MatchingLabels{LabelAccount: acct.ID})
	if err == nil && !slices.ContainsFunc(mine.Items, func(ns metav1.PartialObjectMetadata) bool { return ns.Name == acct.Namespace }) {
		s.making.Lock()
		if err = s.room(ctx); err == nil {
			if err = s.makeNamespace(ctx, acct); apierrors.IsAlreadyExists(err) {
				err = nil // two at once: the other made it
			}
		}
		s.making.Unlock()
	}
	if err != nil {
		return nil, err
	}
	made := *acct
	made.NoOwnTeam = false
	if err := s.setUpNamespace(ctx, &made); err != nil {
		return nil, err
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		secret, err := s.secret(ctx, acct.ID)
		if err != nil {
			return err
		}
		delete(secret.Data, keyNoOwnTeam)
		return s.Client.Update(ctx, secret)
	})
	if err != nil {
		return nil, fmt.Errorf("recording the account's team: %w", err)
	}
	return &made, nil
}

// setUpNamespace grants the UI its tenant role in the account's new
// namespace, and there only.
func (s *Store) setUpNamespace(ctx context.Context, acct *Account) error {
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: acct.Namespace, Name: "sftpgate-webui"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: s.TenantRole},
		Subjects:   []rbacv1.Subject{s.Subject},
	}
	if err := s.Client.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("granting the web UI its role in the account's namespace: %w", err)
	}
	if err := s.EnsureOwner(ctx, acct); err != nil {
		return err
	}
	return s.ensureQuota(ctx, acct, true)
}

// OwnerBinding names the RoleBinding that makes an account's owner the
// admin of its namespace.
const OwnerBinding = "sftpgate-owner"

// UserName is the user a person is to RBAC, in the RoleBindings that make
// them a team's member and the reviews of what they may do.
func UserName(email string) string { return "sftpgate:account:" + email }

// GroupName is the group a provider's group is to RBAC.
func GroupName(group string) string { return "sftpgate:group:" + group }

// EnsureOwner makes the account's owner the admin of its namespace (on
// sign-up, and for accounts made before teams): the UI asks RBAC about
// owners as about any member.
func (s *Store) EnsureOwner(ctx context.Context, acct *Account) error {
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: acct.RBACUser()}}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: acct.Namespace, Name: OwnerBinding},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: s.OwnerRole},
		Subjects:   subjects,
	}
	// The UI's rights there come from the binding just made, which the
	// API server's authorizer may take a moment to see.
	return wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Steps: 7},
		func(ctx context.Context) (bool, error) {
			err := s.Client.Create(ctx, binding)
			if apierrors.IsAlreadyExists(err) {
				// Made for the owner as they were (their email since
				// verified): name them as they are.
				var have rbacv1.RoleBinding
				if err = s.Client.Get(ctx, client.ObjectKeyFromObject(binding), &have); err == nil && !equality.Semantic.DeepEqual(have.Subjects, subjects) {
					have.Subjects = subjects
					err = s.Client.Update(ctx, &have)
				}
			}
			switch {
			case err == nil:
				return true, nil
			case apierrors.IsForbidden(err), apierrors.IsConflict(err):
				return false, nil
			}
			return false, fmt.Errorf("making the account's owner its admin: %w", err)
		})
}

// initQuotaStatus gives a quota its status: the API server enforces a
// quota only once its status says what is used, which the cluster's quota
// controller computes a while later. In a namespace just made, nothing is
// used: saying so at once closes that window.
func (s *Store) initQuotaStatus(ctx context.Context, quota *corev1.ResourceQuota) error {
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{}}
	for name := range quota.Spec.Hard {
		quota.Status.Used[name] = *resource.NewQuantity(0, resource.DecimalSI)
	}
	return s.Client.Status().Update(ctx, quota)
}

// EnsureQuota gives the account's namespace the ResourceQuota of Quota, or
// brings it to Quota: at each log-in (accounts made before, or a Quota the
// operator changed).
func (s *Store) EnsureQuota(ctx context.Context, acct *Account) error {
	return s.ensureQuota(ctx, acct, false)
}

// ensureQuota is EnsureQuota; empty says the namespace was just made, so
// that the quota's status can say at once that nothing is used. The UI's
// rights there come from the RoleBinding just made, which the API
// server's authorizer may take a moment to see.
func (s *Store) ensureQuota(ctx context.Context, acct *Account, empty bool) error {
	want := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: acct.Namespace, Name: QuotaName},
		Spec: corev1.ResourceQuotaSpec{Hard: s.Quota.hard()}}
	return wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Steps: 7},
		func(ctx context.Context) (bool, error) {
			var have corev1.ResourceQuota
			err := s.Client.Get(ctx, client.ObjectKeyFromObject(want), &have)
			switch {
			case apierrors.IsNotFound(err):
				err = s.Client.Create(ctx, want)
				if err == nil && empty {
					err = s.initQuotaStatus(ctx, want)
				}
			case err == nil && empty && len(have.Status.Hard) == 0:
				err = s.initQuotaStatus(ctx, &have)
			case err == nil && !equality.Semantic.DeepEqual(have.Spec.Hard, want.Spec.Hard):
				have.Spec.Hard = want.Spec.Hard
				err = s.Client.Update(ctx, &have)
			}
			if apierrors.IsForbidden(err) || apierrors.IsConflict(err) {
				// Not yet bound, or the quota controller wrote the status
				// meanwhile: try again, with what is there now.
				return false, nil
			}
			return err == nil, err
		})
}

// dummyHash is compared against when no account has the email, so that a
// log-in takes as long either way: it has the cost of real hashes.
func (s *Store) dummyHash() []byte {
	s.dummyOnce.Do(func() {
		s.dummy, _ = bcrypt.GenerateFromPassword([]byte(rand.Text()), s.cost())
	})
	return s.dummy
}

// LogIn returns the account whose email and password these are. With
// ErrWrongCredentials, it returns the email's account if there is one: its
// audit trail records the failure.
func (s *Store) LogIn(ctx context.Context, email, password string) (*Account, error) {
	hash := s.dummyHash()
	var secret *corev1.Secret
	email, err := NormalizeEmail(email)
	if err == nil {
		secret, err = s.secret(ctx, id(email))
		switch {
		case err == nil:
			if len(secret.Data[keyHash]) > 0 {
				hash = secret.Data[keyHash]
			}
		case !apierrors.IsNotFound(err):
			return nil, err
		}
	}
	// Compared against a dummy hash too when there is no account: a log-in
	// takes as long either way.
	var wrong bool
	if err := s.hashing(func() error {
		wrong = bcrypt.CompareHashAndPassword(hash, []byte(password)) != nil
		return nil
	}); err != nil {
		return nil, err
	}
	switch {
	case secret == nil:
		return nil, ErrWrongCredentials
	case wrong || len(secret.Data[keyHash]) == 0:
		// The account, for its audit trail (a failed log-in is its
		// owner's to see), never to log in with.
		return fromSecret(secret), ErrWrongCredentials
	}
	return fromSecret(secret), nil
}

// CheckHash says whether password is the one of bcrypt hash, checked in
// one of the Hashes slots (ErrBusy when none frees up): a share link's
// password, say.
func (s *Store) CheckHash(hash []byte, password string) (bool, error) {
	var match bool
	err := s.hashing(func() error {
		match = bcrypt.CompareHashAndPassword(hash, []byte(password)) == nil
		return nil
	})
	return match, err
}

// hashing runs fn, which computes a password hash, in one of the Hashes
// slots.
func (s *Store) hashing(fn func() error) error {
	if s.Hashes == nil {
		return fn()
	}
	wait := time.NewTimer(s.HashWait)
	defer wait.Stop()
	select {
	case s.Hashes <- struct{}{}:
	case <-wait.C:
		return ErrBusy
	}
	defer func() { <-s.Hashes }()
	return fn()
}

// Get returns the account with id, as a session names it.
func (s *Store) Get(ctx context.Context, id string) (*Account, error) {
	secret, err := s.secret(ctx, id)
	if err != nil {
		return nil, err
	}
	return fromSecret(secret), nil
}

func (s *Store) secret(ctx context.Context, name string) (*corev1.Secret, error) {
	var secret corev1.Secret
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, &secret); err != nil {
		return nil, err
	}
	if secret.Type != SecretType {
		return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
	}
	return &secret, nil
}

func fromSecret(secret *corev1.Secret) *Account {
	return &Account{ID: secret.Name, Email: string(secret.Data[keyEmail]), Namespace: string(secret.Data[keyNamespace]),
		Session: string(secret.Data[keySession]), Verified: string(secret.Data[keyVerified]) == "true",
		NoOwnTeam: string(secret.Data[keyNoOwnTeam]) == "true"}
}

// EndSessions ends every session of the account (log-out).
func (s *Store) EndSessions(ctx context.Context, id string) error {
	secret, err := s.secret(ctx, id)
	if err != nil {
		return err
	}
	secret.Data[keySession] = []byte(rand.Text())
	return s.Client.Update(ctx, secret)
}

func (s *Store) cost() int {
	if s.Cost == 0 {
		return bcrypt.DefaultCost
	}
	return s.Cost
}
