// Package kubeauth lets callers in the cluster use their ServiceAccount
// instead of an API key: a projected token for the gateway's audience,
// verified by the TokenReview API, and authorized by plain RBAC through
// SubjectAccessReview on sftpconnections/commands (verb: the command,
// name: the connection). Both answers are cached briefly and in bounded
// caches, so that a caller's requests cost the API server a review only
// now and then.
package kubeauth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// DefaultAudience is the audience a caller's projected token must be for,
// unless the gateway is told another.
const DefaultAudience = "sftpgate.dev"

// The resource RBAC rules name to grant commands on a connection.
const (
	Resource    = "sftpconnections"
	Subresource = "commands"
)

// Why a token or a request is refused. The first three mean the token is
// no good (HTTP 401).
var (
	ErrInvalidToken      = errors.New("the token is not valid for this gateway (wrong audience, revoked or unknown)")
	ErrExpired           = errors.New("the token has expired")
	ErrNotServiceAccount = errors.New("the token is not a ServiceAccount's")
	// ErrDenied is RBAC's refusal.
	ErrDenied = errors.New("RBAC does not allow this ServiceAccount this command on this connection")
	// ErrBusy is a review past the replica's rate of reviews, or that
	// found every review slot taken for the whole wait.
	ErrBusy = errors.New("too many token reviews at once")
)

// Unauthenticated reports whether err says the token itself is no good.
func Unauthenticated(err error) bool {
	return errors.Is(err, ErrInvalidToken) || errors.Is(err, ErrExpired) || errors.Is(err, ErrNotServiceAccount)
}

// Identity is a ServiceAccount a token was verified for.
type Identity struct {
	Namespace, Name string
	UID             types.UID
	user            authenticationv1.UserInfo
}

// String names the ServiceAccount as logs do: namespace/name.
func (id *Identity) String() string { return id.Namespace + "/" + id.Name }

// Bounds of the caches and of the reviews in flight.
const (
	// tokenTTL is the longest a verified token is trusted without another
	// review (shorter when the token expires sooner).
	tokenTTL = 5 * time.Minute
	// refusedTTL is how long a refused token stays refused without
	// another review: a client retrying a bad token does not have the
	// gateway ask each time.
	refusedTTL = 10 * time.Second
	// DefaultDecisionTTL is how long an RBAC decision is used: a binding
	// removed takes effect within it.
	DefaultDecisionTTL = 10 * time.Second
	// cacheSize bounds each cache; the least recently used go first.
	cacheSize = 10000
	// maxReviews bounds the reviews in flight to the API server, and
	// reviewWait how long one waits for a slot.
	maxReviews = 16
	reviewWait = time.Second
	// reviewRate bounds the token reviews a replica asks for per second
	// (with bursts of as many): a client sending token after token that
	// is not in the cache cannot have the gateway flood the API server.
	// Cached tokens are not counted.
	reviewRate = 100
	// maxTokenLength bounds what is parsed and sent for review; projected
	// tokens are about 1 KiB.
	maxTokenLength = 16 << 10
)

// Creator creates reviews: a client.Client, reading nothing from a cache
// (reviews are created, never read).
type Creator interface {
	Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error
}

// Reviewer verifies tokens and decides requests through the API server.
type Reviewer struct {
	client      Creator
	audience    string
	decisionTTL time.Duration
	clock       clock.Clock

	tokens, decisions *cache.LRUExpireCache
	flight            singleflight.Group
	slots             chan struct{}
	reviews           *rate.Limiter
}

// New returns a reviewer asking through c for tokens of audience, whose
// RBAC decisions are used for decisionTTL (0 is DefaultDecisionTTL).
func New(c Creator, audience string, decisionTTL time.Duration) *Reviewer {
	return newReviewer(c, audience, decisionTTL, clock.RealClock{})
}

func newReviewer(c Creator, audience string, decisionTTL time.Duration, clk clock.Clock) *Reviewer {
	if decisionTTL <= 0 {
		decisionTTL = DefaultDecisionTTL
	}
	return &Reviewer{
		client: c, audience: audience, decisionTTL: decisionTTL, clock: clk,
		tokens:    cache.NewLRUExpireCacheWithClock(cacheSize, clk),
		decisions: cache.NewLRUExpireCacheWithClock(cacheSize, clk),
		slots:     make(chan struct{}, maxReviews),
		reviews:   rate.NewLimiter(reviewRate, reviewRate),
	}
}

// IsJWT reports whether token has the outward shape of a JSON Web Token
// (three parts): only such tokens are sent for review; an API key never
// is. What is inside is read on review.
func IsJWT(token string) bool {
	return len(token) <= maxTokenLength && strings.Count(token, ".") == 2
}

// expiry reads a JWT's exp claim, without verifying it: it is used only
// to refuse an expired token early and to cache a verified one no longer
// than it lives, never to accept one.
func expiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if parts[0] == "" || parts[2] == "" || err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *int64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp == nil {
		return time.Time{}, false
	}
	return time.Unix(*claims.Exp, 0), true
}

// tokenResult is what the token cache keeps: an identity or a refusal.
type tokenResult struct {
	id  *Identity
	err error
}

