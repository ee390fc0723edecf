// Package kubeauth lets callers in the cluster use their ServiceAccount
// instead of an API key: a projected token for the gateway's audience,
// verified first here, against the cluster's ServiceAccount issuer (so a
// made-up token costs the API server nothing), then by the TokenReview
// API (is it still valid: its pod, its ServiceAccount there), and
// authorized by plain RBAC through SubjectAccessReview on
// sftpconnections/commands (verb: the command, name: the connection).
// Both answers are cached briefly, and every cache and bound on reviews
// is shared fairly: per client address, per ServiceAccount namespace and,
// for RBAC, per ServiceAccount, so that no one caller can spend the
// replica's.
package kubeauth

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/types"
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
	// ErrBusy is a review past its caller's share of the replica's
	// reviews (of its address, namespace or ServiceAccount) or past the
	// replica's own, or that found every review slot taken for the whole
	// wait.
	ErrBusy = errors.New("too many reviews at once")
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

// Bounds of the caches and of the reviews.
const (
	// tokenTTL is the longest a verified token is trusted without another
	// review (shorter when the token expires sooner).
	tokenTTL = 5 * time.Minute
	// refusedTTL is how long a token the API server refused stays refused
	// without another review: a client retrying it does not have the
	// gateway ask each time.
	refusedTTL = 10 * time.Second
	// DefaultDecisionTTL is how long an RBAC decision is used, an allowed
	// one as a denied one: a binding removed takes effect within it.
	DefaultDecisionTTL = 10 * time.Second
	// cacheSize bounds each cache, and perNamespace what one
	// ServiceAccount namespace's entries may take of it; the least
	// recently used go first.
	cacheSize    = 10000
	perNamespace = 1000
	// maxReviews bounds the reviews in flight to the API server, and
	// reviewWait how long one waits for a slot.
	maxReviews = 16
	reviewWait = time.Second
	// reviewRate bounds the reviews (of tokens and of RBAC) a replica
	// asks for per second, with bursts of as many. Cached answers are not
	// counted, nor tokens refused here.
	reviewRate = 100
	// A party's share of the reviews: a client address or a
	// ServiceAccount namespace, and for RBAC also a ServiceAccount. Each
	// gets at most this rate (with bursts of as many) and this many in
	// flight; past it, at once, ErrBusy.
	partyRate     = 25
	partyInFlight = 8
	accountRate   = 10
	// maxParties bounds the parties tracked at once per kind.
	maxParties = 10000
	// maxTokenLength bounds what is parsed; projected tokens are about
	// 1 KiB.
	maxTokenLength = 16 << 10
)

// Creator creates reviews: a client.Client, reading nothing from a cache
// (reviews are created, never read).
type Creator interface {
	Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error
}

// Reviewer verifies tokens and decides requests.
type Reviewer struct {
	client      Creator
	issuer      *Issuer
	audience    string
	decisionTTL time.Duration
	clock       clock.Clock

	tokens    *fairCache[[sha256.Size]byte, tokenResult]
	decisions *fairCache[decisionKey, bool]
	// Reviews in progress, shared by the requests asking the same.
	tokenFlight, decisionFlight singleflight.Group

	slots   chan struct{}
	reviews *rate.Limiter
	// Each party's share of the reviews.
	addresses, namespaces, accounts share
}

// New returns a reviewer verifying tokens of audience against issuer and
// asking through c; its RBAC decisions are used for decisionTTL (0 is
// DefaultDecisionTTL).
func New(c Creator, issuer *Issuer, audience string, decisionTTL time.Duration) *Reviewer {
	return newReviewer(c, issuer, audience, decisionTTL, clock.RealClock{})
}

func newReviewer(c Creator, issuer *Issuer, audience string, decisionTTL time.Duration, clk clock.Clock) *Reviewer {
	if decisionTTL <= 0 {
		decisionTTL = DefaultDecisionTTL
	}
	return &Reviewer{
		client: c, issuer: issuer, audience: audience, decisionTTL: decisionTTL, clock: clk,
		tokens:     newFairCache[[sha256.Size]byte, tokenResult](cacheSize, perNamespace, clk),
		decisions:  newFairCache[decisionKey, bool](cacheSize, perNamespace, clk),
		slots:      make(chan struct{}, maxReviews),
		reviews:    rate.NewLimiter(reviewRate, reviewRate),
		addresses:  newShare(partyRate, partyRate, partyInFlight, maxParties),
		namespaces: newShare(partyRate, partyRate, partyInFlight, maxParties),
		accounts:   newShare(accountRate, 2*accountRate, partyInFlight/2, maxParties),
	}
}

