// Package kustomize renders the repository's kustomizations for tests and
// for dist/install.yaml. It stays out of the sftpgate binary (kustomize's
// plugin loader would make the binary export its every symbol), and
// hack/render, which make build-installer runs, stays small.
package kustomize

import (
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/sftpgate/sftpgate/hack/repo"
)

// Render builds the kustomization in dir (relative to the repository, like
// "config/default") as `kubectl apply -k` would, and returns its objects.
func Render(dir string) ([]*unstructured.Unstructured, error) {
	root, err := repo.Root()
	if err != nil {
		return nil, err
	}
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionUnspecified // the kustomization's sortOptions decide
	resources, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), filepath.Join(root, dir))
	if err != nil {
		return nil, err
	}
	var objects []*unstructured.Unstructured
	for _, r := range resources.Resources() {
		// Through JSON, so that numbers are int64 as client-go expects.
		raw, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return nil, err
		}
		objects = append(objects, u)
	}
	return objects, nil
}
