package kubeauth

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/sync/singleflight"
	"k8s.io/utils/clock"
)

// Issuer verifies ServiceAccount tokens without asking anyone: the
// signature against the keys of the cluster's ServiceAccount issuer, and
// the issuer, audience and times. Its discovery document and keys are
// read from the API server (ServiceAccount issuer discovery), again when a
// token names a key it does not know, at most once per minRefresh: a
// made-up token costs the API server nothing, and no more than that.
type Issuer struct {
	client   *http.Client
	server   string // the API server's URL
	audience string
	clock    clock.Clock

	mu      sync.Mutex
	issuer  string
	keys    jose.JSONWebKeySet
	fetched time.Time // when the keys were last asked for
	lastErr error     // why that failed, if it did
	flight  singleflight.Group
}

// NewIssuer reads the issuer's document and keys from the API server at
// server through client (which authenticates as the gateway).
func NewIssuer(client *http.Client, server, audience string) *Issuer {
	return &Issuer{client: client, server: strings.TrimSuffix(server, "/"), audience: audience, clock: clock.RealClock{}}
}

// The discovery document and keys, as every API server serves them.
const (
	discoveryPath = "/.well-known/openid-configuration"
	keysPath      = "/openid/v1/jwks"
)

// minRefresh is the shortest time between two reads of the issuer's keys.
const minRefresh = 10 * time.Second

// leeway allows for clocks that differ: the API server's review, after
// this check, holds to the token's times.
const leeway = time.Minute

// algorithms are those the API server signs ServiceAccount tokens with.
var algorithms = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.ES256, jose.ES384, jose.ES512, jose.PS256, jose.PS384, jose.PS512}

// claims are a ServiceAccount token's, beyond the registered ones.
type claims struct {
	Kubernetes struct {
		Namespace      string `json:"namespace"`
		ServiceAccount struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"serviceaccount"`
	} `json:"kubernetes.io"`
}

// Verified is what a token says once its signature and claims hold.
type Verified struct {
	Namespace, Name string
	Expiry          time.Time
}

// Verify checks token. It returns ErrInvalidToken or ErrExpired for a
// token that does not hold, or the API server's error while the issuer's
// keys cannot be read.
func (i *Issuer) Verify(ctx context.Context, token string) (*Verified, error) {
	tok, err := jwt.ParseSigned(token, algorithms)
	if err != nil || len(tok.Headers) != 1 {
		return nil, ErrInvalidToken
	}
	keys, issuer, err := i.keysFor(ctx, tok.Headers[0].KeyID)
	if err != nil {
		return nil, err
	}
	var std jwt.Claims
	var k8s claims
	verified := false
	for _, key := range keys {
		if tok.Claims(key.Key, &std, &k8s) == nil {
			verified = true
			break
		}
	}
	if !verified {
		return nil, ErrInvalidToken
	}
	switch err := std.ValidateWithLeeway(jwt.Expected{Issuer: issuer, AnyAudience: jwt.Audience{i.audience}, Time: i.clock.Now()}, leeway); {
	case errors.Is(err, jwt.ErrExpired):
		return nil, ErrExpired
	case err != nil, std.Expiry == nil:
		return nil, ErrInvalidToken
	}
	sa := k8s.Kubernetes
	if sa.Namespace == "" || sa.ServiceAccount.Name == "" {
		return nil, ErrNotServiceAccount
	}
	return &Verified{Namespace: sa.Namespace, Name: sa.ServiceAccount.Name, Expiry: std.Expiry.Time()}, nil
}

// keysFor returns the issuer's keys that may have signed a token naming
// kid (all of them for none), and the issuer; it reads them afresh when
// none does, unless it did less than minRefresh ago.
func (i *Issuer) keysFor(ctx context.Context, kid string) ([]jose.JSONWebKey, string, error) {
	keys, issuer, fresh, lastErr := i.known(kid)
	switch {
	case len(keys) > 0:
		return keys, issuer, nil
	case fresh && issuer != "":
		return nil, issuer, nil // a key it does not have: refused without asking again
	case fresh && lastErr != nil:
		return nil, "", lastErr
	}
	// Shared by the requests that ask at once (and joined by those that
	// come while it runs); the first one's client going away does not end
	// it.
	_, _, _ = i.flight.Do("keys", func() (any, error) {
		i.refresh(context.WithoutCancel(ctx))
		return nil, nil
	})
	keys, issuer, _, lastErr = i.known(kid)
	if issuer == "" {
		return nil, "", cmp.Or(lastErr, errors.New("the ServiceAccount issuer's keys are not known yet"))
	}
	return keys, issuer, nil
}

// known returns the keys held for kid, the issuer, whether the keys were
// read (or tried) less than minRefresh ago, and why that last try failed.
func (i *Issuer) known(kid string) (keys []jose.JSONWebKey, issuer string, fresh bool, lastErr error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if kid == "" {
		keys = i.keys.Keys
	} else {
		keys = i.keys.Key(kid)
	}
	fresh = !i.fetched.IsZero() && i.clock.Since(i.fetched) < minRefresh
	return keys, i.issuer, fresh, i.lastErr
}

// refresh reads the issuer's document and keys, keeping the last good
// ones when it fails.
func (i *Issuer) refresh(ctx context.Context) {
	i.mu.Lock()
	if !i.fetched.IsZero() && i.clock.Since(i.fetched) < minRefresh {
		i.mu.Unlock()
		return
	}
	i.fetched = i.clock.Now()
	i.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	var doc struct {
		Issuer string `json:"issuer"`
	}
	var keys jose.JSONWebKeySet
	err := i.get(ctx, discoveryPath, &doc)
	if err == nil {
		err = i.get(ctx, keysPath, &keys)
	}
	if err == nil && doc.Issuer == "" {
		err = errors.New("the API server's ServiceAccount issuer document names no issuer")
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.lastErr = err
	if err == nil {
		i.issuer, i.keys = doc.Issuer, keys
	}
}

// maxDocument bounds what is read of the issuer's document or keys.
const maxDocument = 1 << 20

func (i *Issuer) get(ctx context.Context, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, i.server+path, nil)
	if err != nil {
		return err
	}
	resp, err := i.client.Do(req)
	if err != nil {
		return fmt.Errorf("reading the ServiceAccount issuer's %s: %w", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("reading the ServiceAccount issuer's %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxDocument)).Decode(into); err != nil {
		return fmt.Errorf("reading the ServiceAccount issuer's %s: %w", path, err)
	}
	return nil
}
