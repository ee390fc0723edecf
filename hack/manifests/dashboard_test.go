package manifests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/sftpgate/sftpgate/hack/kustomize"
	"github.com/sftpgate/sftpgate/hack/repo"
)

// dashboard is what Grafana reads of config/grafana/sftpgate.json.
type dashboard struct {
	Title         string `json:"title"`
	UID           string `json:"uid"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name, Type string
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int    `json:"id"`
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// TestDashboard: the Grafana dashboard loads (a dashboard of panels with
// unique ids, each querying the datasource variable), queries only the
// metrics the components export, and config/grafana ships it as the
// ConfigMap Grafana's sidecar loads.
func TestDashboard(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "config/grafana/sftpgate.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("the dashboard is not JSON Grafana reads: %v", err)
	}
	if d.Title == "" || d.UID == "" || d.SchemaVersion < 36 || len(d.Templating.List) == 0 || d.Templating.List[0].Type != "datasource" {
		t.Fatalf("the dashboard: title %q, uid %q, schema %d, templating %+v", d.Title, d.UID, d.SchemaVersion, d.Templating.List)
	}
	ids := map[int]bool{}
	var exprs []string
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("the panel %q queries no datasource of the variable", p.Title)
		}
		for _, q := range p.Targets {
			if q.Expr == "" || q.RefID == "" {
				t.Errorf("the panel %q has a query without an expression or refId", p.Title)
			}
			exprs = append(exprs, q.Expr)
		}
	}
	readsExported(t, "the dashboard", exprs)
	objects, err := kustomize.Render("config/grafana")
	if err != nil {
		t.Fatal(err)
	}
	if len(objects) != 1 || objects[0].GetKind() != "ConfigMap" || objects[0].GetLabels()["grafana_dashboard"] != "1" {
		t.Fatalf("config/grafana: %v", objects)
	}
	if data, _ := objects[0].Object["data"].(map[string]any); data["sftpgate.json"] != string(raw) {
		t.Error("config/grafana's ConfigMap does not hold the dashboard as it is")
	}
}
