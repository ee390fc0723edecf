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
	list := exec.Command("go", "list", "-deps", ".")
	list.Dir = root
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for pkg := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		if strings.HasPrefix(pkg, "github.com/sftpgate/sftpgate/hack/") || strings.Contains(pkg, "controller-runtime/pkg/envtest") ||
			strings.Contains(pkg, "controller-runtime/pkg/client/fake") || pkg == "testing" {
			t.Errorf("the production binary links %s", pkg)
		}
	}
}
