// Package manifests tests config/: what `kubectl apply -k config/default`
// installs, rendered with kustomize and checked against a real API server.
package manifests

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/kustomize"
)

// renderDefault renders config/default once for all the tests.
var renderDefault = sync.OnceValues(func() ([]*unstructured.Unstructured, error) {
	return kustomize.Render("config/default")
})

// render is config/default's objects, a copy of its own for each caller.
func render(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	objects, err := renderDefault()
	if err != nil {
		t.Fatal(err)
	}
	copies := make([]*unstructured.Unstructured, len(objects))
	for i, u := range objects {
		copies[i] = u.DeepCopy()
	}
	return copies
}

func convert[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// TestPolicyParametersAreTheServiceAccounts: each admission policy's
// parameter is the service account of the workload it trusts, as
// config/default names and places it (kustomize's prefix and namespace do
// not reach a paramRef; its replacements do).
func TestPolicyParametersAreTheServiceAccounts(t *testing.T) {
	objects := render(t)
	accounts := map[string]string{} // by the component's name
	for _, u := range objects {
		if u.GetKind() == "Deployment" {
			d := convert[appsv1.Deployment](t, u)
			accounts[d.Labels["app.kubernetes.io/component"]] = d.Namespace + "/" + d.Spec.Template.Spec.ServiceAccountName
		}
	}
	want := map[string]string{"sftpgate-webui-bindings": accounts["webui"], "sftpgate-status-writers": accounts["manager"],
		"sftpgate-system-objects-gateway": accounts["gateway"], "sftpgate-system-objects-worker": accounts["worker"],
		"sftpgate-system-objects-manager": accounts["manager"], "sftpgate-system-objects-webui": accounts["webui"]}
	for _, u := range objects {
		if u.GetKind() != "ValidatingAdmissionPolicyBinding" {
			continue
		}
		b := convert[admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, u)
		if ref := b.Spec.ParamRef; ref != nil {
			if got := ref.Namespace + "/" + ref.Name; got != want[b.Name] || got == "/" {
				t.Errorf("%s: the parameter is %s, want %q", b.Name, got, want[b.Name])
			}
			delete(want, b.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("no binding with a parameter: %v", want)
	}
}

// TestAutoscaledDeploymentsLeaveReplicasAlone: a Deployment that a
// HorizontalPodAutoscaler scales sets no replicas, which every apply (and
// Argo CD sync) would otherwise reset.
func TestAutoscaledDeploymentsLeaveReplicasAlone(t *testing.T) {
	objects := render(t)
	scaled := 0
	for _, u := range objects {
		if u.GetKind() != "HorizontalPodAutoscaler" {
			continue
		}
		target, _, _ := unstructured.NestedString(u.Object, "spec", "scaleTargetRef", "name")
		for _, d := range objects {
			if d.GetKind() == "Deployment" && d.GetName() == target {
				scaled++
				if _, set, _ := unstructured.NestedFieldNoCopy(d.Object, "spec", "replicas"); set {
					t.Errorf("Deployment %s sets replicas, which its autoscaler %s owns", target, u.GetName())
				}
			}
		}
	}
	if scaled == 0 {
		t.Error("no Deployment is autoscaled: the gateway's should be")
	}
}

// TestWorkloadsAreLockedDown: every Deployment runs the one image, as
// non-root, read-only, without privileges, with probes and resources.
func TestWorkloadsAreLockedDown(t *testing.T) {
	components := map[string]bool{}
	for _, u := range render(t) {
		if u.GetKind() != "Deployment" {
			continue
		}
		d := convert[appsv1.Deployment](t, u)
		pod := d.Spec.Template.Spec
		if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot ||
			pod.SecurityContext.SeccompProfile == nil || pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: the pod must run as non-root with the RuntimeDefault seccomp profile", d.Name)
		}
		if !strings.HasPrefix(pod.ServiceAccountName, "sftpgate-") {
			t.Errorf("%s: service account %q", d.Name, pod.ServiceAccountName)
		}
		for _, c := range pod.Containers {
			sc := c.SecurityContext
			if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
				sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
				t.Errorf("%s/%s: no privilege escalation, a read-only root and all capabilities dropped", d.Name, c.Name)
			}
			if !strings.HasPrefix(c.Image, "ghcr.io/sftpgate/sftpgate:") {
				t.Errorf("%s/%s: image %q", d.Name, c.Name, c.Image)
			}
			if c.LivenessProbe == nil || c.ReadinessProbe == nil {
				t.Errorf("%s/%s: liveness and readiness probes", d.Name, c.Name)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("%s/%s: CPU and memory requests and a memory limit", d.Name, c.Name)
			}
			if len(c.Args) > 0 {
				components[c.Args[0]] = true
			}
		}
	}
	for _, want := range []string{"manager", "gateway", "webui", "worker"} {
		if !components[want] {
			t.Errorf("no Deployment runs %q", want)
		}
	}
}

// rule is one thing a component may do: verb on group/resource, in a
// namespace ("" is cluster-wide), limited to names (empty: any).
type rule struct {
	verb, group, resource, namespace, names string
}

// allowed is everything each component may do, and no more: namespace
// ("*" is cluster-wide), API group ("core" is ""), resources, verbs, and
// resource names if limited to some.
var allowed = map[string][]string{
	"sftpgate-manager": {
		"* core secrets create,delete,get,list,update,watch",
		"* events.k8s.io events create,patch",
		"* sftpgate.dev apikeys,ftpconnections,objectstores,sftpconnections,sharelinks get,list,watch",
		"* sftpgate.dev apikeys/finalizers update",
		"* sftpgate.dev apikeys/status,ftpconnections/status,objectstores/status,sftpconnections/status,sharelinks/status,transferschedules/status get,patch,update",
		"* sftpgate.dev transferschedules get,list,watch",
		"* sftpgate.dev transfers create,delete,get,list,watch",
		"* core namespaces get,list,watch",
		"sftpgate-system coordination.k8s.io leases create,delete,get,list,patch,update,watch",
		"sftpgate-system core events create,patch",
	},
	"sftpgate-gateway": {
		"* authentication.k8s.io tokenreviews create",
		"* authorization.k8s.io subjectaccessreviews create",
		"* core secrets get",
		"* sftpgate.dev apikeys,ftpconnections,objectstores,sftpconnections get,list,watch",
		"* sftpgate.dev apikeys/status patch",
		"* core namespaces get,list,watch",
		"sftpgate-system core configmaps create,delete,get,list,update",
	},
	"sftpgate-worker": {
		"* core secrets,services get",
		"* events.k8s.io events create,patch",
		"* eventing.knative.dev brokers get",
		"* messaging.knative.dev channels get",
		"* serving.knative.dev services get",
		"* sftpgate.dev auditsinks,fileexpectations,ftpconnections,holidaycalendars,objectstores,sftpconnections,sftpwatches,transfers get,list,watch",
		"* sftpgate.dev auditsinks/status,fileexpectations/status,sftpwatches/status,transfers/status patch",
		"* sftpgate.dev transfers create",
		"* core namespaces get,list,watch",
		"sftpgate-system coordination.k8s.io leases create,delete,get,list,update,watch",
		"sftpgate-system core configmaps create,delete,deletecollection,get,list,patch,update,watch",
	},
	"sftpgate-webui": {
		"* core namespaces create,list",
		"* rbac.authorization.k8s.io rolebindings create",
		"* rbac.authorization.k8s.io clusterroles bind sftpgate-team-admin,sftpgate-team-editor,sftpgate-team-viewer,sftpgate-webui-tenant",
		"* authorization.k8s.io subjectaccessreviews create",
		"sftpgate-accounts core secrets create,delete,get,update",
		"sftpgate-accounts core configmaps create,delete,get,list,update",
		"sftpgate-system core configmaps create,get,list",
	},
}

// expand turns the table's lines into rules.
func expand(lines []string) []rule {
	var out []rule
	for _, line := range lines {
		f := append(strings.Fields(line), "")
		ns, group := f[0], f[1]
		if ns == "*" {
			ns = ""
		}
		if group == "core" {
			group = ""
		}
		for _, res := range strings.Split(f[2], ",") {
			for _, verb := range strings.Split(f[3], ",") {
				out = append(out, rule{verb: verb, group: group, resource: res, namespace: ns, names: f[4]})
			}
		}
	}
	return out
}

// TestRBACAllowsNoMore: the rules bound to each service account are
// exactly the table's.
func TestRBACAllowsNoMore(t *testing.T) {
	objects := render(t)
	roles := map[string][]rbacv1.PolicyRule{} // "namespace/name" of Roles, "/name" of ClusterRoles
	for _, u := range objects {
		switch u.GetKind() {
		case "ClusterRole":
			roles["/"+u.GetName()] = convert[rbacv1.ClusterRole](t, u).Rules
		case "Role":
			roles[u.GetNamespace()+"/"+u.GetName()] = convert[rbacv1.Role](t, u).Rules
		}
	}
	granted := map[string][]rule{}
	for _, u := range objects {
		var subjects []rbacv1.Subject
		var ref rbacv1.RoleRef
		ns := u.GetNamespace()
		switch u.GetKind() {
		case "ClusterRoleBinding":
			b := convert[rbacv1.ClusterRoleBinding](t, u)
			subjects, ref, ns = b.Subjects, b.RoleRef, ""
		case "RoleBinding":
			b := convert[rbacv1.RoleBinding](t, u)
			subjects, ref = b.Subjects, b.RoleRef
		default:
			continue
		}
		key := ns + "/" + ref.Name
		if ref.Kind == "ClusterRole" {
			key = "/" + ref.Name
		}
		rules, ok := roles[key]
		if !ok {
			t.Errorf("%s %s binds %s %s, which config/default does not have", u.GetKind(), u.GetName(), ref.Kind, ref.Name)
		}
		for _, s := range subjects {
			for _, pr := range rules {
				for _, g := range pr.APIGroups {
					for _, res := range pr.Resources {
						for _, v := range pr.Verbs {
							granted[s.Name] = append(granted[s.Name], rule{verb: v, group: g, resource: res, namespace: ns,
								names: strings.Join(pr.ResourceNames, ",")})
						}
					}
				}
			}
		}
	}
	for account, lines := range allowed {
		want := expand(lines)
		for _, r := range granted[account] {
			if !slices.Contains(want, r) {
				t.Errorf("%s may %+v, which the table does not allow", account, r)
			}
		}
		for _, r := range want {
			if !slices.Contains(granted[account], r) {
				t.Errorf("%s may not %+v, which the table says it needs", account, r)
			}
		}
	}
	for account := range granted {
		if _, ok := allowed[account]; !ok {
			t.Errorf("%s is granted rights the table does not list", account)
		}
	}
}

// TestAppliesToTheAPIServer: every object config/default renders, and
// every sample, is valid for a real API server (server-side apply, dry run
// where it could not run here); invalid variants of the samples are
// refused with a message.
func TestAppliesToTheAPIServer(t *testing.T) {
	env, k8s, err := testcluster.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	ctx := context.Background()
	// apply returns the API server's answer.
	apply := func(u *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, error) {
		u = u.DeepCopy() // the answer is written into it
		opts := []client.PatchOption{client.FieldOwner("sftpgate-test"), client.ForceOwnership}
		if dryRun {
			opts = append(opts, client.DryRunAll)
		}
		u.SetManagedFields(nil)
		return u, k8s.Patch(ctx, u, client.Apply, opts...) //nolint:staticcheck // client.Apply with unstructured objects
	}
	for _, u := range render(t) {
		applied, err := apply(u, u.GetKind() != "Namespace")
		if err != nil {
			t.Errorf("%s %s: %v", u.GetKind(), u.GetName(), err)
			continue
		}
		// GitOps: what Git holds comes back as written; a value the server
		// spells otherwise (cpu: 0.5 for 500m) shows as OutOfSync forever.
		if path, ok := holds(applied.Object["spec"], u.Object["spec"], "spec"); !ok {
			t.Errorf("%s %s: the API server returns %s other than Git has it", u.GetKind(), u.GetName(), path)
		}
	}

	// The chart with values an operator sets: what it adds or changes
	// applies too (at its defaults it renders config/default's objects,
	// TestChartInstallsWhatKustomizeDoes).
	for _, u := range renderChart(t, map[string]any{"worker": map[string]any{"replicas": 3, "extraArgs": []any{"--max-watches-per-namespace=10"}},
		"manager": map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "512Mi"}}}, "ingress": map[string]any{"enabled": true}}) {
		if _, err := apply(u, u.GetKind() != "Namespace"); err != nil {
			t.Errorf("the chart's %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}

	samples, err := kustomize.Render("config/samples")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range samples {
		u.SetNamespace("default")
		if _, err := apply(u, true); err != nil {
			t.Errorf("sample %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	// GitOps: what Git holds comes back from the API server as written (no
	// field normalised into another spelling, which Argo CD would show as
	// OutOfSync forever), and applying it again, as every sync does, changes
	// nothing.
	gitops := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "gitops"}}}
	if _, err := apply(gitops, false); err != nil {
		t.Fatal(err)
	}
	for _, u := range samples {
		u := u.DeepCopy()
		u.SetNamespace("gitops")
		first := u.DeepCopy()
		if err := k8s.Patch(ctx, first, client.Apply, client.FieldOwner("argocd")); err != nil { //nolint:staticcheck // as above
			t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
		if path, ok := holds(first.Object["spec"], u.Object["spec"], "spec"); !ok {
			t.Errorf("%s %s: the API server returns %s other than Git has it", u.GetKind(), u.GetName(), path)
		}
		// The first write after a create stores the status the CRD defaults
		// (observedGeneration -1, as Flux's kinds do); in a cluster that write
		// is the controller's. Every sync after it must change nothing.
		settled := u.DeepCopy()
		if err := k8s.Patch(ctx, settled, client.Apply, client.FieldOwner("argocd")); err != nil { //nolint:staticcheck // as above
			t.Fatal(err)
		}
		again := u.DeepCopy()
		if err := k8s.Patch(ctx, again, client.Apply, client.FieldOwner("argocd")); err != nil { //nolint:staticcheck // as above
			t.Fatal(err)
		}
		if settled.GetResourceVersion() != again.GetResourceVersion() {
			t.Errorf("%s %s changes on every apply", u.GetKind(), u.GetName())
		}
	}

	sample := func(kind, name string) *unstructured.Unstructured {
		for _, u := range samples {
			if u.GetKind() == kind && u.GetName() == name {
				return u.DeepCopy()
			}
		}
		t.Fatalf("no sample %s %s", kind, name)
		return nil
	}
	for _, tc := range []struct {
		name, kind, sample string
		field              []string
		value              any
		message            string
	}{
		{"a port out of range", "SftpConnection", "reports", []string{"spec", "port"}, int64(70000), "spec.port"},
		{"a reserved slug", "SftpConnection", "archive", []string{"spec", "slug"}, "docs", "reserved"},
		{"pinned keys and no verification", "SftpConnection", "reports", []string{"spec", "hostKey", "insecureSkipVerify"}, true, "mutually exclusive"},
		{"a NUL in rootPath", "SftpConnection", "reports", []string{"spec", "rootPath"}, "/up\x00load", "NUL"},
		{"no host", "SftpConnection", "reports", []string{"spec", "host"}, "", "spec.host"},
		{"a store's endpoint with a path", "ObjectStore", "landing", []string{"spec", "endpoint"}, "https://s3.example.com/bucket", "without a path"},
		{"a store's prefix from the root", "ObjectStore", "landing", []string{"spec", "prefix"}, "/payroll/", "spec.prefix"},
		{"a store's parts below S3's least", "ObjectStore", "landing", []string{"spec", "limits", "partSizeMiB"}, int64(1), "partSizeMiB"},
		{"an AuditSink of another name", "AuditSink", "audit", []string{"metadata", "name"}, "second", "named audit"},
		{"an AuditSink's batches too large", "AuditSink", "audit", []string{"spec", "maxBatch"}, int64(5000), "spec.maxBatch"},
		{"a share link climbing out", "ShareLink", "acme-drop", []string{"spec", "path"}, "/from-acme/../payroll", "without . or .. parts"},
		{"a share link's address not a CIDR", "ShareLink", "acme-drop", []string{"spec", "allowedCIDRs"}, []any{"acme.example.com"}, "CIDRs"},
		{"upload limits on a download link", "ShareLink", "acme-drop", []string{"spec", "mode"}, "Download", "Upload links only"},
		{"a share link's password in clear", "ShareLink", "acme-drop", []string{"spec", "passwordHash"}, "hunter2", "spec.passwordHash"},
		{"a reference to a kind that holds no files", "Transfer", "reports-to-landing", []string{"spec", "destination", "connectionRef", "kind"}, "Secret", "connectionRef.kind"},
		{"two token sources", "ApiKey", "laptop", []string{"spec", "token", "secretName"}, "laptop", "at most one"},
		{"the hash of nothing", "ApiKey", "laptop", []string{"spec", "token", "sha256"},
			"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "empty token"},
		{"an unknown command", "ApiKey", "reports-ci", []string{"spec", "commands"}, []any{"format"}, "spec.commands"},
		{"a relative path", "ApiKey", "reports-ci", []string{"spec", "paths"}, []any{"incoming/"}, "spec.paths"},
		{"a path climbing out", "ApiKey", "reports-ci", []string{"spec", "paths"}, []any{"/incoming/../private"}, "without . or .. parts"},
		{"a watch polling every second", "SftpWatch", "reports-incoming", []string{"spec", "pollInterval"}, "1s", "at least 5s"},
		{"a watch of a relative folder", "SftpWatch", "reports-incoming", []string{"spec", "path"}, "incoming", "absolute folder"},
		{"a watch moving to nowhere", "SftpWatch", "reports-incoming", []string{"spec", "afterDelivery"}, map[string]any{"action": "Move"}, "needs moveTo"},
		{"a watch with no sink", "SftpWatch", "reports-incoming", []string{"spec", "sink"}, map[string]any{}, "a ref or a uri"},
		{"a watch of an unknown event", "SftpWatch", "reports-incoming", []string{"spec", "events"}, []any{"Renamed"}, "spec.events"},
		{"a watch with a backoff that is no duration", "SftpWatch", "reports-incoming", []string{"spec", "delivery", "backoffDelay"}, "1s", "spec.delivery.backoffDelay"},
		{"a watch too deep", "SftpWatch", "reports-incoming", []string{"spec", "maxDepth"}, int64(100), "spec.maxDepth"},
		{"a watch's transfers deleted before it sees them end", "SftpWatch", "partner-inbox", []string{"spec", "transfer", "ttlSecondsAfterFinished"}, int64(5), "a minute"},
		{"an expectation with a deadline over a month", "FileExpectation", "bank-payments", []string{"spec", "schedule", "deadline"}, "800h", "744h"},
		{"an expectation of no files", "FileExpectation", "bank-payments", []string{"spec", "files", "include"}, []any{}, "spec.files.include"},
		{"an expectation's sizes upside down", "FileExpectation", "bank-payments", []string{"spec", "files", "maxSize"}, int64(10), "minSize must not be above maxSize"},
		{"an expectation opening a window every second", "FileExpectation", "bank-payments", []string{"spec", "schedule", "opens"}, "@every 1s", "five cron fields"},
		{"an expectation polling every second", "FileExpectation", "bank-payments", []string{"spec", "pollInterval"}, "1s", "at least 10s"},
		{"an expectation skipping no date", "FileExpectation", "bank-payments", []string{"spec", "schedule", "skipDates"}, []any{"Christmas"}, "spec.schedule.skipDates"},
		{"a calendar of no date", "HolidayCalendar", "berlin-holidays", []string{"spec", "dates"}, []any{"25.12.2026"}, "spec.dates"},
		{"OpenPGP both ways at once", "Transfer", "statement-to-partner", []string{"spec", "openPGP", "decrypt"},
			map[string]any{"keySecretRef": map[string]any{"name": "our-key"}}, "either encrypt or decrypt"},
		{"an OpenPGP rename into a folder", "Transfer", "statement-to-partner", []string{"spec", "openPGP", "rename"}, "out/{name}.pgp", "no /"},
		{"an OpenPGP rename that names every file alike", "Transfer", "statement-to-partner", []string{"spec", "openPGP", "rename"}, "statement.pgp", "{name} or {stem}"},
		{"too many OpenPGP recipients", "Transfer", "statement-to-partner", []string{"spec", "openPGP", "encrypt", "recipients"},
			[]any{map[string]any{"name": "a"}, map[string]any{"name": "b"}, map[string]any{"name": "c"}, map[string]any{"name": "d"}, map[string]any{"name": "e"},
				map[string]any{"name": "f"}, map[string]any{"name": "g"}, map[string]any{"name": "h"}, map[string]any{"name": "i"}, map[string]any{"name": "j"},
				map[string]any{"name": "k"}, map[string]any{"name": "l"}, map[string]any{"name": "m"}, map[string]any{"name": "n"}, map[string]any{"name": "o"},
				map[string]any{"name": "p"}, map[string]any{"name": "q"}}, "spec.openPGP.encrypt.recipients"},
	} {
		u := sample(tc.kind, tc.sample)
		if err := unstructured.SetNestedField(u.Object, tc.value, tc.field...); err != nil {
			t.Fatal(err)
		}
		_, err := apply(u, true)
		if err == nil || !strings.Contains(err.Error(), tc.message) {
			t.Errorf("%s: %v; want a refusal mentioning %q", tc.name, err, tc.message)
		}
	}
}

// TestNetworkPoliciesCoverEveryWorkload: each Deployment's pods are
// selected by a NetworkPolicy, and only the gateway and web UI take
// traffic from anywhere (the manager and the worker only scrapes of
// their metrics).
func TestNetworkPoliciesCoverEveryWorkload(t *testing.T) {
	objects := render(t)
	var policies []*networkingv1.NetworkPolicy
	for _, u := range objects {
		if u.GetKind() == "NetworkPolicy" {
			policies = append(policies, convert[networkingv1.NetworkPolicy](t, u))
		}
	}
	for _, u := range objects {
		if u.GetKind() != "Deployment" {
			continue
		}
		d := convert[appsv1.Deployment](t, u)
		podLabels := labels.Set(d.Spec.Template.Labels)
		var covering *networkingv1.NetworkPolicy
		for _, p := range policies {
			if selector, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector); err == nil && selector.Matches(podLabels) {
				covering = p
			}
		}
		if covering == nil {
			t.Errorf("no NetworkPolicy selects the pods of %s", d.Name)
			continue
		}
		open := false
		for _, rule := range covering.Spec.Ingress {
			open = open || len(rule.From) == 0
		}
		if wantOpen := d.Name != "sftpgate-manager" && d.Name != "sftpgate-worker"; open != wantOpen {
			t.Errorf("%s: open to anyone: %v, want %v", d.Name, open, wantOpen)
		}
	}
}

// TestMonitorsFindTheirTargets: config/prometheus scrapes the gateway
// Service's metrics port, and the manager's and worker pods'.
func TestMonitorsFindTheirTargets(t *testing.T) {
	objects, err := kustomize.Render("config/prometheus")
	if err != nil {
		t.Fatal(err)
	}
	var monitors []*unstructured.Unstructured
	for _, u := range objects {
		if strings.HasSuffix(u.GetKind(), "Monitor") {
			monitors = append(monitors, u)
		}
	}
	var gateway *corev1.Service
	deployments := map[string]*appsv1.Deployment{}
	for _, u := range render(t) {
		switch {
		case u.GetKind() == "Service" && u.GetName() == "sftpgate-gateway":
			gateway = convert[corev1.Service](t, u)
		case u.GetKind() == "Deployment":
			deployments[strings.TrimPrefix(u.GetName(), "sftpgate-")] = convert[appsv1.Deployment](t, u)
		}
	}
	if len(monitors) != 3 || gateway == nil {
		t.Fatalf("%d monitors; gateway Service %v", len(monitors), gateway != nil)
	}
	for _, m := range monitors {
		spec := m.Object["spec"].(map[string]any)
		var labels map[string]string
		var ports []string
		switch m.GetKind() {
		case "ServiceMonitor":
			labels = gateway.Labels
			for _, p := range gateway.Spec.Ports {
				ports = append(ports, p.Name)
			}
			spec["port"] = spec["endpoints"].([]any)[0].(map[string]any)["port"]
		case "PodMonitor":
			d := deployments[m.GetName()]
			if d == nil {
				t.Fatalf("the PodMonitor %s scrapes no component", m.GetName())
			}
			labels = d.Spec.Template.Labels
			for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
				ports = append(ports, p.Name)
			}
			spec["port"] = spec["podMetricsEndpoints"].([]any)[0].(map[string]any)["port"]
		}
		for k, v := range spec["selector"].(map[string]any)["matchLabels"].(map[string]any) {
			if labels[k] != v {
				t.Errorf("the %s selects %s=%v, which its target lacks", m.GetKind(), k, v)
			}
		}
		if !slices.Contains(ports, spec["port"].(string)) {
			t.Errorf("the %s scrapes port %v, which its target does not name", m.GetKind(), spec["port"])
		}
	}
}

// TestIngressExample: config/ingress routes to the gateway and web UI
// Services that config/default makes, by their prefixed names.
func TestIngressExample(t *testing.T) {
	objects, err := kustomize.Render("config/ingress")
	if err != nil {
		t.Fatal(err)
	}
	services := map[string]bool{}
	var ingress *networkingv1.Ingress
	for _, u := range objects {
		switch u.GetKind() {
		case "Service":
			services[u.GetName()] = true
		case "Ingress":
			ingress = convert[networkingv1.Ingress](t, u)
		}
	}
	if ingress == nil || len(ingress.Spec.TLS) == 0 {
		t.Fatal("config/ingress has no Ingress with TLS")
	}
	for _, rule := range ingress.Spec.Rules {
		for _, p := range rule.HTTP.Paths {
			if name := p.Backend.Service.Name; !services[name] {
				t.Errorf("%s routes to Service %s, which does not exist", rule.Host, name)
			}
		}
	}
}

// holds reports whether live has every field of want with want's value,
// and else the path of the first that differs.
func holds(live, want any, path string) (string, bool) {
	switch w := want.(type) {
	case nil: // Git does not set it
		return "", true
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return path, false
		}
		for k, v := range w {
			if p, ok := holds(l[k], v, path+"."+k); !ok {
				return p, false
			}
		}
		return "", true
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(w) {
			return path, false
		}
		for i := range w {
			if p, ok := holds(l[i], w[i], fmt.Sprintf("%s[%d]", path, i)); !ok {
				return p, false
			}
		}
		return "", true
	}
	return path, fmt.Sprint(live) == fmt.Sprint(want)
}
