// Command chart writes the Helm chart's generated parts from the
// kustomizations, so that the chart and `kubectl apply -k config/default`
// install the same objects: `go run ./hack/chart` (make chart). From
// config/default it writes charts/sftpgate/crds (the CRDs as they are),
// charts/sftpgate/templates (every other object, its Deployments' image,
// replicas, resources and extra flags taken from the values) and
// charts/sftpgate/values.yaml (those values as config/default has them);
// from config/prometheus, the monitors and alerting rules, behind
// monitoring.enabled; from config/grafana, the dashboard, behind
// dashboard.enabled. Chart.yaml, the Ingress template and the notes are
// written by hand.
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/sftpgate/sftpgate/hack/kustomize"
	"github.com/sftpgate/sftpgate/hack/repo"
)

// keepAnnotation keeps an object Helm installed when its release is
// uninstalled.
const keepAnnotation = "helm.sh/resource-policy"

// chartDir is the chart, relative to the repository.
const chartDir = "charts/sftpgate"

// The components: their Deployments are named prefix + component, and
// their container is the component.
const prefix = "sftpgate-"

var components = []string{"manager", "gateway", "worker", "webui"}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "chart:", err)
		os.Exit(1)
	}
}

func run() error {
	root, err := repo.Root()
	if err != nil {
		return err
	}
	dir := filepath.Join(root, chartDir)
	objects, err := kustomize.Render("config/default")
	if err != nil {
		return err
	}
	monitors, err := kustomize.Render("config/prometheus")
	if err != nil {
		return err
	}
	for _, sub := range []string{"crds", "templates/generated"} {
		if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil { //nolint:gosec // a folder of the repository
			return err
		}
	}
	values := map[string]any{}
	var templates bytes.Buffer
	templates.WriteString(header)
	for _, obj := range objects {
		if obj.GetKind() == "CustomResourceDefinition" {
			if err := writeYAML(filepath.Join(dir, "crds", obj.GetName()+".yaml"), obj.Object); err != nil {
				return err
			}
			continue
		}
		text, err := template(obj, values)
		if err != nil {
			return err
		}
		templates.WriteString("---\n" + text)
	}
	if err := write(filepath.Join(dir, "templates/generated/config-default.yaml"), templates.Bytes()); err != nil {
		return err
	}
	// The monitors as config/default would place them: its prefix, its
	// namespace and its label.
	var monitoring bytes.Buffer
	monitoring.WriteString(header + "{{- if .Values.monitoring.enabled }}\n")
	for _, obj := range monitors {
		obj.SetName(prefix + obj.GetName())
		obj.SetNamespace(prefix + obj.GetNamespace())
		labels := obj.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels["app.kubernetes.io/part-of"] = "sftpgate"
		labels["__labels__"] = "__labels__"
		obj.SetLabels(labels)
		out, err := yaml.Marshal(obj.Object)
		if err != nil {
			return err
		}
		monitoring.WriteString("---\n" + fill(escape(string(out)), map[string]string{
			"__labels__: __labels__": "{{- with .Values.monitoring.labels }}{{- toYaml . | nindent __here__ }}{{- end }}"}))
	}
	monitoring.WriteString("{{- end }}\n")
	if err := write(filepath.Join(dir, "templates/generated/config-prometheus.yaml"), monitoring.Bytes()); err != nil {
		return err
	}
	// The dashboard as config/grafana has it.
	board, err := kustomize.Render("config/grafana")
	if err != nil {
		return err
	}
	var dashboard bytes.Buffer
	dashboard.WriteString(header + "{{- if .Values.dashboard.enabled }}\n")
	for _, obj := range board {
		values["dashboard"] = map[string]any{"enabled": false, "namespace": obj.GetNamespace()}
		obj.SetNamespace("__namespace__")
		out, err := yaml.Marshal(obj.Object)
		if err != nil {
			return err
		}
		dashboard.WriteString("---\n" + fill(escape(string(out)), map[string]string{
			"namespace: __namespace__": "namespace: {{ .Values.dashboard.namespace | quote }}"}))
	}
	dashboard.WriteString("{{- end }}\n")
	if err := write(filepath.Join(dir, "templates/generated/config-grafana.yaml"), dashboard.Bytes()); err != nil {
		return err
	}
	values["monitoring"] = map[string]any{"enabled": false, "labels": map[string]any{}}
	// The names config/ingress's example has; tlsSecretName names a
	// Secret cert-manager writes, it holds none.
	values["ingress"] = map[string]any{"enabled": false, "className": "nginx", "annotations": map[string]any{}, //nolint:gosec // no credential
		"gatewayHost": "sftp-api.example.com", "webuiHost": "sftp.example.com", "tlsSecretName": "sftpgate-tls"}
	out, err := yaml.Marshal(values)
	if err != nil {
		return err
	}
	return write(filepath.Join(dir, "values.yaml"), append([]byte(valuesHeader), out...))
}

const header = "# Generated by hack/chart from the kustomizations in config/ (make chart): edit those.\n"

