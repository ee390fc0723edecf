// Package keyauth decides whether a presented API key token may run a
// command on a connection: the gateway's authorization of API keys (a
// ServiceAccount's token is kubeauth's).
package keyauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/apitoken"
	"github.com/sftpgate/sftpgate/internal/cacheindex"
)

// IndexKeys indexes the ApiKeys of c's informer by token hash, for
// Authorizer.
func IndexKeys(ctx context.Context, c cache.Informers) (*cacheindex.Index[*v1alpha1.ApiKey], error) {
	return cacheindex.New(ctx, c, &v1alpha1.ApiKey{}, apitoken.IndexTokenHash, apitoken.TokenHashes)
}

// Reasons a token is refused. Unauthenticated ones mean the token is no
// good (HTTP 401); the others that it is good but not for this (HTTP 403).
var (
	ErrUnknownToken = errors.New("unknown API key")
	ErrNotReady     = errors.New("API key is not ready")
	ErrExpired      = errors.New("API key has expired")
	ErrDisabled     = errors.New("API key is disabled")

	ErrConnectionNotAllowed = errors.New("API key may not use this connection")
	ErrCommandNotAllowed    = errors.New("API key may not run this command")

	// ErrNoSuchConnection: the token is a key's, but there is no such
	// connection in that key's namespace. A connection of another
	// namespace looks the same as none (HTTP 404).
	ErrNoSuchConnection = errors.New("no such connection")
)

// Unauthenticated reports whether err says the token itself is no good, as
// opposed to good but not allowed this.
func Unauthenticated(err error) bool {
	return errors.Is(err, ErrUnknownToken) || errors.Is(err, ErrNotReady) ||
		errors.Is(err, ErrExpired) || errors.Is(err, ErrDisabled)
}

// Authorizer decides requests from ApiKeys in a cache (never the API
// server: it runs on every request).
type Authorizer struct {
	// Keys are the ApiKeys by token hash, from IndexKeys.
	Keys *cacheindex.Index[*v1alpha1.ApiKey]
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Target is a connection as keys name it: its namespace, and Ref as an
// ApiKey's spec.connections names it ("name", "FtpConnection/name").
type Target struct{ Namespace, Ref string }

// Authorize finds the ApiKey of token in conn's namespace and checks that
// it may run command on conn; conn is nil when the slug names no
// connection. It returns the key whenever one was found, so that callers
// can name it (by key id) in logs. A token that is no key's is refused
// before anything is said about connections.
func (a *Authorizer) Authorize(token string, conn *Target, command v1alpha1.Command) (*v1alpha1.ApiKey, error) {
	// A token is found by its hash. Only its length is checked first: a
	// key given by hash (spec.token.sha256) must not make a short token
	// work, and a long header is not hashed. Validate's full check, a
	// regexp, costs more than a small write can spare (docs/benchmarks.md).
	if !apitoken.LengthOK(token) {
		return nil, ErrUnknownToken
	}
	hash := tokenHash(token)
	keys, err := a.Keys.Get(hash)
	if err != nil {
		return nil, fmt.Errorf("looking up API key: %w", err)
	}
	return a.authorize(hash, keys, conn, command)
}

// tokenHash is apitoken.Hash(token), the index's key, in one allocation
// (the string) where apitoken.Hash's conversions took three on every
// request. LengthOK bounds the token.
func tokenHash(token string) string {
	var buf [1024]byte
	var sum [sha256.Size]byte
	if len(token) <= len(buf) {
		sum = sha256.Sum256(buf[:copy(buf[:], token)])
	} else {
		sum = sha256.Sum256([]byte(token))
	}
	var digits [2 * sha256.Size]byte
	hex.Encode(digits[:], sum[:])
	return string(digits[:])
}

// authorize is Authorize's decision among the keys found for hash.
func (a *Authorizer) authorize(hash string, keys []*v1alpha1.ApiKey, conn *Target, command v1alpha1.Command) (*v1alpha1.ApiKey, error) {
	var known, matches []*v1alpha1.ApiKey
	for _, k := range keys {
		if subtle.ConstantTimeCompare([]byte(k.Status.TokenSHA256), []byte(hash)) != 1 {
			continue
		}
		known = append(known, k)
		// A key works only in its own namespace: a token can never reach
		// another namespace's connections.
		if conn != nil && k.Namespace == conn.Namespace {
			matches = append(matches, k)
		}
	}
	switch {
	case len(known) == 0:
		return nil, ErrUnknownToken
	case len(known) > 1:
		// A token belongs to one key in the cluster. Keys of two
		// namespaces with it are a race the controller is about to settle
		// (or a copy of a published hash): choosing would let whoever
		// copied it decide where the token's requests go. Of two keys of
		// one namespace, which scope applies is unclear, and disabling one
		// must not leave the token working.
		return nil, ErrNotReady
	case len(matches) == 0:
		// Only a key that works may learn that a slug is not its own: a
		// revoked one is refused as such, whatever slug it asks for.
		if err := a.usable(known[0]); err != nil {
			return known[0], err
		}
		return known[0], ErrNoSuchConnection
	}
	key := matches[0]
	return key, a.decide(key, conn.Ref, command)
}

func (a *Authorizer) decide(key *v1alpha1.ApiKey, connection string, command v1alpha1.Command) error {
	if err := a.usable(key); err != nil {
		return err
	}
	switch {
	case len(key.Spec.Connections) > 0 && !slices.Contains(key.Spec.Connections, connection):
		return ErrConnectionNotAllowed
	case !Allows(&key.Spec, command):
		return ErrCommandNotAllowed
	}
	return nil
}

// usable says why a key does not work at all, whatever it is used for.
func (a *Authorizer) usable(key *v1alpha1.ApiKey) error {
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	ready := meta.FindStatusCondition(key.Status.Conditions, v1alpha1.ConditionReady)
	switch {
	case key.Spec.Disabled:
		return ErrDisabled
	case !key.DeletionTimestamp.IsZero():
		return ErrNotReady
	case key.Spec.ExpiresAt != nil && !now().Before(key.Spec.ExpiresAt.Time):
		// Checked against the clock: a key expires on time, whether or not
		// the controller has noticed yet.
		return ErrExpired
	case ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != key.Generation:
		// Also refuses a key whose spec changed (say, its scope narrowed)
		// until the controller has seen the change.
		return ErrNotReady
	}
	return nil
}

// Allows reports whether a key with spec may run command.
func Allows(spec *v1alpha1.ApiKeySpec, command v1alpha1.Command) bool {
	switch {
	case spec.ReadOnly:
		return slices.Contains(v1alpha1.ReadOnlyCommands, command)
	case len(spec.Commands) > 0:
		return slices.Contains(spec.Commands, command)
	}
	return true
}
