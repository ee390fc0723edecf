// Command render prints a kustomization as `kubectl apply -k` would apply
// it: `go run ./hack/render config/default > dist/install.yaml` (make
// build-installer). It uses kustomize's library, so no kustomize binary is
// needed.
package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"

	"github.com/sftpgate/sftpgate/hack/kustomize"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: render DIR (relative to the repository, e.g. config/default)")
		os.Exit(2)
	}
	objects, err := kustomize.Render(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
	for _, obj := range objects {
		out, err := yaml.Marshal(obj.Object)
		if err != nil {
			fmt.Fprintln(os.Stderr, "render:", err)
			os.Exit(1)
		}
		fmt.Printf("---\n%s", out)
	}
}
