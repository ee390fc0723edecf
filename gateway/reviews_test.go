package gateway_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	josejwt "github.com/go-jose/go-jose/v4/jwt"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/sftpgate/sftpgate/gateway"
	"github.com/sftpgate/sftpgate/gateway/kubeauth"
)

// The tests of this file count what the gateway asks the API server for
// ServiceAccount tokens, from the API server's own metrics: nothing else
// in the tests asks it for reviews.

// apiServerReviews is how many token reviews and access reviews the API
// server has answered so far.
func apiServerReviews(t *testing.T) (tokens, accesses float64) {
	t.Helper()
	hc, err := rest.HTTPClientFor(restConfig)
	must(t, err)
	resp, err := hc.Get(strings.TrimSuffix(restConfig.Host, "/") + "/metrics")
	must(t, err)
	defer func() { _ = resp.Body.Close() }()
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	for lines.Scan() {
		line := lines.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		must(t, err)
		switch {
		case strings.Contains(line, `resource="tokenreviews"`):
			tokens += v
		case strings.Contains(line, `resource="subjectaccessreviews"`):
			accesses += v
		}
	}
	must(t, lines.Err())
	return tokens, accesses
}

// forger signs tokens that look like the cluster's ServiceAccount tokens,
// with the cluster's issuer and the gateway's audience, but with a key
// the cluster does not have.
type forger struct {
	key    *ecdsa.PrivateKey
	issuer string
	n      atomic.Int64
}

func newForger(t *testing.T) *forger {
	t.Helper()
	hc, err := rest.HTTPClientFor(restConfig)
	must(t, err)
	resp, err := hc.Get(strings.TrimSuffix(restConfig.Host, "/") + "/.well-known/openid-configuration")
	must(t, err)
	defer func() { _ = resp.Body.Close() }()
	var doc struct{ Issuer string }
	must(t, json.NewDecoder(resp.Body).Decode(&doc))
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	return &forger{key: key, issuer: doc.Issuer}
}

// token is a forged token for namespace/name, under a key id never used
// before.
func (f *forger) token(t *testing.T, namespace, name string) string {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: f.key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", fmt.Sprint("forged-", f.n.Add(1))))
	must(t, err)
	now := time.Now()
	tok, err := josejwt.Signed(signer).Claims(josejwt.Claims{Issuer: f.issuer, Audience: josejwt.Audience{kubeauth.DefaultAudience},
		Subject: "system:serviceaccount:" + namespace + ":" + name, IssuedAt: josejwt.NewNumericDate(now), Expiry: josejwt.NewNumericDate(now.Add(time.Hour))}).
		Claims(map[string]any{"kubernetes.io": map[string]any{"namespace": namespace, "serviceaccount": map[string]any{"name": name, "uid": "x"}}}).
		Serialize()
	must(t, err)
	return tok
}

// allowEverything binds ServiceAccount ns/name to every command on every
// connection of ns.
func allowEverything(t *testing.T, ns, name string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "everything-" + name}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"sftpgate.dev"}, Resources: []string{"sftpconnections/commands"}, Verbs: []string{"*"},
	}}}
	must(t, k8s.Create(ctx, role))
	must(t, k8s.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "everything-" + name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}}))
}

// from is a client whose requests come from a loopback address of their
// own, such as 127.0.0.2: another client, for the gateway's shares.
func from(address string) *http.Client {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(address)}}
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{DialContext: dialer.DialContext}}
}

// postFrom is post with client.
func postFrom(t *testing.T, client *http.Client, url, token, command, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/"+command, strings.NewReader(body))
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	must(t, err)
	defer func() { _ = resp.Body.Close() }()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// TestForgedTokensCostNothing: tokens signed with a key the cluster does
// not have, for the gateway's audience and the cluster's issuer, are
// refused by the gateway itself: the API server reviews none of them, and
// while they flood in, valid ServiceAccount tokens (new ones, so each is
// reviewed) are served.
func TestForgedTokensCostNothing(t *testing.T) {
	f := newFixture(t)
	url := startGatewayWith(t, gateway.Options{Audience: kubeauth.DefaultAudience}) + "/" + f.slug
	allowEverything(t, f.ns, "app")
	forge := newForger(t)
	valid := make([]string, 20)
	for i := range valid {
		valid[i] = serviceAccountToken(t, f.ns, "app", kubeauth.DefaultAudience)
	}
	tokensBefore, _ := apiServerReviews(t)
	const forged = 2000
	var wg sync.WaitGroup
	var accepted atomic.Int64
	for w := range 8 {
		wg.Go(func() {
			for range forged / 8 {
				// Under the names of real ServiceAccounts, of this
				// namespace and of the flood's.
				tok := forge.token(t, f.ns, []string{"app", "flood"}[w%2])
				if status, out := postFrom(t, http.DefaultClient, url, tok, "stat", `{"path": "."}`); status != http.StatusUnauthorized {
					accepted.Add(1)
					t.Errorf("a forged token: %d %v, want 401", status, out)
				}
			}
		})
	}
	served := from("127.0.0.2")
	for _, tok := range valid {
		if status, out := postFrom(t, served, url, tok, "stat", `{"path": "."}`); status != http.StatusOK {
			t.Errorf("a valid token during the flood of forged ones: %d %v", status, out)
		}
	}
	wg.Wait()
	tokensAfter, _ := apiServerReviews(t)
	t.Logf("%d forged tokens refused; the API server reviewed %v tokens, for %d valid ones", forged-accepted.Load(), tokensAfter-tokensBefore, len(valid))
	if reviewed := tokensAfter - tokensBefore; reviewed > float64(len(valid)) {
		t.Errorf("the API server reviewed %v tokens for %d forged and %d valid ones, want at most one per valid one", reviewed, forged, len(valid))
	}
}

// TestATokenFloodLeavesOthersServed: valid tokens of one namespace, new
// one after another, take that namespace's share of the reviews and no
// more: past it they are answered 503 auth_unavailable, while another
// namespace's new token, from another client, is served.
func TestATokenFloodLeavesOthersServed(t *testing.T) {
	f := newFixture(t)
	url := startGatewayWith(t, gateway.Options{Audience: kubeauth.DefaultAudience}) + "/" + f.slug
	allowEverything(t, f.ns, "app")
	ctx := context.Background()
	floodNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gw-flood-"}}
	must(t, k8s.Create(ctx, floodNS))
	flood := make([]string, 200)
	for i := range flood {
		flood[i] = serviceAccountToken(t, floodNS.Name, "flooder", kubeauth.DefaultAudience)
	}
	var wg sync.WaitGroup
	var busy atomic.Int64
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < len(flood); i += 8 {
				status, out := postFrom(t, http.DefaultClient, url, flood[i], "stat", `{"path": "."}`)
				switch {
				case status == http.StatusServiceUnavailable && errorCode(out) == "auth_unavailable":
					busy.Add(1)
				case status != http.StatusNotFound: // another namespace's connection
					t.Errorf("a token of the flood: %d %v", status, out)
				}
			}
		})
	}
	served := from("127.0.0.3")
	for range 5 {
		tok := serviceAccountToken(t, f.ns, "app", kubeauth.DefaultAudience)
		if status, out := postFrom(t, served, url, tok, "stat", `{"path": "."}`); status != http.StatusOK {
			t.Errorf("another namespace's new token during the flood: %d %v", status, out)
		}
	}
	wg.Wait()
	t.Logf("%d of the flood's %d tokens were refused as busy", busy.Load(), len(flood))
	if busy.Load() == 0 {
		t.Errorf("none of the flood's %d tokens was refused: the namespace's share is not bounded", len(flood))
	}
}

