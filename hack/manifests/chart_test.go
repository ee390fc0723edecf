package manifests

import (
	"bufio"
	"errors"
	"io"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/sftpgate/sftpgate/hack/kustomize"
	"github.com/sftpgate/sftpgate/hack/repo"
)

// renderChart renders charts/sftpgate with vals over its defaults, as
// `helm install sftpgate charts/sftpgate -n sftpgate-system` would: its
// CRDs, then its templates' objects.
func renderChart(t *testing.T, vals map[string]any) []*unstructured.Unstructured {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	chrt, err := loader.Load(filepath.Join(root, "charts/sftpgate"))
	if err != nil {
		t.Fatal(err)
	}
	values, err := chartutil.ToRenderValues(chrt, vals, chartutil.ReleaseOptions{Name: "sftpgate", Namespace: "sftpgate-system", IsInstall: true},
		chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(chrt, values)
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	for _, crd := range chrt.CRDObjects() {
		docs = append(docs, string(crd.File.Data))
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if !strings.HasSuffix(name, "NOTES.txt") {
			docs = append(docs, files[name])
		}
	}
	var objects []*unstructured.Unstructured
	for _, doc := range docs {
		// Through JSON, as kustomize.Render: numbers are int64.
		r := k8syaml.NewYAMLReader(bufio.NewReader(strings.NewReader(doc)))
		for {
			raw, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			js, err := yaml.YAMLToJSON(raw)
			if err != nil {
				t.Fatalf("the chart's %s: %v", raw[:min(len(raw), 200)], err)
			}
			if string(js) == "null" {
				continue
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(js); err != nil {
				t.Fatal(err)
			}
			// Helm's own: the namespaces stay when the release goes.
			if a := u.GetAnnotations(); a["helm.sh/resource-policy"] == "keep" && u.GetKind() == "Namespace" {
				delete(a, "helm.sh/resource-policy")
				if len(a) == 0 {
					a = nil
				}
				u.SetAnnotations(a)
			} else if u.GetKind() == "Namespace" {
				t.Errorf("the chart's Namespace %s is not kept when the release goes", u.GetName())
			}
			objects = append(objects, u)
		}
	}
	return objects
}

// key names an object in a set of them.
func key(u *unstructured.Unstructured) string {
	return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
}

// sameObjects says how got differs from want, object by object.
func sameObjects(t *testing.T, what string, got, want []*unstructured.Unstructured) {
	t.Helper()
	byKey := map[string]*unstructured.Unstructured{}
	for _, u := range got {
		byKey[key(u)] = u
	}
	for _, w := range want {
		g, ok := byKey[key(w)]
		if !ok {
			t.Errorf("%s: %s is missing", what, key(w))
			continue
		}
		delete(byKey, key(w))
		if !reflect.DeepEqual(g.Object, w.Object) {
			t.Errorf("%s: %s differs:\n got %v\nwant %v", what, key(w), g.Object, w.Object)
		}
	}
	for k := range byKey {
		t.Errorf("%s: %s is extra", what, k)
	}
}

// TestChartInstallsWhatKustomizeDoes: the chart at its default values
// renders the objects config/default renders, each the same; with
// monitoring on, config/prometheus's besides (as config/default would
// place them); and its values reach the Deployments (env too), the
// monitors and rules (labels) and the dashboard (namespace).
func TestChartInstallsWhatKustomizeDoes(t *testing.T) {
	want := render(t)
	sameObjects(t, "the chart at its defaults", renderChart(t, nil), want)

	monitors, err := kustomize.Render("config/prometheus")
	if err != nil {
		t.Fatal(err)
	}
	withMonitors := renderChart(t, map[string]any{"monitoring": map[string]any{"enabled": true}})
	if len(withMonitors) != len(want)+len(monitors) {
		t.Errorf("with monitoring: %d objects, want %d", len(withMonitors), len(want)+len(monitors))
	}
	for _, m := range monitors {
		if !slices.ContainsFunc(withMonitors, func(u *unstructured.Unstructured) bool {
			return u.GetKind() == m.GetKind() && u.GetName() == "sftpgate-"+m.GetName() && u.GetNamespace() == "sftpgate-system"
		}) {
			t.Errorf("with monitoring: no %s %s", m.GetKind(), m.GetName())
		}
	}

	board, err := kustomize.Render("config/grafana")
	if err != nil {
		t.Fatal(err)
	}
	withBoard := renderChart(t, map[string]any{"dashboard": map[string]any{"enabled": true}})
	sameObjects(t, "with the dashboard", withBoard, append(append([]*unstructured.Unstructured{}, want...), board...))

	otel := map[string]any{"name": "OTEL_TRACES_EXPORTER", "value": "otlp"}
	set := renderChart(t, map[string]any{
		"image": map[string]any{"tag": "v9.9.9"},
		"worker": map[string]any{"replicas": 5, "extraArgs": []any{"--max-watches-per-namespace=10"}, "resources": map[string]any{"limits": map[string]any{"memory": "1Gi"}},
			"env": []any{otel}},
		"gateway":    map[string]any{"autoscaling": map[string]any{"maxReplicas": 4}},
		"ingress":    map[string]any{"enabled": true, "gatewayHost": "api.example.org"},
		"monitoring": map[string]any{"enabled": true, "labels": map[string]any{"release": "kube-prometheus-stack"}},
		"dashboard":  map[string]any{"enabled": true, "namespace": "monitoring"},
	})
	var labelled, boards int
	for _, u := range set {
		switch key(u) {
		case "Deployment sftpgate-system/sftpgate-worker":
			replicas, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
			c := u.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
			args, env := c["args"].([]any), c["env"].([]any)
			limit, _, _ := unstructured.NestedString(c, "resources", "limits", "memory")
			if replicas != 5 || args[len(args)-1] != "--max-watches-per-namespace=10" || c["image"] != "ghcr.io/sftpgate/sftpgate:v9.9.9" || limit != "1Gi" ||
				!reflect.DeepEqual(env[len(env)-1], otel) || len(env) < 2 {
				t.Errorf("the worker with values: replicas %d, args %v, image %v, memory %s, env %v", replicas, args, c["image"], limit, env)
			}
		case "HorizontalPodAutoscaler sftpgate-system/sftpgate-gateway":
			if n, _, _ := unstructured.NestedInt64(u.Object, "spec", "maxReplicas"); n != 4 {
				t.Errorf("the gateway's autoscaler: maxReplicas %d", n)
			}
		case "ConfigMap monitoring/sftpgate-grafana-dashboard":
			boards++
		}
		if strings.HasPrefix(u.GetAPIVersion(), "monitoring.coreos.com/") {
			if u.GetLabels()["release"] != "kube-prometheus-stack" || u.GetLabels()["app.kubernetes.io/part-of"] != "sftpgate" {
				t.Errorf("%s with monitoring.labels: labels %v", key(u), u.GetLabels())
			}
			labelled++
		}
	}
	if labelled != len(monitors) || boards != 1 {
		t.Errorf("with monitoring.labels and dashboard.namespace: %d monitors and rules labelled of %d, %d dashboards in monitoring", labelled, len(monitors), boards)
	}
	if !slices.ContainsFunc(set, func(u *unstructured.Unstructured) bool {
		host, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
		return u.GetKind() == "Ingress" && len(host) == 2 && host[0].(map[string]any)["host"] == "api.example.org"
	}) {
		t.Error("ingress.enabled: no Ingress for api.example.org")
	}
}
