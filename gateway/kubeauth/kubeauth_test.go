package kubeauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"golang.org/x/time/rate"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/internal/apitoken"
)

// issuer signs tokens as a cluster's ServiceAccount issuer does, and
// serves its discovery document and keys, counting the reads. These tests
// are of the checks, caches and bounds; gateway's TestServiceAccounts asks
// a real API server.
type issuer struct {
	key     *ecdsa.PrivateKey
	url     string
	fetches atomic.Int32
}

func newIssuer(t *testing.T) *issuer {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is := &issuer{key: key}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case discoveryPath:
			_ = json.NewEncoder(w).Encode(map[string]string{"issuer": is.url, "jwks_uri": is.url + keysPath})
		case keysPath:
			is.fetches.Add(1)
			_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	is.url = srv.URL
	return is
}

// claim changes a token's claims before it is signed.
type claim func(std *jwt.Claims, k8s map[string]any)

// token is a ServiceAccount's token for namespace/name, expiring at exp.
func (is *issuer) token(t *testing.T, namespace, name string, exp time.Time, changes ...claim) string {
	return is.signed(t, is.key, "k1", namespace, name, exp, changes...)
}

func (is *issuer) signed(t *testing.T, key *ecdsa.PrivateKey, kid, namespace, name string, exp time.Time, changes ...claim) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	std := jwt.Claims{Issuer: is.url, Audience: jwt.Audience{DefaultAudience}, Expiry: jwt.NewNumericDate(exp),
		IssuedAt: jwt.NewNumericDate(time.Now()), Subject: "system:serviceaccount:" + namespace + ":" + name}
	k8s := map[string]any{"kubernetes.io": map[string]any{"namespace": namespace, "serviceaccount": map[string]any{"name": name, "uid": "sa-uid"}}}
	for _, change := range changes {
		change(&std, k8s)
	}
	tok, err := jwt.Signed(signer).Claims(std).Claims(k8s).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// apiServer answers reviews as the API server would, counting them: a
// token is for the ServiceAccount its claims name, unless revoked, and RBAC
// allows as allowed says. With hold set, each review waits for it to
// close.
type apiServer struct {
	revoked, notServiceAccount, allowed bool
	hold                                chan struct{}

	mu                         sync.Mutex
	tokens, accesses, inFlight int
	maxInFlight                int
}

func (s *apiServer) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	s.mu.Lock()
	s.inFlight++
	s.maxInFlight = max(s.maxInFlight, s.inFlight)
	s.mu.Unlock()
	if s.hold != nil {
		<-s.hold
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight--
	switch o := obj.(type) {
	case *authenticationv1.TokenReview:
		s.tokens++
		var k8s claims
		tok, err := jwt.ParseSigned(o.Spec.Token, algorithms)
		if err != nil || tok.UnsafeClaimsWithoutVerification(&k8s) != nil {
			return err
		}
		user := "system:serviceaccount:" + k8s.Kubernetes.Namespace + ":" + k8s.Kubernetes.ServiceAccount.Name
		if s.notServiceAccount {
			user = "alice"
		}
		o.Status = authenticationv1.TokenReviewStatus{Authenticated: !s.revoked, Audiences: o.Spec.Audiences,
			User: authenticationv1.UserInfo{Username: user, UID: "uid-" + user}}
	case *authorizationv1.SubjectAccessReview:
		s.accesses++
		o.Status.Allowed = s.allowed
	default:
		return fmt.Errorf("unexpected %T", obj)
	}
	return nil
}

func (s *apiServer) counts() (tokens, accesses int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokens, s.accesses
}

func (s *apiServer) reviewer(is *issuer, clk *clocktesting.FakeClock) *Reviewer {
	i := NewIssuer(http.DefaultClient, is.url, DefaultAudience)
	i.clock = clk
	return newReviewer(s, i, DefaultAudience, 10*time.Second, clk)
}

const address = "192.0.2.1"

func TestIsJWT(t *testing.T) {
	key, _ := apitoken.NewToken()
	for tok, want := range map[string]bool{"eyJ.eyJ.sig": true, key: false, "a.b.c": true, "": false, "a.b": false} {
		if IsJWT(tok) != want {
			t.Errorf("IsJWT(%q) = %v", tok, !want)
		}
	}
}