const valuesHeader = `# The chart's values. Generated by hack/chart from config/default (make
# chart): at these values the chart installs what config/default does.
# image: the one image every component runs. Each component: its
# replicas (the gateway: its autoscaler's bounds), its container's
# resources, extraArgs, flags added to its command line (see
# docs/operations.md for each component's flags), and env, variables
# added to its container's (OTEL_* for traces: docs/operations.md).
# monitoring.enabled adds the Prometheus Operator's monitors and the
# alerting rules of config/prometheus (the CRDs must be there), with
# monitoring.labels on each (kube-prometheus-stack selects its release's).
# dashboard.enabled adds the Grafana dashboard of config/grafana, as a
# ConfigMap Grafana's dashboard sidecar loads, in dashboard.namespace.
# ingress.enabled adds an Ingress for the gateway and the web UI.
`

// template is obj as a template: a Deployment's image, replicas,
// resources, extra flags and extra environment from the values (set in values as obj has
// them), the gateway's autoscaler's bounds too; everything else as it
// is.
func template(obj *unstructured.Unstructured, values map[string]any) (string, error) {
	if obj.GetKind() == "Namespace" {
		// Kept when the release goes: sftpgate-accounts holds the web UI's
		// accounts, sftpgate-system the stored states and audit trail.
		annotations := obj.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[keepAnnotation] = "keep"
		obj.SetAnnotations(annotations)
	}
	component := strings.TrimPrefix(obj.GetName(), prefix)
	v, _ := values[component].(map[string]any)
	if v == nil && slices.Contains(components, component) {
		v = map[string]any{}
		values[component] = v
	}
	replace := map[string]string{}
	switch obj.GetKind() {
	case "Deployment":
		if replicas, ok, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas"); ok {
			v["replicas"] = replicas
			replace["replicas: __replicas__"] = fmt.Sprintf("replicas: {{ .Values.%s.replicas }}", component)
			if err := unstructured.SetNestedField(obj.Object, "__replicas__", "spec", "replicas"); err != nil {
				return "", err
			}
		}
		containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
		for i, c := range containers {
			c := c.(map[string]any)
			if c["name"] != component {
				continue
			}
			image := c["image"].(string)
			repository, tag, _ := strings.Cut(image, ":")
			values["image"] = map[string]any{"repository": repository, "tag": tag}
			c["image"] = "__image__"
			replace["image: __image__"] = "image: {{ printf \"%s:%s\" .Values.image.repository .Values.image.tag | quote }}"
			v["resources"] = c["resources"]
			c["resources"] = "__resources__"
			replace["resources: __resources__"] = fmt.Sprintf("resources: {{- toYaml .Values.%s.resources | nindent __indent__ }}", component)
			v["extraArgs"] = []any{}
			c["args"] = append(c["args"].([]any), "__extraArgs__")
			replace["- __extraArgs__"] = fmt.Sprintf("{{- range .Values.%s.extraArgs }}\n__indent__- {{ . | quote }}\n__indent__{{- end }}", component)
			v["env"] = []any{}
			env, _ := c["env"].([]any)
			c["env"] = append(env, "__env__")
			replace["- __env__"] = fmt.Sprintf("{{- with .Values.%s.env }}{{- toYaml . | nindent __here__ }}{{- end }}", component)
			containers[i] = c
		}
		if err := unstructured.SetNestedSlice(obj.Object, containers, "spec", "template", "spec", "containers"); err != nil {
			return "", err
		}
	case "HorizontalPodAutoscaler":
		autoscaling := map[string]any{}
		for _, f := range []string{"minReplicas", "maxReplicas"} {
			n, _, _ := unstructured.NestedInt64(obj.Object, "spec", f)
			autoscaling[f] = n
			replace[f+": __"+f+"__"] = fmt.Sprintf("%s: {{ .Values.%s.autoscaling.%s }}", f, component, f)
			if err := unstructured.SetNestedField(obj.Object, "__"+f+"__", "spec", f); err != nil {
				return "", err
			}
		}
		v["autoscaling"] = autoscaling
	}
	out, err := yaml.Marshal(obj.Object)
	if err != nil {
		return "", err
	}
	return fill(escape(string(out)), replace), nil
}

// fill replaces each placeholder line of text (a key of replace) by its
// template, indented as the line was: in it, "nindent __indent__" is
// two more than the line's indentation, for a mapping under its key,
// "nindent __here__" the line's, for its siblings (items of its list,
// keys of its mapping), and any other __indent__ the line's indentation.
func fill(text string, replace map[string]string) string {
	for from, to := range replace {
		text = placeholder(from).ReplaceAllStringFunc(text, func(line string) string {
			indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
			t := strings.ReplaceAll(to, "nindent __indent__", fmt.Sprintf("nindent %d", len(indent)+2))
			t = strings.ReplaceAll(t, "nindent __here__", fmt.Sprintf("nindent %d", len(indent)))
			return indent + strings.ReplaceAll(t, "__indent__", indent)
		})
	}
	return text
}

// placeholder matches the line of a placeholder, with its indentation.
func placeholder(line string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^ *` + regexp.QuoteMeta(line) + `$`)
}

// escape keeps "{{" in an object (none now) from being read as a
// template.
func escape(text string) string {
	return strings.ReplaceAll(text, "{{", `{{ "{{" }}`)
}

func writeYAML(path string, obj map[string]any) error {
	out, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	return write(path, append([]byte(header), out...))
}

// write writes a file of the repository, which everyone reads.
func write(path string, data []byte) error {
	return os.WriteFile(path, data, 0o644) //nolint:gosec // a file of the repository, not a secret
}
