// Package openapi is the gateway's OpenAPI 3.1 document, served at
// {base}/openapi.json, and the page at {base}/docs that renders it. The
// end-to-end tests validate every response against the document, so it
// cannot drift from the code.
package openapi

import (
	_ "embed"
	"encoding/json"
	"strings"

	"sigs.k8s.io/yaml"
)

//go:embed openapi.yaml
var source []byte

// Document returns the document as JSON, its server URL set to the
// gateway's base path.
func Document(base string) ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(source, &doc); err != nil {
		return nil, err
	}
	doc["servers"] = []map[string]string{{"url": "/" + strings.Trim(base, "/")}}
	return json.Marshal(doc)
}
