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
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Labels and Secret keys of accounts.
const (
	// LabelAccount marks an account's Secret, and names the account on the
	// namespace it owns.
	LabelAccount = "sftpgate.dev/account"
	// SecretType is the type of account Secrets.
	SecretType corev1.SecretType = "sftpgate.dev/account" //nolint:gosec // a type name, not a credential

	keyEmail     = "email"
	keyHash      = "passwordHash"
	keyNamespace = "namespace"
	// keySession changes at every log-out: sessions carry it, so logging
	// out ends every session of the account, and a session never outlives
	// the account it was made for.
	keySession = "session"
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
)

// Account is a person's account.
type Account struct {
	// ID names the account's Secret; it is derived from the email.
	ID        string
	Email     string
	Namespace string
	// Session is what the account's sessions must carry.
	Session string
}

// Store keeps accounts as Secrets in Namespace.
type Store struct {
	Client    client.Client
	Namespace string
	// TenantRole is the ClusterRole, and Subject who it is granted to (the
	// UI's service account), in each account's namespace.
	TenantRole string
	Subject    rbacv1.Subject
	// Cost is bcrypt's cost; bcrypt.DefaultCost when zero.
	Cost int

	dummyOnce sync.Once
	dummy     []byte
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

func checkPassword(password string) error {
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
	return s.SignUpWithNamespace(ctx, email, password, strings.ToLower("sftpgate-"+rand.Text()[:12]))
}

// SignUpWithNamespace is SignUp with the account's namespace named, for the
// demo account of sftpgate-dev; the namespace must not exist yet.
func (s *Store) SignUpWithNamespace(ctx context.Context, email, password, namespace string) (*Account, error) {
	ctx = context.WithoutCancel(ctx)
	email, err := NormalizeEmail(email)
	if err != nil {
		return nil, err
	}
	if err := checkPassword(password); err != nil {
		return nil, err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), s.cost())
	if err != nil {
		return nil, err
	}
	acct := &Account{ID: id(email), Email: email, Namespace: namespace, Session: rand.Text()}
	// The Secret first: its Create is what makes an email taken, once.
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: acct.ID, Labels: map[string]string{LabelAccount: "true"}},
		Type:       SecretType,
		Data: map[string][]byte{keyEmail: []byte(email), keyHash: hash, keyNamespace: []byte(acct.Namespace),
			keySession: []byte(acct.Session)},
	}
	if err := s.Client.Create(ctx, secret); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, ErrEmailTaken
		}
		return nil, fmt.Errorf("creating the account: %w", err)
	}
	if err := s.createNamespace(ctx, acct); err != nil {
		// Without its namespace the account is of no use: undo it, so the
		// person can sign up again. (An empty namespace may stay behind:
		// the UI may not delete namespaces.)
		_ = s.Client.Delete(ctx, secret)
		return nil, err
	}
	return acct, nil
}

// createNamespace makes the account's namespace and grants the UI its
// tenant role there, and there only.
func (s *Store) createNamespace(ctx context.Context, acct *Account) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: acct.Namespace, Labels: map[string]string{LabelAccount: acct.ID}}}
	if err := s.Client.Create(ctx, ns); err != nil {
		return fmt.Errorf("creating the account's namespace: %w", err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: acct.Namespace, Name: "sftpgate-webui"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: s.TenantRole},
		Subjects:   []rbacv1.Subject{s.Subject},
	}
	if err := s.Client.Create(ctx, binding); err != nil {
		return fmt.Errorf("granting the web UI its role in the account's namespace: %w", err)
	}
	return nil
}

// dummyHash is compared against when no account has the email, so that a
// log-in takes as long either way: it has the cost of real hashes.
func (s *Store) dummyHash() []byte {
	s.dummyOnce.Do(func() {
		s.dummy, _ = bcrypt.GenerateFromPassword([]byte(rand.Text()), s.cost())
	})
	return s.dummy
}

// LogIn returns the account whose email and password these are.
func (s *Store) LogIn(ctx context.Context, email, password string) (*Account, error) {
	email, err := NormalizeEmail(email)
	if err != nil {
		_ = bcrypt.CompareHashAndPassword(s.dummyHash(), []byte(password))
		return nil, ErrWrongCredentials
	}
	secret, err := s.secret(ctx, id(email))
	if apierrors.IsNotFound(err) {
		_ = bcrypt.CompareHashAndPassword(s.dummyHash(), []byte(password))
		return nil, ErrWrongCredentials
	}
	if err != nil {
		return nil, err
	}
	if bcrypt.CompareHashAndPassword(secret.Data[keyHash], []byte(password)) != nil {
		return nil, ErrWrongCredentials
	}
	return fromSecret(secret), nil
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
		Session: string(secret.Data[keySession])}
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
