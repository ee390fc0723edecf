package openapi

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

//go:embed docs.html
var docsTemplate string

var docsPage = template.Must(template.New("docs").Parse(docsTemplate))

type docsData struct {
	Title, Version, Description, Base string
	Operations                        []operation
	// Uploads are the tus endpoint's operations.
	Uploads []protocolOperation
	Errors  []statusDoc
}

type protocolOperation struct {
	Method, Path, Summary, Description string
}

type operation struct {
	Name, Path, Summary, Description string
	Request, Result                  []field
	ResultType                       string
}

type field struct {
	Name, Type, Default, Description string
	Required                         bool
}

type statusDoc struct {
	Status, Description string
}

// Docs renders the document as an HTML page for people.
func Docs(base string) ([]byte, error) {
	raw, err := Document(base)
	if err != nil {
		return nil, err
	}
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, err
	}
	data := docsData{
		Title: doc.Info.Title, Version: doc.Info.Version, Description: doc.Info.Description,
		Base: strings.TrimSuffix(doc.Servers[0].URL, "/"),
	}
	paths := doc.Paths.Map()
	keys := make([]string, 0, len(paths))
	for k := range paths {
		keys = append(keys, k)
	}
	// In the order the document gives them.
	slices.SortFunc(keys, func(a, b string) int {
		return bytes.Index(source, []byte(a+":")) - bytes.Index(source, []byte(b+":"))
	})
	seen := map[string]bool{}
	for _, k := range keys {
		for method, op := range paths[k].Operations() {
			for status, r := range op.Responses.Map() {
				if status[0] != '2' && !seen[status] {
					seen[status] = true
					data.Errors = append(data.Errors, statusDoc{Status: status, Description: *r.Value.Description})
				}
			}
			if op.Responses.Status(200) == nil || method != "POST" {
				data.Uploads = append(data.Uploads, protocolOperation{Method: method, Path: k, Summary: op.Summary, Description: op.Description})
				continue
			}
			data.Operations = append(data.Operations, command(k, op))
		}
	}
	slices.SortFunc(data.Uploads, func(a, b protocolOperation) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(methodOrder(a.Method), methodOrder(b.Method)))
	})
	slices.SortFunc(data.Errors, func(a, b statusDoc) int { return strings.Compare(a.Status, b.Status) })
	var out bytes.Buffer
	if err := docsPage.Execute(&out, data); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// command is the page's part of a command's operation at path.
func command(path string, op *openapi3.Operation) operation {
	o := operation{Name: op.OperationID, Path: path, Summary: op.Summary, Description: op.Description}
	if op.RequestBody != nil {
		if mt := op.RequestBody.Value.Content.Get("application/json"); mt != nil {
			o.Request = fields(mt.Schema.Value)
		}
	}
	envelope := op.Responses.Status(200).Value.Content.Get("application/json").Schema.Value
	result := envelope.OneOf[0].Value.Properties[op.OperationID]
	o.ResultType = typeName(result)
	o.Result = fields(result.Value)
	return o
}

// methodOrder orders an endpoint's methods as a client uses them.
func methodOrder(method string) string {
	return fmt.Sprint(strings.Index("OPTIONS POST HEAD PATCH DELETE", method))
}

func fields(s *openapi3.Schema) []field {
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]field, 0, len(names))
	for _, name := range names {
		p := s.Properties[name]
		f := field{Name: name, Type: typeName(p), Description: p.Value.Description, Required: slices.Contains(s.Required, name)}
		if p.Value.Default != nil {
			f.Default = toString(p.Value.Default)
		}
		if len(p.Value.Enum) > 0 {
			values := make([]string, len(p.Value.Enum))
			for i, v := range p.Value.Enum {
				values[i] = toString(v)
			}
			f.Type += ": " + strings.Join(values, " | ")
		}
		out = append(out, f)
	}
	return out
}

func typeName(ref *openapi3.SchemaRef) string {
	switch {
	case ref.Ref != "":
		return ref.Ref[strings.LastIndex(ref.Ref, "/")+1:]
	case ref.Value.Type != nil && ref.Value.Type.Is("array") && ref.Value.Items != nil:
		return "array of " + typeName(ref.Value.Items)
	case ref.Value.Type != nil:
		return strings.Join(ref.Value.Type.Slice(), " | ")
	}
	return "any"
}

func toString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case bool:
		if v {
			return "true"
		}
		return "false"
	}
	b, _ := json.Marshal(v)
	return string(b)
}
