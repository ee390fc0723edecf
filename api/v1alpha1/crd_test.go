package v1alpha1_test

import (
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// TestEveryFieldIsDocumented keeps `kubectl explain` useful: every field of
// every generated CRD has a description. (metadata is documented by
// Kubernetes itself; list items by their list.)
func TestEveryFieldIsDocumented(t *testing.T) {
	files, err := filepath.Glob("../../config/crd/bases/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs found: %v", err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(b, &crd); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, v := range crd.Spec.Versions {
			var walk func(path string, s apiextensionsv1.JSONSchemaProps)
			walk = func(path string, s apiextensionsv1.JSONSchemaProps) {
				for name, prop := range s.Properties {
					p := path + "." + name
					if prop.Description == "" && p != ".metadata" {
						t.Errorf("%s %s: field %s has no description", crd.Name, v.Name, p)
					}
					walk(p, prop)
				}
				if s.Items != nil && s.Items.Schema != nil {
					walk(path+"[]", *s.Items.Schema)
				}
			}
			walk("", *v.Schema.OpenAPIV3Schema)
		}
	}
}