// TestTokensAreCachedUntilTheyExpire: a verified token is reviewed once,
// trusted until it expires (or 5 minutes pass), and refused at once after.
func TestTokensAreCachedUntilTheyExpire(t *testing.T) {
	is, clk, s := newIssuer(t), clocktesting.NewFakeClock(time.Now()), &apiServer{}
	r := s.reviewer(is, clk)
	ctx := context.Background()
	long, short := is.token(t, "team", "app", clk.Now().Add(time.Hour)), is.token(t, "team", "app", clk.Now().Add(2*time.Minute))
	for range 3 {
		id, err := r.Authenticate(ctx, long, address)
		if err != nil || id.String() != "team/app" || id.UID != "uid-system:serviceaccount:team:app" {
			t.Fatalf("%v %v", id, err)
		}
	}
	if tokens, _ := s.counts(); tokens != 1 {
		t.Errorf("%d reviews of one token, want 1", tokens)
	}
	if _, err := r.Authenticate(ctx, short, address); err != nil {
		t.Fatal(err)
	}
	clk.Step(3 * time.Minute)
	if _, err := r.Authenticate(ctx, short, address); !errors.Is(err, ErrExpired) {
		t.Errorf("a token past its expiry: %v, want ErrExpired", err)
	}
	clk.Step(3 * time.Minute) // past the 5 minutes a token is trusted
	if _, err := r.Authenticate(ctx, long, address); err != nil {
		t.Errorf("after 6 minutes: %v", err)
	}
	if tokens, _ := s.counts(); tokens != 3 {
		t.Errorf("%d reviews, want a third after 6 minutes", tokens)
	}
}

// TestForgedTokensCostNothing: a token that is not a valid signed token
// from the issuer, for the gateway's audience, is refused here: the API
// server reviews none, and a flood of made-up key ids has the issuer's
// keys read at most once per minRefresh.
func TestForgedTokensCostNothing(t *testing.T) {
	is, clk, s := newIssuer(t), clocktesting.NewFakeClock(time.Now()), &apiServer{}
	r := s.reviewer(is, clk)
	ctx := context.Background()
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	exp := clk.Now().Add(time.Hour)
	forged := map[string]string{
		"made up":               "eyJhbGciOiJSUzI1NiJ9.eyJleHAiOjk5OTk5OTk5OTl9.c2ln",
		"signed by another key": is.signed(t, other, "k1", "team", "app", exp),
		"another audience":      is.token(t, "team", "app", exp, func(std *jwt.Claims, _ map[string]any) { std.Audience = jwt.Audience{"api"} }),
		"another issuer":        is.token(t, "team", "app", exp, func(std *jwt.Claims, _ map[string]any) { std.Issuer = "https://elsewhere" }),
		"no expiry":             is.token(t, "team", "app", exp, func(std *jwt.Claims, _ map[string]any) { std.Expiry = nil }),
		"not a ServiceAccount's": is.token(t, "team", "app", exp, func(_ *jwt.Claims, k8s map[string]any) {
			delete(k8s, "kubernetes.io")
		}),
	}
	for name, tok := range forged {
		if _, err := r.Authenticate(ctx, tok, address); !Unauthenticated(err) {
			t.Errorf("%s: %v, want refused as not valid", name, err)
		}
	}
	if _, err := r.Authenticate(ctx, is.token(t, "team", "app", clk.Now().Add(-2*leeway)), address); !errors.Is(err, ErrExpired) {
		t.Errorf("expired: %v, want ErrExpired", err)
	}
	for i := range 1000 {
		tok := is.signed(t, other, fmt.Sprintf("made-up-%d", i), "team", "app", exp)
		if _, err := r.Authenticate(ctx, tok, address); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("a made-up key id: %v, want ErrInvalidToken", err)
		}
	}
	if tokens, accesses := s.counts(); tokens+accesses != 0 {
		t.Errorf("forged tokens cost the API server %d token reviews and %d access reviews, want none", tokens, accesses)
	}
	if n := is.fetches.Load(); n != 1 {
		t.Errorf("the issuer's keys were read %d times for forged tokens within %s, want once", n, minRefresh)
	}
	clk.Step(minRefresh)
	if _, err := r.Authenticate(ctx, is.signed(t, other, "made-up-again", "team", "app", exp), address); !errors.Is(err, ErrInvalidToken) || is.fetches.Load() != 2 {
		t.Errorf("a made-up key id %s later: %v after %d reads, want refused after a second read", minRefresh, err, is.fetches.Load())
	}
	if _, err := r.Authenticate(ctx, is.token(t, "team", "app", exp), address); err != nil {
		t.Errorf("a valid token after the flood: %v", err)
	}
}

