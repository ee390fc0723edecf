package manifests

import (
	"context"
	"fmt"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api"
	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
)

// TestComponentsTouchOnlyTheirOwnObjects: in sftpgate's namespace, which
// the components share, each may write only its own ConfigMaps and
// Leases (the system-objects policy), though RBAC lets it write any: the
// gateway its upload records and audit records, the web UI its audit
// records, the worker its states, Leases and audit records (and remove
// expired upload records and delivered audit records), the manager its
// leader election and reservations.
func TestComponentsTouchOnlyTheirOwnObjects(t *testing.T) {
	env, admin, err := testcluster.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	ctx := context.Background()
	kinds := map[string]bool{"Namespace": true, "ServiceAccount": true, "Role": true, "RoleBinding": true, "ClusterRole": true,
		"ClusterRoleBinding": true, "ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true}
	for _, u := range render(t) {
		if !kinds[u.GetKind()] {
			continue
		}
		u.SetManagedFields(nil)
		if err := admin.Patch(ctx, u, client.Apply, client.FieldOwner("sftpgate-test"), client.ForceOwnership); err != nil { //nolint:staticcheck // client.Apply with unstructured objects
			t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	const ns = "sftpgate-system"
	as := func(component string) client.Client {
		cfg := rest.CopyConfig(env.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":sftpgate-" + component}
		c, err := client.New(cfg, client.Options{Scheme: api.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	configMap := func(name string) client.Object {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	lease := func(name string) client.Object {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	// Objects another component made, for deletes and updates.
	for _, o := range []client.Object{configMap("sftpwatch-victim"), configMap("sftpgate-upload-victim"), lease("manager.sftpgate.dev"),
		configMap("sftpgate-audit-gateway-victim"), configMap("sftpgate-audit-worker-victim")} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	gateway, worker, manager, webui := as("gateway"), as("worker"), as("manager"), as("webui")
	denied := func(err error) bool {
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "another component's")
	}

	// The policy takes effect a moment after it is made, for each
	// component's rules: wait until both the gateway's and the worker's
	// are refused.
	for _, probe := range []struct {
		who  client.Client
		name string
	}{{gateway, "sftpwatch-probe"}, {worker, "sftpgate-upload-probe"}} {
		testkit.EventuallyFound(t, probe.name+" is refused", func() (bool, string) {
			err := probe.who.Create(ctx, configMap(probe.name))
			if err == nil {
				_ = admin.Delete(ctx, configMap(probe.name))
			}
			return denied(err), fmt.Sprint(err)
		})
	}
	for _, tc := range []struct {
		name    string
		do      func() error
		allowed bool
	}{
		{"the gateway makes an upload record", func() error { return gateway.Create(ctx, configMap("sftpgate-upload-mine")) }, true},
		{"the gateway makes a watch state", func() error { return gateway.Create(ctx, configMap("sftpwatch-forged")) }, false},
		{"the gateway removes a watch state", func() error { return gateway.Delete(ctx, configMap("sftpwatch-victim")) }, false},
		{"the worker makes a transfer plan", func() error { return worker.Create(ctx, configMap("transfer-mine")) }, true},
		{"the worker makes a watch's Lease", func() error { return worker.Create(ctx, lease("sftpwatch-mine")) }, true},
		{"the worker renews a replica's membership", func() error { return worker.Create(ctx, lease("worker-member-mine")) }, true},
		{"the worker makes an upload record", func() error { return worker.Create(ctx, configMap("sftpgate-upload-forged")) }, false},
		{"the worker removes the manager's Lease", func() error { return worker.Delete(ctx, lease("manager.sftpgate.dev")) }, false},
		{"the worker takes a slug's reservation", func() error { return worker.Create(ctx, lease("slug-stolen")) }, false},
		{"the worker removes an expired upload record", func() error { return worker.Delete(ctx, configMap("sftpgate-upload-victim")) }, true},
		{"the gateway stores audit records", func() error { return gateway.Create(ctx, configMap("sftpgate-audit-gateway-mine")) }, true},
		{"the gateway stores records as the worker's", func() error { return gateway.Create(ctx, configMap("sftpgate-audit-worker-forged")) }, false},
		{"the gateway removes the worker's audit records", func() error { return gateway.Delete(ctx, configMap("sftpgate-audit-worker-victim")) }, false},
		{"the web UI stores audit records", func() error { return webui.Create(ctx, configMap("sftpgate-audit-webui-mine")) }, true},
		{"the web UI makes a watch state", func() error { return webui.Create(ctx, configMap("sftpwatch-forged-by-ui")) }, false},
		{"the worker stores audit records", func() error { return worker.Create(ctx, configMap("sftpgate-audit-worker-mine")) }, true},
		{"the worker removes delivered audit records", func() error { return worker.Delete(ctx, configMap("sftpgate-audit-gateway-victim")) }, true},
		{"the manager reserves a slug", func() error { return manager.Create(ctx, lease("slug-mine")) }, true},
		{"the manager removes a watch's Lease", func() error { return manager.Delete(ctx, lease("sftpwatch-mine")) }, false},
		{"the manager makes a watch's Lease", func() error { return manager.Create(ctx, lease("sftpwatch-forged")) }, false},
	} {
		err := tc.do()
		switch {
		case tc.allowed && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case !tc.allowed && !denied(err):
			t.Errorf("%s: %v, want the policy's refusal", tc.name, err)
		}
	}
	// Outside sftpgate's namespace the policy does not apply, even while
	// a component's service account, its parameter, is missing.
	if err := admin.Delete(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sftpgate-worker"}}); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "someone-elses"}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "someone-elses"}},
	} {
		if err := admin.Create(ctx, o); err != nil {
			t.Errorf("a %T in another namespace, with the worker's service account gone: %v", o, err)
		}
	}
}
