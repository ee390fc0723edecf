package webui_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api"
	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testwebui"
	"github.com/sftpgate/sftpgate/hack/kustomize"
	"github.com/sftpgate/sftpgate/webui"
	"github.com/sftpgate/sftpgate/webui/accounts"
)

// uiNamespace is where the UI runs (it keeps the accounts in
// testwebui.AccountsNamespace), as its service account.
const (
	uiNamespace      = "sftpgate-system"
	uiServiceAccount = "sftpgate-webui"
)

// serviceAccountClient applies config/default's namespace, service
// accounts, roles, bindings and admission policy (not its workloads), and
// returns a client that authenticates as the UI's service account (the
// rights the UI has in production), with its config.
func serviceAccountClient(ctx context.Context, admin *rest.Config) (client.Client, *rest.Config, error) {
	objects, err := kustomize.Render("config/default")
	if err != nil {
		return nil, nil, err
	}
	for _, obj := range objects {
		switch obj.GetKind() {
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
			"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
		default:
			continue // CRDs come with envtest; workloads and their network cannot run here
		}
		// A namespace may exist already (sftpgate's, where the manager
		// keeps its slug reservations, where one runs).
		if err := k8s.Create(ctx, obj); err != nil && (obj.GetKind() != "Namespace" || !apierrors.IsAlreadyExists(err)) {
			return nil, nil, fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	c, cfg, err := clientAs(ctx, admin, uiNamespace, uiServiceAccount)
	if err != nil {
		return nil, nil, err
	}
	// The API server loads admission policies in the background: wait until
	// the bindings policy refuses the UI a binding outside account
	// namespaces (RBAC alone would allow it).
	// (TestMain's: no test to fail, hence Wait.)
	if err := testkit.Wait(time.Minute, "the bindings admission policy takes effect", func() (bool, string) {
		return c.Create(ctx, bindTo("default", webui.TenantRole), client.DryRunAll) != nil, ""
	}); err != nil {
		return nil, nil, err
	}
	return c, cfg, nil
}

// clientAs returns a client that authenticates as a service account, with
// a token from the API server, and its config.
func clientAs(ctx context.Context, admin *rest.Config, namespace, name string) (client.Client, *rest.Config, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	token := &authenticationv1.TokenRequest{}
	if err := k8s.SubResource("token").Create(ctx, sa, token); err != nil {
		return nil, nil, err
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = token.Status.Token
	c, err := client.New(cfg, client.Options{Scheme: api.Scheme()})
	return c, cfg, err
}

// TestUIRightsAreNarrow: outside account namespaces (and its own), the UI's
// service account can read nothing.
func TestUIRightsAreNarrow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	must(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "not-the-uis"}}))
	// sftpgate's own namespace holds the session key, TLS Secrets and the
	// manager's leases: none of the UI's business.
	must(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: uiNamespace, Name: "session-key"}}))
	everyone := []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:authenticated"}}
	for what, err := range map[string]error{
		"get a Secret in default":             uiKube.Get(ctx, client.ObjectKey{Namespace: "default", Name: "not-the-uis"}, &corev1.Secret{}),
		"get a Secret in sftpgate-system":     uiKube.Get(ctx, client.ObjectKey{Namespace: uiNamespace, Name: "session-key"}, &corev1.Secret{}),
		"list Secrets in sftpgate-system":     uiKube.List(ctx, &corev1.SecretList{}, client.InNamespace(uiNamespace)),
		"list the account Secrets":            uiKube.List(ctx, &corev1.SecretList{}, client.InNamespace(testwebui.AccountsNamespace)),
		"list SftpConnections everywhere":     uiKube.List(ctx, &v1alpha1.SftpConnectionList{}),
		"delete a namespace":                  uiKube.Delete(ctx, namespace("default")),
		"bind cluster-admin":                  uiKube.Create(ctx, bindTo("default", "cluster-admin")),
		"bind its tenant role in kube-system": uiKube.Create(ctx, bindTo("kube-system", webui.TenantRole)),
		"bind its tenant role in default":     uiKube.Create(ctx, bindTo("default", webui.TenantRole)),
		"grant its tenant role to everyone in an account namespace": uiKube.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: accountNamespace(t), Name: "escalate"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: webui.TenantRole},
			Subjects:   everyone}),
		// RBAC lets it bind a role whose rights it holds: its own here.
		"grant everyone its rights on the account Secrets": uiKube.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: testwebui.AccountsNamespace, Name: "escalate"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "sftpgate-webui-accounts"},
			Subjects:   everyone}),
	} {
		if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			t.Errorf("the UI may %s: %v", what, err)
		}
	}
}