// TestRefusalsAreCachedBriefly: a signed token the API server refuses
// (revoked) is refused without another review for refusedTTL; one it says
// is no ServiceAccount's is refused as such.
func TestRefusalsAreCachedBriefly(t *testing.T) {
	is, clk, s := newIssuer(t), clocktesting.NewFakeClock(time.Now()), &apiServer{revoked: true}
	r := s.reviewer(is, clk)
	ctx := context.Background()
	tok := is.token(t, "team", "app", clk.Now().Add(time.Hour))
	for range 3 {
		if _, err := r.Authenticate(ctx, tok, address); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("%v, want ErrInvalidToken", err)
		}
	}
	clk.Step(refusedTTL + time.Second)
	s.revoked, s.notServiceAccount = false, true
	if _, err := r.Authenticate(ctx, tok, address); !errors.Is(err, ErrNotServiceAccount) {
		t.Errorf("a user's token: %v, want ErrNotServiceAccount", err)
	}
	if tokens, _ := s.counts(); tokens != 2 {
		t.Errorf("%d reviews, want 2", tokens)
	}
}

// TestDecisionsAreCachedForTheirTTL: RBAC is asked once per caller,
// connection and command within the TTL, a denial as an allowance, and
// again after it.
func TestDecisionsAreCachedForTheirTTL(t *testing.T) {
	is, clk, s := newIssuer(t), clocktesting.NewFakeClock(time.Now()), &apiServer{allowed: true}
	r := s.reviewer(is, clk)
	ctx := context.Background()
	id, err := r.Authenticate(ctx, is.token(t, "team", "app", clk.Now().Add(time.Hour)), address)
	if err != nil {
		t.Fatal(err)
	}
	box := Target{Namespace: "team", Name: "box"}
	for range 3 {
		if err := r.Authorize(ctx, id, box, v1alpha1.CommandWrite, address); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Authorize(ctx, id, box, v1alpha1.CommandRead, address); err != nil {
		t.Fatal(err)
	}
	if _, accesses := s.counts(); accesses != 2 {
		t.Fatalf("%d reviews, want 2", accesses)
	}
	s.allowed = false
	clk.Step(11 * time.Second)
	for range 3 {
		if err := r.Authorize(ctx, id, box, v1alpha1.CommandWrite, address); !errors.Is(err, ErrDenied) {
			t.Errorf("after the TTL, with the binding gone: %v, want ErrDenied", err)
		}
	}
	if _, accesses := s.counts(); accesses != 3 {
		t.Errorf("%d reviews, want a denial asked for once", accesses)
	}
}

// TestReviewsAreRateLimited: past the replica's rate, a token not in the
// cache is refused as busy rather than sent for review; cached ones still
// pass.
func TestReviewsAreRateLimited(t *testing.T) {
	is, clk, s := newIssuer(t), clocktesting.NewFakeClock(time.Now()), &apiServer{}
	r := s.reviewer(is, clk)
	r.reviews = rate.NewLimiter(0, 2)
	ctx := context.Background()
	first := is.token(t, "team", "app", clk.Now().Add(time.Hour))
	for _, tok := range []string{first, is.token(t, "team", "app", clk.Now().Add(time.Hour))} {
		if _, err := r.Authenticate(ctx, tok, address); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Authenticate(ctx, is.token(t, "team", "app", clk.Now().Add(2*time.Hour)), address); !errors.Is(err, ErrBusy) {
		t.Errorf("a third review at once: %v, want ErrBusy", err)
	}
	if _, err := r.Authenticate(ctx, first, address); err != nil {
		t.Errorf("a cached token past the rate: %v", err)
	}
}

// TestReviewsAreSharedFairly: a namespace, or a client address, sending
// valid token after token gets its share of the replica's reviews and no
// more: another namespace's token, from another address, is still
// reviewed.
func TestReviewsAreSharedFairly(t *testing.T) {
	is, clk, s := newIssuer(t), clocktesting.NewFakeClock(time.Now()), &apiServer{}
	r := s.reviewer(is, clk)
	ctx := context.Background()
	exp := clk.Now().Add(time.Hour)
	flood := func(namespace, from string) (busy int) {
		for i := range 3 * partyRate {
			tok := is.token(t, namespace, fmt.Sprintf("app-%d", i), exp)
			if _, err := r.Authenticate(ctx, tok, from); errors.Is(err, ErrBusy) {
				busy++
			} else if err != nil {
				t.Fatal(err)
			}
		}
		return busy
	}
	if busy := flood("flood", "192.0.2.66"); busy < 2*partyRate-partyRate/2 {
		t.Errorf("a namespace's flood from one address: %d of %d refused, want those past its share of %d", busy, 3*partyRate, partyRate)
	}
	if busy := flood("flood-too", "192.0.2.66"); busy < 3*partyRate-partyRate/2 {
		t.Errorf("the same address, another namespace: %d of %d refused, want the address's share spent", busy, 3*partyRate)
	}
	if _, err := r.Authenticate(ctx, is.token(t, "team", "app", exp), address); err != nil {
		t.Errorf("another namespace's token from another address, during the floods: %v", err)
	}
}

// TestCachesAreSharedFairly: one namespace's tokens and decisions take at
// most perNamespace of each cache; another's stay.
func TestCachesAreSharedFairly(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	c := newFairCache[string, int](10, 4, clk)
	c.Add("team/1", "team", 1, time.Minute)
	c.Add("team/2", "team", 2, time.Minute)
	for i := range 100 {
		c.Add(fmt.Sprint("flood/", i), "flood", i, time.Minute)
	}
	if c.Len() != 6 {
		t.Errorf("the cache holds %d entries, want the flood's 4 and team's 2", c.Len())
	}
	for _, key := range []string{"team/1", "team/2", "flood/99", "flood/96"} {
		if _, ok := c.Get(key); !ok {
			t.Errorf("%s is gone", key)
		}
	}
	if _, ok := c.Get("flood/95"); ok {
		t.Error("the flood's fifth newest entry is still held")
	}
	for i := range 8 {
		c.Add(fmt.Sprint("p", i, "/x"), fmt.Sprint("p", i), i, time.Minute)
	}
	if c.Len() != 10 {
		t.Errorf("the cache holds %d entries, want its size", c.Len())
	}
	clk.Step(time.Minute)
	if _, ok := c.Get("p7/x"); ok {
		t.Error("an entry past its TTL")
	}
}

// TestReviewsInFlightAreBounded: one ServiceAccount asking RBAC about 500
// connections at once has at most its share in flight; the rest are
// refused as busy at once, not queued.
func TestReviewsInFlightAreBounded(t *testing.T) {
	is, clk, s := newIssuer(t), clocktesting.NewFakeClock(time.Now()), &apiServer{allowed: true}
	r := s.reviewer(is, clk)
	ctx := context.Background()
	id, err := r.Authenticate(ctx, is.token(t, "team", "app", clk.Now().Add(time.Hour)), address)
	if err != nil {
		t.Fatal(err)
	}
	s.hold = make(chan struct{})
	var wg sync.WaitGroup
	var busy atomic.Int32
	for i := range 500 {
		wg.Go(func() {
			if err := r.Authorize(ctx, id, Target{Namespace: "team", Name: fmt.Sprint("box-", i)}, v1alpha1.CommandRead, address); errors.Is(err, ErrBusy) {
				busy.Add(1)
			}
		})
	}
	testkit.EventuallyFound(t, "the reviews past the party's share are refused", func() (bool, string) {
		n := busy.Load()
		return n >= 500-partyInFlight/2, fmt.Sprint(n)
	})
	close(s.hold)
	wg.Wait()
	if s.maxInFlight > partyInFlight/2 || busy.Load() != int32(500-s.maxInFlight) {
		t.Errorf("%d reviews in flight at most, %d refused, want at most %d in flight and the rest refused", s.maxInFlight, busy.Load(), partyInFlight/2)
	}
}
