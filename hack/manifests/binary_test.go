package manifests

import (
	"os/exec"
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

// TestPartsDependOnlyOnWhatTheyNeed: the gateway and the web UI read the
// API through its types and scheme (api/), not through the controllers.
func TestPartsDependOnlyOnWhatTheyNeed(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{"./gateway", "./webui"} {
		for _, pkg := range deps(t, root, part) {
			if pkg == "github.com/sftpgate/sftpgate/controllers" {
				t.Errorf("%s depends on %s", part, pkg)
			}
		}
	}
}

// deps lists the packages pkg depends on, itself included.
func deps(t *testing.T, root, pkg string) []string {
	t.Helper()
	list := exec.Command("go", "list", "-deps", pkg)
	list.Dir = root
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}
