package webui_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/controllers"
	"github.com/sftpgate/sftpgate/webui"
)

const (
	uiNamespace      = "sftpgate-system"
	uiServiceAccount = "sftpgate-webui"
)

// serviceAccountClient creates the UI's namespace, service account and the
// roles of config/rbac/webui bound to it, and returns a client that
// authenticates as that service account.
func serviceAccountClient(ctx context.Context, admin *rest.Config) (client.Client, error) {
	objects := []client.Object{
		namespace(uiNamespace),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: uiNamespace, Name: uiServiceAccount}},
	}
	files, err := filepath.Glob("../config/rbac/webui/*.yaml")
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		for {
			var u unstructured.Unstructured
			if err := decoder.Decode(&u.Object); err != nil {
				break
			}
			if len(u.Object) > 0 {
				objects = append(objects, &u)
			}
		}
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: uiNamespace, Name: uiServiceAccount}}
	objects = append(objects,
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "webui-rolebinding"}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "webui-role"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: uiNamespace, Name: "webui-rolebinding"}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "webui-role"}},
	)
	for _, obj := range objects {
		if err := k8s.Create(ctx, obj); err != nil {
			return nil, err
		}
	}
	// The API server loads admission policies in the background: wait until
	// the tenant-binding policy refuses a binding outside account
	// namespaces.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		err := k8s.Create(ctx, bindTo("default", webui.TenantRole), client.DryRunAll)
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, errors.New("the tenant-binding admission policy does not take effect")
		}
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: uiNamespace, Name: uiServiceAccount}}
	token := &authenticationv1.TokenRequest{}
	if err := k8s.SubResource("token").Create(ctx, sa, token); err != nil {
		return nil, err
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = token.Status.Token
	return client.New(cfg, client.Options{Scheme: controllers.Scheme()})
}

// TestUIRightsAreNarrow: outside account namespaces (and its own), the UI's
// service account can read nothing.
func TestUIRightsAreNarrow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	must(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "not-the-uis"}}))
	for what, err := range map[string]error{
		"get a Secret in default":             uiKube.Get(ctx, client.ObjectKey{Namespace: "default", Name: "not-the-uis"}, &corev1.Secret{}),
		"list Secrets in its namespace":       uiKube.List(ctx, &corev1.SecretList{}, client.InNamespace(uiNamespace)),
		"list SftpConnections everywhere":     uiKube.List(ctx, &v1alpha1.SftpConnectionList{}),
		"delete a namespace":                  uiKube.Delete(ctx, namespace("default")),
		"bind cluster-admin":                  uiKube.Create(ctx, bindTo("default", "cluster-admin")),
		"bind its tenant role in kube-system": uiKube.Create(ctx, bindTo("kube-system", webui.TenantRole)),
		"bind its tenant role in default":     uiKube.Create(ctx, bindTo("default", webui.TenantRole)),
	} {
		if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			t.Errorf("the UI may %s: %v", what, err)
		}
	}
}

// bindTo is a RoleBinding of a ClusterRole to the UI in namespace.
func bindTo(namespace, role string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "escalate"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: uiNamespace, Name: uiServiceAccount}}}
}
