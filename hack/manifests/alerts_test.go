package manifests

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"github.com/sftpgate/sftpgate/hack/kustomize"
	"github.com/sftpgate/sftpgate/hack/repo"
	"github.com/sftpgate/sftpgate/internal/pool"
)

// rules are config/prometheus's PrometheusRules, each as a Prometheus
// rule file (its spec) in dir, by file name, with every expression.
func rules(t *testing.T, dir string) (files []string, exprs []string) {
	t.Helper()
	objects, err := kustomize.Render("config/prometheus")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objects {
		if u.GetKind() != "PrometheusRule" {
			continue
		}
		spec := u.Object["spec"].(map[string]any)
		out, err := yaml.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, u.GetName()+".rules.yaml")
		if err := os.WriteFile(file, out, 0o600); err != nil {
			t.Fatal(err)
		}
		files = append(files, file)
		for _, g := range spec["groups"].([]any) {
			for _, r := range g.(map[string]any)["rules"].([]any) {
				exprs = append(exprs, r.(map[string]any)["expr"].(string))
			}
		}
	}
	if len(files) == 0 {
		t.Fatal("config/prometheus has no PrometheusRule")
	}
	return files, exprs
}

// TestAlertingRules: promtool's unit tests of the alerting rules
// (config/prometheus/alerts_test.yaml) pass, with Prometheus's own tool.
func TestAlertingRules(t *testing.T) {
	promtool := os.Getenv("SFTPGATE_PROMTOOL")
	if promtool == "" {
		t.Fatal("set SFTPGATE_PROMTOOL to promtool (make test installs it: make promtool)")
	}
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files, _ := rules(t, dir)
	raw, err := os.ReadFile(filepath.Join(root, "config/prometheus/alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var tests map[string]any
	if err := yaml.Unmarshal(raw, &tests); err != nil {
		t.Fatal(err)
	}
	tests["rule_files"] = files
	out, err := yaml.Marshal(tests)
	if err != nil {
		t.Fatal(err)
	}
	testFile := filepath.Join(dir, "alerts_test.yaml")
	if err := os.WriteFile(testFile, out, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), promtool, "test", "rules", testFile)
	if got, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, got)
	}
}

// exportedMetrics are the names of the metrics the components export:
// those written in their code, and client-go's.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{"rest_client_requests_total": true} // client-go's, served through internal/clientmetrics
	name := regexp.MustCompile(`"(sftpgate_[a-z_]+)"`)
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || strings.Contains(p, "/hack/") {
			return err
		}
		src, err := os.ReadFile(p)
		for _, m := range name.FindAllStringSubmatch(string(src), -1) {
			exported[m[1]] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The pools' metrics are named after the component that has them.
	fqName := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	for _, component := range []string{"gateway", "worker"} {
		descs := make(chan *prometheus.Desc, 8)
		(&pool.Pools{Component: component}).Describe(descs)
		close(descs)
		for d := range descs {
			exported[fqName.FindStringSubmatch(d.String())[1]] = true
		}
	}
	return exported
}

// readsExported fails for each metric of exprs no component exports (a
// histogram's series by its name, less _bucket, _sum or _count).
func readsExported(t *testing.T, what string, exprs []string) {
	t.Helper()
	exported := exportedMetrics(t)
	metric := regexp.MustCompile(`\b(sftpgate_[a-z_]+|rest_client_[a-z_]+)`)
	for _, e := range exprs {
		for _, m := range metric.FindAllString(e, -1) {
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_sum"), "_count")
			if !exported[m] && !exported[base] {
				t.Errorf("%s reads %s, which no component exports: %s", what, m, e)
			}
		}
	}
}

// TestAlertsReadExportedMetrics: every metric an alerting rule reads is
// one a component exports (its name written in the code), and every
// alert's runbook is a section of docs/operations.md.
func TestAlertsReadExportedMetrics(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	_, exprs := rules(t, t.TempDir())
	readsExported(t, "an alert", exprs)
	ops, err := os.ReadFile(filepath.Join(root, "docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	alerts, err := os.ReadFile(filepath.Join(root, "config/prometheus/alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^ *- alert: (\w+)$`).FindAllStringSubmatch(string(alerts), -1) {
		if !strings.Contains(string(ops), "\n### "+m[1]+"\n") {
			t.Errorf("the alert %s has no runbook: a section '### %s' in docs/operations.md", m[1], m[1])
		}
	}
}