// Authenticate verifies token, a JWT, with the TokenReview API for the
// gateway's audience and returns the ServiceAccount it is for. A refusal
// is one of the errors above; any other error is the API server's, and
// the request may be retried.
func (r *Reviewer) Authenticate(ctx context.Context, token string) (*Identity, error) {
	if !IsJWT(token) {
		return nil, ErrInvalidToken
	}
	// A cached answer never outlives its token: it is read first.
	sum := sha256.Sum256([]byte(token))
	key := string(sum[:])
	if v, ok := r.tokens.Get(key); ok {
		res := v.(tokenResult) //nolint:forcetypeassert // the cache holds only these
		return res.id, res.err
	}
	exp, ok := expiry(token)
	now := r.clock.Now()
	switch {
	case !ok:
		return nil, ErrInvalidToken
	case !now.Before(exp):
		return nil, ErrExpired
	}
	v, err, _ := r.flight.Do(key, func() (any, error) {
		res, err := r.review(ctx, token)
		if err != nil {
			return nil, err
		}
		ttl := refusedTTL
		if res.id != nil {
			ttl = min(tokenTTL, exp.Sub(now))
		}
		r.tokens.Add(key, res, ttl)
		return res, nil
	})
	if err != nil {
		return nil, err
	}
	res := v.(tokenResult) //nolint:forcetypeassert // review returns these
	return res.id, res.err
}

// review asks the API server whether token is valid for the audience.
func (r *Reviewer) review(ctx context.Context, token string) (tokenResult, error) {
	if !r.reviews.Allow() {
		return tokenResult{}, ErrBusy
	}
	release, err := r.slot(ctx)
	if err != nil {
		return tokenResult{}, err
	}
	defer release()
	ctx, cancel := reviewContext(ctx)
	defer cancel()
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{r.audience}}}
	if err := r.client.Create(ctx, tr); err != nil {
		return tokenResult{}, fmt.Errorf("reviewing the token: %w", err)
	}
	st := tr.Status
	if !st.Authenticated || !slices.Contains(st.Audiences, r.audience) {
		return tokenResult{err: ErrInvalidToken}, nil
	}
	ns, name, ok := serviceAccount(st.User.Username)
	if !ok {
		return tokenResult{err: ErrNotServiceAccount}, nil
	}
	return tokenResult{id: &Identity{Namespace: ns, Name: name, UID: types.UID(st.User.UID), user: st.User}}, nil
}

// reviewTimeout bounds one review. A review is shared by the requests
// asking the same at once, so the first one's client going away does not
// end it.
const reviewTimeout = 10 * time.Second

func reviewContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), reviewTimeout)
}

// slot waits for room among the reviews in flight.
func (r *Reviewer) slot(ctx context.Context) (release func(), err error) {
	t := time.NewTimer(reviewWait)
	defer t.Stop()
	select {
	case r.slots <- struct{}{}:
		return func() { <-r.slots }, nil
	case <-t.C:
		return nil, ErrBusy
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// serviceAccount splits a ServiceAccount's user name,
// system:serviceaccount:<namespace>:<name>.
func serviceAccount(username string) (namespace, name string, ok bool) {
	rest, ok := strings.CutPrefix(username, "system:serviceaccount:")
	if !ok {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(rest, ":")
	return namespace, name, ok && namespace != "" && name != "" && !strings.Contains(name, ":")
}

// decisionKey is what an RBAC decision is about.
type decisionKey struct {
	uid             types.UID
	namespace, name string
	command         v1alpha1.Command
}

// Authorize asks RBAC whether id may run command on conn: the verb is
// the command, the resource sftpconnections/commands in group
// sftpgate.dev, the name and namespace the connection's. It returns
// ErrDenied, or the API server's error.
func (r *Reviewer) Authorize(ctx context.Context, id *Identity, conn *v1alpha1.SftpConnection, command v1alpha1.Command) error {
	key := decisionKey{uid: id.UID, namespace: conn.Namespace, name: conn.Name, command: command}
	if v, ok := r.decisions.Get(key); ok {
		return decision(v.(bool)) //nolint:forcetypeassert // the cache holds only these
	}
	v, err, _ := r.flight.Do(fmt.Sprintf("%s\x00%s\x00%s\x00%s", key.uid, key.namespace, key.name, key.command), func() (any, error) {
		extra := make(map[string]authorizationv1.ExtraValue, len(id.user.Extra))
		for k, v := range id.user.Extra {
			extra[k] = authorizationv1.ExtraValue(v)
		}
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: id.user.Username, UID: id.user.UID, Groups: id.user.Groups, Extra: extra,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: conn.Namespace, Verb: string(command), Group: v1alpha1.GroupVersion.Group,
				Resource: Resource, Subresource: Subresource, Name: conn.Name,
			},
		}}
		ctx, cancel := reviewContext(ctx)
		defer cancel()
		if err := r.client.Create(ctx, sar); err != nil {
			return nil, fmt.Errorf("asking RBAC: %w", err)
		}
		allowed := sar.Status.Allowed && !sar.Status.Denied
		r.decisions.Add(key, allowed, r.decisionTTL)
		return allowed, nil
	})
	if err != nil {
		return err
	}
	return decision(v.(bool)) //nolint:forcetypeassert // the flight returns these
}

func decision(allowed bool) error {
	if allowed {
		return nil
	}
	return ErrDenied
}
