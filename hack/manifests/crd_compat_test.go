package manifests

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/sftpgate/sftpgate/hack/repo"
)

// TestCRDsStayCompatible: every field of every version of the CRDs the
// last release installed (testdata/released-crds) is still there, of the
// same type, so that the objects a cluster stores read the same after an
// upgrade (a field removed or retyped needs a new version and a
// conversion).
func TestCRDsStayCompatible(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	released, err := filepath.Glob(filepath.Join(root, "hack/manifests/testdata/released-crds/*.yaml"))
	if err != nil || len(released) == 0 {
		t.Fatalf("no released CRDs in testdata/released-crds: %v", err)
	}
	for _, file := range released {
		old, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		current, err := os.ReadFile(filepath.Join(root, "config/crd/bases", filepath.Base(file)))
		if err != nil {
			t.Errorf("%s: removed since the last release: %v", filepath.Base(file), err)
			continue
		}
		var was, now apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(old, &was); err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(current, &now); err != nil {
			t.Fatal(err)
		}
		for _, v := range was.Spec.Versions {
			i := -1
			for j := range now.Spec.Versions {
				if now.Spec.Versions[j].Name == v.Name {
					i = j
				}
			}
			if i < 0 {
				t.Errorf("%s: version %s removed", was.Name, v.Name)
				continue
			}
			n := now.Spec.Versions[i]
			if v.Served && !n.Served {
				t.Errorf("%s: version %s no longer served", was.Name, v.Name)
			}
			if v.Schema == nil || n.Schema == nil {
				if v.Schema != nil {
					t.Errorf("%s %s: its schema removed", was.Name, v.Name)
				}
				continue
			}
			for _, problem := range compatible(v.Schema.OpenAPIV3Schema, n.Schema.OpenAPIV3Schema, "") {
				t.Errorf("%s %s: %s", was.Name, v.Name, problem)
			}
		}
	}
}

// compatible says where now no longer holds what was held: a field
// removed (a map's values too), of another type, or no longer kept when
// unknown. Tighter validation of values already stored is left to the
// API server's ratcheting and to review.
func compatible(was, now *apiextensionsv1.JSONSchemaProps, path string) []string {
	if was == nil {
		return nil
	}
	if now == nil {
		return []string{path + " removed"}
	}
	var problems []string
	if was.Type != now.Type {
		problems = append(problems, path+" was "+was.Type+", is "+now.Type)
	}
	// Fields kept as they came would be pruned at the next write.
	if was.XPreserveUnknownFields != nil && *was.XPreserveUnknownFields && (now.XPreserveUnknownFields == nil || !*now.XPreserveUnknownFields) {
		problems = append(problems, path+" no longer keeps unknown fields")
	}
	if was.AdditionalProperties != nil && was.AdditionalProperties.Schema != nil {
		var n *apiextensionsv1.JSONSchemaProps
		if now.AdditionalProperties != nil {
			n = now.AdditionalProperties.Schema
		}
		problems = append(problems, compatible(was.AdditionalProperties.Schema, n, path+"{}")...)
	}
	names := make([]string, 0, len(was.Properties))
	for name := range was.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		w := was.Properties[name]
		n, ok := now.Properties[name]
		if !ok {
			problems = append(problems, path+"."+name+" removed")
			continue
		}
		problems = append(problems, compatible(&w, &n, path+"."+name)...)
	}
	if was.Items != nil && was.Items.Schema != nil {
		var n *apiextensionsv1.JSONSchemaProps
		if now.Items != nil {
			n = now.Items.Schema
		}
		problems = append(problems, compatible(was.Items.Schema, n, path+"[]")...)
	}
	return problems
}
