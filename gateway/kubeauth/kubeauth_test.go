package kubeauth

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"golang.org/x/time/rate"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/gateway/apikeys"
)

// apiServer answers reviews as the API server would, counting them: the
// user a token is for ("" for none) and whether RBAC allows. These tests
// are of the caches; gateway's TestServiceAccounts asks a real API server.
type apiServer struct {
	user             string
	allowed          bool
	tokens, accesses int
}

func (s *apiServer) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	switch o := obj.(type) {
	case *authenticationv1.TokenReview:
		s.tokens++
		o.Status = authenticationv1.TokenReviewStatus{Authenticated: s.user != "", Audiences: o.Spec.Audiences,
			User: authenticationv1.UserInfo{Username: s.user, UID: "uid-1"}}
	case *authorizationv1.SubjectAccessReview:
		s.accesses++
		o.Status.Allowed = s.allowed
	default:
		return fmt.Errorf("unexpected %T", obj)
	}
	return nil
}

func (s *apiServer) reviewer(clk *clocktesting.FakeClock) *Reviewer {
	return newReviewer(s, DefaultAudience, 10*time.Second, clk)
}

func token(exp time.Time) string {
	part := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	return part(`{"alg":"RS256"}`) + "." + part(fmt.Sprintf(`{"exp":%d}`, exp.Unix())) + "." + part("sig")
}

func TestIsJWT(t *testing.T) {
	key, _ := apikeys.NewToken()
	for tok, want := range map[string]bool{token(time.Now()): true, key: false, "a.b.c": true, "": false, "a.b": false} {
		if IsJWT(tok) != want {
			t.Errorf("IsJWT(%q) = %v", tok, !want)
		}
	}
}

// TestTokensAreCachedUntilTheyExpire: a verified token is reviewed once,
// trusted until it expires (or 5 minutes pass), and refused at once after.
func TestTokensAreCachedUntilTheyExpire(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	s := &apiServer{user: "system:serviceaccount:team:app"}
	r := s.reviewer(clk)
	ctx := context.Background()
	long, short := token(clk.Now().Add(time.Hour)), token(clk.Now().Add(2*time.Minute))
	for range 3 {
		id, err := r.Authenticate(ctx, long)
		if err != nil || id.String() != "team/app" || id.UID != "uid-1" {
			t.Fatalf("%v %v", id, err)
		}
	}
	if s.tokens != 1 {
		t.Errorf("%d reviews of one token, want 1", s.tokens)
	}
	if _, err := r.Authenticate(ctx, short); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Authenticate(ctx, "a.b.c"); !errors.Is(err, ErrInvalidToken) || s.tokens != 2 {
		t.Errorf("a token of a JWT's shape, not a JWT: %v after %d reviews, want ErrInvalidToken unreviewed", err, s.tokens)
	}
	clk.Step(3 * time.Minute)
	if _, err := r.Authenticate(ctx, short); !errors.Is(err, ErrExpired) {
		t.Errorf("a cached token past its expiry: %v, want ErrExpired", err)
	}
	clk.Step(3 * time.Minute) // past the 5 minutes a token is trusted
	if _, err := r.Authenticate(ctx, long); err != nil || s.tokens != 3 {
		t.Errorf("after 6 minutes: %v, %d reviews, want a third", err, s.tokens)
	}
}

// TestRefusalsAreCachedBriefly: a token that does not verify is refused
// without another review for refusedTTL; one that is not a
// ServiceAccount's is refused as such.
func TestRefusalsAreCachedBriefly(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	s := &apiServer{}
	r := s.reviewer(clk)
	ctx := context.Background()
	tok := token(clk.Now().Add(time.Hour))
	for range 3 {
		if _, err := r.Authenticate(ctx, tok); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("%v, want ErrInvalidToken", err)
		}
	}
	clk.Step(refusedTTL + time.Second)
	s.user = "alice"
	if _, err := r.Authenticate(ctx, tok); !errors.Is(err, ErrNotServiceAccount) || s.tokens != 2 {
		t.Errorf("a user's token: %v after %d reviews, want ErrNotServiceAccount after 2", err, s.tokens)
	}
}

// TestDecisionsAreCachedForTheirTTL: RBAC is asked once per caller,
// connection and command within the TTL, and again after it.
func TestDecisionsAreCachedForTheirTTL(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	s := &apiServer{user: "system:serviceaccount:team:app", allowed: true}
	r := s.reviewer(clk)
	ctx := context.Background()
	id, err := r.Authenticate(ctx, token(clk.Now().Add(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	conn := &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "box"}}
	for range 3 {
		if err := r.Authorize(ctx, id, conn, v1alpha1.CommandWrite); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Authorize(ctx, id, conn, v1alpha1.CommandRead); err != nil || s.accesses != 2 {
		t.Fatalf("%v, %d reviews, want 2", err, s.accesses)
	}
	s.allowed = false
	clk.Step(11 * time.Second)
	if err := r.Authorize(ctx, id, conn, v1alpha1.CommandWrite); !errors.Is(err, ErrDenied) {
		t.Errorf("after the TTL, with the binding gone: %v, want ErrDenied", err)
	}
}

// TestReviewsAreRateLimited: past the replica's rate, a token not in the
// cache is refused as busy rather than sent for review; cached ones still
// pass.
func TestReviewsAreRateLimited(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	s := &apiServer{user: "system:serviceaccount:team:app"}
	r := s.reviewer(clk)
	r.reviews = rate.NewLimiter(0, 2)
	ctx := context.Background()
	first := token(clk.Now().Add(time.Hour))
	for i := range 2 {
		if _, err := r.Authenticate(ctx, token(clk.Now().Add(time.Hour+time.Duration(i)*time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Authenticate(ctx, token(clk.Now().Add(2*time.Hour))); !errors.Is(err, ErrBusy) || s.tokens != 2 {
		t.Errorf("a third review at once: %v after %d reviews, want ErrBusy after 2", err, s.tokens)
	}
	if _, err := r.Authenticate(ctx, first); err != nil {
		t.Errorf("a cached token past the rate: %v", err)
	}
}