// TestAccessReviewsAreBounded: one ServiceAccount naming 500 slugs at once
// (its own connection's and made-up ones, which cost the same review) has
// RBAC asked at most its share; the rest are answered 503
// auth_unavailable at once.
func TestAccessReviewsAreBounded(t *testing.T) {
	f := newFixture(t)
	base := startGatewayWith(t, gateway.Options{Audience: kubeauth.DefaultAudience})
	allowEverything(t, f.ns, "app")
	tok := serviceAccountToken(t, f.ns, "app", kubeauth.DefaultAudience)
	if status, out := postFrom(t, http.DefaultClient, base+"/"+f.slug, tok, "stat", `{"path": "."}`); status != http.StatusOK {
		t.Fatalf("the ServiceAccount on its connection: %d %v", status, out)
	}
	_, before := apiServerReviews(t)
	start := time.Now()
	var wg sync.WaitGroup
	var busy, notFound atomic.Int64
	for i := range 500 {
		wg.Go(func() {
			slug := fmt.Sprintf("%s-%d", f.slug, i)
			if i == 0 {
				slug = f.slug
			}
			status, out := postFrom(t, http.DefaultClient, base+"/"+slug, tok, "stat", `{"path": "."}`)
			switch {
			case status == http.StatusOK && i == 0:
			case status == http.StatusServiceUnavailable && errorCode(out) == "auth_unavailable":
				busy.Add(1)
			case status == http.StatusNotFound && errorCode(out) == "connection_not_found":
				notFound.Add(1)
			default:
				t.Errorf("slug %d: %d %v", i, status, out)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	_, after := apiServerReviews(t)
	t.Logf("500 slugs at once: RBAC asked %v times in %v; %d refused as busy, %d not found", after-before, elapsed, busy.Load(), notFound.Load())
	// A ServiceAccount's share: 20 at once, then 10 a second.
	if share := 20 + 10*elapsed.Seconds(); after-before > share {
		t.Errorf("RBAC was asked %v times in %v for 500 slugs, want at most the ServiceAccount's share, %.0f", after-before, elapsed, share)
	}
	if busy.Load() == 0 || notFound.Load() == 0 {
		t.Errorf("%d refused as busy, %d not found: want both", busy.Load(), notFound.Load())
	}
}

// TestSlugsOfOtherNamespacesAreHidden: to a ServiceAccount of another
// namespace, an existing connection it may not use and a slug nobody
// serves look the same: 404, after one review each.
func TestSlugsOfOtherNamespacesAreHidden(t *testing.T) {
	f := newFixture(t)
	base := startGatewayWith(t, gateway.Options{Audience: kubeauth.DefaultAudience})
	ctx := context.Background()
	otherNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gw-other-"}}
	must(t, k8s.Create(ctx, otherNS))
	tok := serviceAccountToken(t, otherNS.Name, "stranger", kubeauth.DefaultAudience)
	for _, slug := range []string{f.slug, f.slug + "-none"} {
		_, before := apiServerReviews(t)
		for range 3 {
			if status, out := postFrom(t, http.DefaultClient, base+"/"+slug, tok, "stat", `{"path": "."}`); status != http.StatusNotFound || errorCode(out) != "connection_not_found" {
				t.Errorf("%s: %d %v, want 404 connection_not_found", slug, status, out)
			}
		}
		if _, after := apiServerReviews(t); after-before != 1 {
			t.Errorf("%s cost %v access reviews for three requests, want one", slug, after-before)
		}
	}
}