// TestOnlyTheManagerWritesStatus: a tenant granted every right in its
// namespace (resources "*" takes in status subresources) still cannot
// write the status of its connections and keys, where the slug a
// connection serves and the token hash a key has are recorded.
func TestOnlyTheManagerWritesStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := accountNamespace(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"}}
	must(t, k8s.Create(ctx, sa))
	must(t, k8s.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "everything"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}}))
	must(t, k8s.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "everything"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "everything"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "owner"}}}))
	owner, _, err := clientAs(ctx, uiConfig, ns, "owner")
	must(t, err)

	key := &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged"},
		Spec: v1alpha1.ApiKeySpec{Token: v1alpha1.TokenSource{SHA256: strings.Repeat("a", 64)}}}
	must(t, owner.Create(ctx, key))
	forge := func(obj client.Object, edit func()) error {
		patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
		edit()
		return owner.Status().Patch(ctx, obj, patch)
	}
	// The policy may load after the test starts: probe it without writing.
	testkit.EventuallyFound(t, "the status policy takes effect", func() (bool, string) {
		probe := key.DeepCopy()
		patch := client.MergeFrom(key)
		probe.Status.TokenSHA256 = strings.Repeat("b", 64)
		err := owner.Status().Patch(ctx, probe, patch, client.DryRunAll)
		return apierrors.IsForbidden(err), fmt.Sprint(err)
	})
	if err := forge(key, func() { key.Status.TokenSHA256 = strings.Repeat("b", 64) }); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), "only the sftpgate manager writes the status") {
		t.Errorf("the tenant wrote its key's status: %v", err)
	}
	conn := &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged"},
		Spec: v1alpha1.SftpConnectionSpec{Host: "sftp.example.com", Username: "u",
			Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.LocalSecretReference{Name: "none"}},
			HostKey:     v1alpha1.HostKeyTrust{InsecureSkipVerify: true}}}
	must(t, owner.Create(ctx, conn))
	if err := forge(conn, func() { conn.Status.Slug = "someone-elses" }); !apierrors.IsForbidden(err) {
		t.Errorf("the tenant wrote its connection's status: %v", err)
	}
	// The manager's service account, as it runs in the cluster, may.
	manager, _, err := clientAs(ctx, uiConfig, uiNamespace, "sftpgate-manager")
	must(t, err)
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(key), key))
	patch := client.MergeFrom(key.DeepCopy())
	key.Status.KeyID = "by-the-manager"
	if err := manager.Status().Patch(ctx, key, patch, client.DryRunAll); err != nil {
		t.Errorf("the manager's service account may not write status: %v", err)
	}
	// The gateway's may write a key's last use, and nothing else of it.
	gateway, _, err := clientAs(ctx, uiConfig, uiNamespace, "sftpgate-gateway")
	must(t, err)
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(key), key))
	lastUse := []byte(`{"status":{"lastUsedTime":"2026-11-25T10:00:00Z"}}`)
	if err := gateway.Status().Patch(ctx, key, client.RawPatch(types.MergePatchType, lastUse), client.DryRunAll); err != nil {
		t.Errorf("the gateway's service account may not write a key's last use: %v", err)
	}
	for field, value := range map[string]string{"tokenSHA256": strings.Repeat("c", 64), "keyID": "forged", "secretName": "elsewhere"} {
		forged := []byte(`{"status":{"lastUsedTime":"2026-11-25T10:00:00Z","` + field + `":"` + value + `"}}`)
		if err := gateway.Status().Patch(ctx, key, client.RawPatch(types.MergePatchType, forged), client.DryRunAll); !apierrors.IsForbidden(err) {
			t.Errorf("the gateway's service account wrote a key's %s: %v", field, err)
		}
	}
	if err := gateway.Status().Patch(ctx, conn, client.RawPatch(types.MergePatchType, []byte(`{"status":{"slug":"forged"}}`)), client.DryRunAll); !apierrors.IsForbidden(err) {
		t.Errorf("the gateway's service account wrote a connection's status: %v", err)
	}
}

// accountNamespace signs an account up and returns its namespace, where
// the UI may bind its tenant role.
func accountNamespace(t *testing.T) string {
	t.Helper()
	c := newClient(t)
	c.SignUp(t)
	// The namespace of this account: another test's may have its quota
	// spent.
	sum := sha256.Sum256([]byte(c.Email))
	var list corev1.NamespaceList
	must(t, k8s.List(context.Background(), &list, client.MatchingLabels{accounts.LabelAccount: "account-" + hex.EncodeToString(sum[:12])}))
	if len(list.Items) != 1 {
		t.Fatalf("%d namespaces for the account", len(list.Items))
	}
	return list.Items[0].Name
}

// bindTo is a RoleBinding of a ClusterRole to the UI in namespace.
func bindTo(namespace, role string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "escalate"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: uiNamespace, Name: uiServiceAccount}}}
}