// IsJWT reports whether token has the outward shape of a JSON Web Token
// (three parts): only such tokens are taken for ServiceAccount tokens; an
// API key never is.
func IsJWT(token string) bool {
	return len(token) <= maxTokenLength && strings.Count(token, ".") == 2
}

// tokenResult is what the token cache keeps: an identity or a refusal.
type tokenResult struct {
	id  *Identity
	err error
}

// Authenticate verifies token, a JWT, for the gateway's audience and
// returns the ServiceAccount it is for: here, against the issuer's keys,
// then with the TokenReview API, charged to the client at address and the
// token's namespace. A refusal is one of the errors above; any other error
// is the API server's, and the request may be retried.
func (r *Reviewer) Authenticate(ctx context.Context, token, address string) (*Identity, error) {
	if !IsJWT(token) {
		return nil, ErrInvalidToken
	}
	// A cached answer never outlives its token: it is read first.
	key := sha256.Sum256([]byte(token))
	if res, ok := r.tokens.Get(key); ok {
		return res.id, res.err
	}
	claims, err := r.issuer.Verify(ctx, token)
	if err != nil {
		return nil, err
	}
	v, err, _ := r.tokenFlight.Do(string(key[:]), func() (any, error) {
		release, err := r.admit(ctx, who{&r.addresses, address}, who{&r.namespaces, claims.Namespace})
		if err != nil {
			return nil, err
		}
		defer release()
		res, err := r.review(ctx, token, claims)
		if err != nil {
			return nil, err
		}
		ttl := refusedTTL
		if res.id != nil {
			ttl = min(tokenTTL, claims.Expiry.Sub(r.clock.Now()))
		}
		r.tokens.Add(key, claims.Namespace, res, ttl)
		return res, nil
	})
	if err != nil {
		return nil, err
	}
	res := v.(tokenResult) //nolint:forcetypeassert // review returns these
	return res.id, res.err
}

// review asks the API server whether token, whose claims hold, is valid
// for the audience (still: its pod or Secret, and its ServiceAccount,
// exist).
func (r *Reviewer) review(ctx context.Context, token string, claims *Verified) (tokenResult, error) {
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
	switch {
	case !ok:
		return tokenResult{err: ErrNotServiceAccount}, nil
	case ns != claims.Namespace || name != claims.Name:
		// Not the ServiceAccount the token says it is for: not trusted.
		return tokenResult{err: ErrInvalidToken}, nil
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

// Target is what a request is authorized for: a connection, by namespace
// and name, of the kind Resource names ("" is sftpconnections).
type Target struct{ Namespace, Name, Resource string }

// decisionKey is what an RBAC decision is about.
type decisionKey struct {
	uid     types.UID
	target  Target
	command v1alpha1.Command
}

// Authorize asks RBAC whether id may run command on target: the verb is
// the command, the resource <kind's resource>/commands in group
// sftpgate.dev (sftpconnections/commands, ftpconnections/commands), the name and namespace the target's. The review is
// charged to the client at address, id's namespace and id. It returns
// ErrDenied, ErrBusy, or the API server's error.
func (r *Reviewer) Authorize(ctx context.Context, id *Identity, target Target, command v1alpha1.Command, address string) error {
	key := decisionKey{uid: id.UID, target: target, command: command}
	if allowed, ok := r.decisions.Get(key); ok {
		return decision(allowed)
	}
	flight := fmt.Sprintf("%s\x00%s\x00%s\x00%s\x00%s", key.uid, target.Namespace, target.Resource, target.Name, command)
	v, err, _ := r.decisionFlight.Do(flight, func() (any, error) {
		release, err := r.admit(ctx, who{&r.addresses, address}, who{&r.namespaces, id.Namespace}, who{&r.accounts, id.String()})
		if err != nil {
			return nil, err
		}
		defer release()
		extra := make(map[string]authorizationv1.ExtraValue, len(id.user.Extra))
		for k, v := range id.user.Extra {
			extra[k] = authorizationv1.ExtraValue(v)
		}
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: id.user.Username, UID: id.user.UID, Groups: id.user.Groups, Extra: extra,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: target.Namespace, Verb: string(command), Group: v1alpha1.GroupVersion.Group,
				Resource: cmp.Or(target.Resource, Resource), Subresource: Subresource, Name: target.Name,
			},
		}}
		ctx, cancel := reviewContext(ctx)
		defer cancel()
		if err := r.client.Create(ctx, sar); err != nil {
			return nil, fmt.Errorf("asking RBAC: %w", err)
		}
		allowed := sar.Status.Allowed && !sar.Status.Denied
		r.decisions.Add(key, id.Namespace, allowed, r.decisionTTL)
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
