package keyauth

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/apitoken"
)

// TestDecide is the decision table of Authorize once a key is found.
func TestDecide(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	a := &Authorizer{Now: func() time.Time { return now }}
	key := func(mutate func(*v1alpha1.ApiKey)) *v1alpha1.ApiKey {
		k := &v1alpha1.ApiKey{}
		k.Generation = 2
		k.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: 2}}
		if mutate != nil {
			mutate(k)
		}
		return k
	}
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(d)} }
	cases := []struct {
		name    string
		key     *v1alpha1.ApiKey
		conn    string
		command v1alpha1.Command
		want    error
	}{
		{"all connections, all commands", key(nil), "any", v1alpha1.CommandWrite, nil},
		{"disabled", key(func(k *v1alpha1.ApiKey) { k.Spec.Disabled = true }), "any", v1alpha1.CommandRead, ErrDisabled},
		{"expired by the clock", key(func(k *v1alpha1.ApiKey) { k.Spec.ExpiresAt = at(-time.Second) }), "any", v1alpha1.CommandRead, ErrExpired},
		{"expires exactly now", key(func(k *v1alpha1.ApiKey) { k.Spec.ExpiresAt = at(0) }), "any", v1alpha1.CommandRead, ErrExpired},
		{"expires later", key(func(k *v1alpha1.ApiKey) { k.Spec.ExpiresAt = at(time.Hour) }), "any", v1alpha1.CommandRead, nil},
		{"not ready", key(func(k *v1alpha1.ApiKey) { k.Status.Conditions[0].Status = metav1.ConditionFalse }), "any", v1alpha1.CommandRead, ErrNotReady},
		{"no condition", key(func(k *v1alpha1.ApiKey) { k.Status.Conditions = nil }), "any", v1alpha1.CommandRead, ErrNotReady},
		{"spec changed, not yet seen", key(func(k *v1alpha1.ApiKey) { k.Generation = 3 }), "any", v1alpha1.CommandRead, ErrNotReady},
		{"listed connection", key(func(k *v1alpha1.ApiKey) { k.Spec.Connections = []string{"a", "b"} }), "b", v1alpha1.CommandRead, nil},
		{"unlisted connection", key(func(k *v1alpha1.ApiKey) { k.Spec.Connections = []string{"a", "b"} }), "c", v1alpha1.CommandRead, ErrConnectionNotAllowed},
		{"listed FTP connection", key(func(k *v1alpha1.ApiKey) { k.Spec.Connections = []string{"a", "FtpConnection/b"} }), "FtpConnection/b", v1alpha1.CommandRead, nil},
		{"an FTP connection of a listed connection's name", key(func(k *v1alpha1.ApiKey) { k.Spec.Connections = []string{"b"} }), "FtpConnection/b", v1alpha1.CommandRead, ErrConnectionNotAllowed},
		{"allowed command", key(func(k *v1alpha1.ApiKey) { k.Spec.Commands = []v1alpha1.Command{"read", "list"} }), "any", v1alpha1.CommandList, nil},
		{"disallowed command", key(func(k *v1alpha1.ApiKey) { k.Spec.Commands = []v1alpha1.Command{"read", "list"} }), "any", v1alpha1.CommandWrite, ErrCommandNotAllowed},
		{"read-only reads", key(func(k *v1alpha1.ApiKey) { k.Spec.ReadOnly = true }), "any", v1alpha1.CommandStat, nil},
		{"read-only writes", key(func(k *v1alpha1.ApiKey) { k.Spec.ReadOnly = true }), "any", v1alpha1.CommandUnlink, ErrCommandNotAllowed},
		{"disabled wins over scope", key(func(k *v1alpha1.ApiKey) { k.Spec.Disabled, k.Spec.Connections = true, []string{"a"} }), "c", v1alpha1.CommandRead, ErrDisabled},
		{"being deleted", key(func(k *v1alpha1.ApiKey) { k.DeletionTimestamp = at(-time.Second) }), "any", v1alpha1.CommandRead, ErrNotReady},
		{"read-only hashes", key(func(k *v1alpha1.ApiKey) { k.Spec.ReadOnly = true }), "any", v1alpha1.CommandHash, nil},
		{"read-only renames", key(func(k *v1alpha1.ApiKey) { k.Spec.ReadOnly = true }), "any", v1alpha1.CommandRename, ErrCommandNotAllowed},
	}
	for _, tc := range cases {
		err := a.decide(tc.key, tc.conn, tc.command)
		if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%s: decide = %v, want %v", tc.name, err, tc.want)
		}
		forbidden := errors.Is(err, ErrConnectionNotAllowed) || errors.Is(err, ErrCommandNotAllowed)
		if err != nil && Unauthenticated(err) == forbidden {
			t.Errorf("%s: %v: Unauthenticated = %v", tc.name, err, Unauthenticated(err))
		}
	}
}

// TestTokenOfKeysInTwoNamespacesIsRefused: a hash that keys of two
// namespaces (or two of one) have is refused, whichever connection the
// request names: the gateway does not choose where a token's requests go.
func TestTokenOfKeysInTwoNamespacesIsRefused(t *testing.T) {
	token, _ := apitoken.NewToken()
	hash := apitoken.Hash(token)
	key := func(ns string) *v1alpha1.ApiKey {
		k := &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "key", Generation: 1}}
		k.Status.TokenSHA256 = hash
		k.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: 1}}
		return k
	}
	conn := &Target{Namespace: "team-a", Ref: "reports"}
	a := &Authorizer{}
	if _, err := a.authorize(hash, []*v1alpha1.ApiKey{key("team-a")}, conn, v1alpha1.CommandWrite); err != nil {
		t.Fatalf("one key: %v", err)
	}
	for name, keys := range map[string][]*v1alpha1.ApiKey{
		"two namespaces": {key("team-a"), key("attacker")},
		"one namespace":  {key("team-a"), key("team-a")},
	} {
		if k, err := a.authorize(hash, keys, conn, v1alpha1.CommandWrite); !errors.Is(err, ErrNotReady) || k != nil || !Unauthenticated(err) {
			t.Errorf("%s: %v, %v; want the token refused as not ready (401)", name, k, err)
		}
	}
}

// tokenHash is apitoken.Hash, in one allocation.
func TestTokenHash(t *testing.T) {
	for _, token := range []string{"", "short", strings.Repeat("t", 1024), strings.Repeat("t", 1025)} {
		if got, want := tokenHash(token), apitoken.Hash(token); got != want {
			t.Errorf("tokenHash of %d bytes = %s, want %s", len(token), got, want)
		}
	}
	token, _ := apitoken.NewToken()
	if n := testing.AllocsPerRun(100, func() { tokenHash(token) }); n > 1 {
		t.Errorf("%v allocations", n)
	}
}
