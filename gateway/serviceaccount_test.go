package gateway_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sftpgate/sftpgate/gateway"
	"github.com/sftpgate/sftpgate/gateway/kubeauth"
)

// TestServiceAccounts: a pod's projected ServiceAccount token, issued by
// the API server's TokenRequest API, works where RBAC allows it and only
// there, and a token that does not verify is 401.
func TestServiceAccounts(t *testing.T) {
	f := newFixture(t)
	url := startGatewayWith(t, gateway.Options{Audience: kubeauth.DefaultAudience, AuthorizationCacheTTL: time.Second}) + "/" + f.slug
	ctx := context.Background()
	otherNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gw-sa-"}}
	must(t, k8s.Create(ctx, otherNS))
	other := otherNS.Name
	app, stranger := serviceAccountToken(t, f.ns, "app", kubeauth.DefaultAudience), serviceAccountToken(t, other, "stranger", kubeauth.DefaultAudience)
	write := `{"path": "from-app.txt", "file": {"text": "hello"}}`
	expect := func(what, token, command, body string, status int, code string) {
		t.Helper()
		got, _, out := post(t, ctx, url, token, command, body)
		if got != status || (code != "" && errorCode(out) != code) {
			t.Errorf("%s: %d %v, want %d %s", what, got, out, status, code)
		}
	}

	expect("no RoleBinding", app, "write", write, http.StatusForbidden, "forbidden")
	expect("another namespace's ServiceAccount, no RoleBinding", stranger, "stat", `{"path": "."}`, http.StatusNotFound, "connection_not_found")
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "box-writer"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"sftpgate.dev"}, Resources: []string{"sftpconnections/commands"}, ResourceNames: []string{"box"},
		Verbs: []string{"write", "read"},
	}}}
	must(t, k8s.Create(ctx, role))
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "box-writers"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: f.ns, Name: "app"}, {Kind: rbacv1.ServiceAccountKind, Namespace: other, Name: "stranger"}}}
	must(t, k8s.Create(ctx, binding))
	// The refusals above are cached for a second.
	eventually(t, "the RoleBinding allows the write", func() bool {
		status, _, _ := post(t, ctx, url, app, "write", write)
		return status == http.StatusOK
	})
	expect("a command the Role does not grant", app, "stat", `{"path": "."}`, http.StatusForbidden, "forbidden")
	expect("another namespace's ServiceAccount, bound", stranger, "read", `{"path": "from-app.txt"}`, http.StatusOK, "")
	expect("an API key, on the same gateway", f.token, "stat", `{"path": "."}`, http.StatusOK, "")

	expect("a token for another audience", serviceAccountToken(t, f.ns, "app", "elsewhere.example"), "read", `{"path": "from-app.txt"}`,
		http.StatusUnauthorized, "unauthorized")
	// The API server issues tokens for 10 minutes at least: an expired
	// one is refused by its exp claim, before any review.
	expect("an expired token", jwt(time.Now().Add(-time.Minute)), "read", `{"path": "from-app.txt"}`, http.StatusUnauthorized, "unauthorized")
	// A token bound to an object (as a pod's is to the pod) is revoked
	// with it.
	holder := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "token-holder"}}
	must(t, k8s.Create(ctx, holder))
	bound := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{kubeauth.DefaultAudience},
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: holder.Name, UID: holder.UID}}}
	must(t, k8s.SubResource("token").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "app"}}, bound))
	must(t, k8s.Delete(ctx, holder))
	// The API server checks the object in its own cache, which sees the
	// deletion a moment later under load. Until it does, its review
	// still trusts the token, and the gateway would keep that answer
	// for its tokenTTL: wait for the API server's refusal first.
	eventually(t, "the API server refuses the token bound to a deleted object", func() bool {
		tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: bound.Status.Token, Audiences: []string{kubeauth.DefaultAudience}}}
		must(t, k8s.Create(ctx, tr))
		return !tr.Status.Authenticated
	})
	expect("a token bound to a deleted object", bound.Status.Token, "read", `{"path": "from-app.txt"}`, http.StatusUnauthorized, "unauthorized")
	expect("a token of no issuer", jwt(time.Now().Add(time.Hour)), "read", `{"path": "from-app.txt"}`, http.StatusUnauthorized, "unauthorized")

	must(t, k8s.Delete(ctx, binding))
	eventually(t, "the removed RoleBinding stops the write", func() bool {
		status, _, _ := post(t, ctx, url, app, "write", write)
		return status == http.StatusForbidden
	})
}

// serviceAccountToken makes ServiceAccount ns/name, if it is not there
// yet, and has the API server issue it a token for audience.
func serviceAccountToken(t *testing.T, ns, name, audience string) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := k8s.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](600)}}
	must(t, k8s.SubResource("token").Create(ctx, sa, tr))
	return tr.Status.Token
}

// jwt is a token of a JWT's shape, expiring at exp, that no one issued.
func jwt(exp time.Time) string {
	part := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	return part(`{"alg":"RS256"}`) + "." + part(fmt.Sprintf(`{"exp":%d,"aud":["sftpgate.dev"]}`, exp.Unix())) + "." + part("signature")
}
