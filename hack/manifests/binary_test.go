package manifests

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sftpgate/sftpgate/hack/repo"
)

// TestProductionBinaryLinksNoTestCode: the image's sftpgate holds the
// manager, the gateway and the web UI, and none of the test cluster, the
// fixtures or the demo server (sftpgate-dev, built from hack/, has them).
func TestProductionBinaryLinksNoTestCode(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range deps(t, root, ".") {
		if strings.HasPrefix(pkg, "github.com/sftpgate/sftpgate/hack/") || strings.Contains(pkg, "controller-runtime/pkg/envtest") ||
			strings.Contains(pkg, "controller-runtime/pkg/client/fake") || pkg == "testing" {
			t.Errorf("the production binary links %s", pkg)
		}
	}
}

// TestPartsDependOnlyOnWhatTheyNeed: each component (the manager's
// controllers, the gateway, the web UI and the worker)
// reads the API through its types and scheme (api/) and shares code only
// through internal/: none imports another's packages. What is shared
// lives in internal/, and internal/ imports no component.
func TestPartsDependOnlyOnWhatTheyNeed(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	const module = "github.com/sftpgate/sftpgate/"
	components := []string{"controllers", "gateway", "webui", "worker"}
	for _, part := range append(components, "internal") {
		if _, err := os.Stat(filepath.Join(root, part)); os.IsNotExist(err) {
			continue // a component yet to come
		}
		for _, pkg := range deps(t, root, "./"+part+"/...") {
			for _, other := range components {
				if other != part && (pkg == module+other || strings.HasPrefix(pkg, module+other+"/")) {
					t.Errorf("%s depends on %s", part, pkg)
				}
			}
		}
	}
}

// TestTestsStayInTheirComponent: a component's tests depend on no other
// component either, not even through a fixture: a test that needs several
// runs in test/e2e (the web UI's with the rest of the system, the
// isolation matrix among them, in test/e2e/tenancy; the manager's keys
// judged by the gateway in test/e2e/faults), where the tests depend on
// none, seeing the components as the processes a deployment runs. A
// component's tests that need the manager run it so too
// (framework.StartManager).
func TestTestsStayInTheirComponent(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	const module = "github.com/sftpgate/sftpgate/"
	components := []string{"controllers", "gateway", "webui", "worker"}
	for _, part := range append(components, "internal", "test/e2e") {
		for _, dep := range deps(t, root, "-test", "./"+part+"/...") {
			// A test's own packages: "p [p.test]", "p.test", "p_test".
			pkg, _, _ := strings.Cut(dep, " ")
			pkg = strings.TrimSuffix(strings.TrimSuffix(pkg, ".test"), "_test")
			for _, other := range components {
				if other != part && (pkg == module+other || strings.HasPrefix(pkg, module+other+"/")) {
					t.Errorf("the tests of %s depend on %s", part, dep)
				}
			}
		}
	}
}

// importsOf maps each package of pattern to the imports that field (a
// go list template of space-separated paths) names.
func importsOf(t *testing.T, root, field, pattern string) map[string][]string {
	t.Helper()
	list := exec.Command("go", "list", "-f", "{{.ImportPath}}: "+field, pattern)
	list.Dir = root
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imps, _ := strings.Cut(line, ": ")
		imports[pkg] = strings.Fields(imps)
	}
	return imports
}

// deps lists the packages args (go list's flags, then its patterns)
// depend on, themselves included.
func deps(t *testing.T, root string, args ...string) []string {
	t.Helper()
	list := exec.Command("go", append([]string{"list", "-deps"}, args...)...)
	list.Dir = root
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestFilesOnlyThroughTheFileLayer: every component touches a server's
// files through internal/files, which knows no backend; each backend's
// library is imported by that backend's packages alone (a row of
// libraries: its file-layer package, its dialer and what they stand on),
// and a backend's file-layer package imports nothing of the module but
// the file layer and its own packages. A new backend is a row here.
func TestFilesOnlyThroughTheFileLayer(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	const module = "github.com/sftpgate/sftpgate/"
	libraries := []struct {
		prefix   string // the library's import path, and its packages'
		backend  string // its file-layer package
		packages []string
	}{
		{"github.com/pkg/sftp", "internal/sftpfs", []string{"internal/sftpfs", "internal/sftpdial", "internal/sftpdir"}},
		{"github.com/minio/minio-go/", "internal/s3fs", []string{"internal/s3fs", "internal/s3dial"}},
		{"github.com/jlaffaye/ftp", "internal/ftpfs", []string{"internal/ftpfs", "internal/ftpdial"}},
	}
	all := importsOf(t, root, `{{join .Imports " "}}`, "./...")
	for _, lib := range libraries {
		for _, p := range lib.packages {
			if _, ok := all[module+p]; !ok {
				t.Errorf("the row of %s names %s, which is no package: renamed?", lib.prefix, p)
			}
		}
	}
	for pkg, imports := range all {
		if strings.HasPrefix(pkg, module+"hack/fixtures/") {
			continue // the test servers
		}
		for _, imp := range imports {
			for _, lib := range libraries {
				own := slices.ContainsFunc(lib.packages, func(p string) bool { return module+p == pkg })
				ownImport := slices.ContainsFunc(lib.packages, func(p string) bool { return module+p == imp })
				switch {
				case pkg == module+"internal/files" && (strings.HasPrefix(imp, lib.prefix) || ownImport):
					t.Errorf("the file layer imports a backend, %s", imp)
				case strings.HasPrefix(imp, lib.prefix) && !own:
					t.Errorf("%s speaks to a backend itself (imports %s): go through internal/files", pkg, imp)
				case pkg == module+lib.backend && strings.HasPrefix(imp, module) && imp != module+"internal/files" && !ownImport:
					t.Errorf("the backend %s imports %s, beyond the file layer and its own packages", lib.backend, imp)
				}
			}
		}
	}
}
