package openapi

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/sftpgate/sftpgate/hack/repo"
)

// TestGatewayDocsAgree keeps docs/gateway.md's command and error tables
// saying what the OpenAPI document says: the same commands, each row
// naming every field of its request and result and no field the document
// lacks, and the same error codes, and the same codes of command failures. The document is the source; the tables
// are its summary for people.
func TestGatewayDocsAgree(t *testing.T) {
	doc := load(t, "/")
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(root, "docs", "gateway.md"))
	if err != nil {
		t.Fatal(err)
	}

	rows := table(t, string(page), "## Commands", 3)
	documented := map[string]bool{}
	for _, row := range rows {
		name := strings.Trim(row[0], "`")
		documented[name] = true
		item := doc.Paths.Value("/{slug}/" + name)
		if item == nil || item.Post == nil {
			t.Errorf("docs/gateway.md lists %q, which the OpenAPI document does not have", name)
			continue
		}
		request, words := requestFields(item.Post)
		result := resultFields(item.Post, name)
		for _, word := range append(result, commandNames(doc)...) {
			words[word] = true // "a previous page's `next`", "as for `write`"
		}
		for _, field := range request {
			if !strings.Contains(row[1], "`"+field+"`") {
				t.Errorf("%s: the request column does not name field %q", name, field)
			}
		}
		for _, word := range backticked(row[1]) {
			if !words[word] {
				t.Errorf("%s: the request column names %q, which is no field, value or default of the request", name, word)
			}
		}
		for _, field := range result {
			if !regexp.MustCompile(`\b` + field + `\b`).MatchString(row[2]) {
				t.Errorf("%s: the result column does not name field %q", name, field)
			}
		}
	}
	for _, name := range commandNames(doc) {
		if !documented[name] {
			t.Errorf("docs/gateway.md's Commands table has no row for %q", name)
		}
	}

	var codes []string
	for _, row := range table(t, string(page), "## Answers", 3) {
		codes = append(codes, backticked(row[1])...)
	}
	enum := errorCodes(t, doc)
	slices.Sort(codes)
	slices.Sort(enum)
	if !slices.Equal(codes, enum) {
		t.Errorf("docs/gateway.md's Answers table has codes %v; the OpenAPI document %v", codes, enum)
	}

	_, sentence, _ := strings.Cut(string(page), "\nCodes: ")
	sentence, _, _ = strings.Cut(sentence, ".")
	failures := backticked(sentence)
	enum = enumOf(doc.Components.Schemas["Failure"].Value.Properties["code"].Value)
	slices.Sort(failures)
	slices.Sort(enum)
	if !slices.Equal(failures, enum) {
		t.Errorf("docs/gateway.md's Answers say command failures have codes %v; the OpenAPI document %v", failures, enum)
	}
}

// load returns the document served under base, checked to be valid.
func load(t *testing.T, base string) *openapi3.T {
	t.Helper()
	raw, err := Document(base)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return doc
}

// table returns the cells of the first table after heading whose rows
// start with a code span, checking each has columns cells.
func table(t *testing.T, page, heading string, columns int) [][]string {
	t.Helper()
	_, section, ok := strings.Cut(page, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/gateway.md has no %q", heading)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var rows [][]string
	for line := range strings.SplitSeq(section, "\n") {
		if !strings.HasPrefix(line, "| `") && !regexp.MustCompile(`^\| \d{3} \|`).MatchString(line) {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) != columns {
			t.Fatalf("%s: a row of %d cells, not %d: %s", heading, len(cells), columns, line)
		}
		rows = append(rows, cells)
	}
	if len(rows) == 0 {
		t.Fatalf("docs/gateway.md: no table under %q", heading)
	}
	return rows
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// backticked returns the code spans of s that are plain words: field
// names and values, not JSON examples.
func backticked(s string) []string {
	var words []string
	for _, m := range codeSpan.FindAllStringSubmatch(s, -1) {
		if regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`).MatchString(m[1]) {
			words = append(words, m[1])
		}
	}
	return words
}

// requestFields returns the fields of op's JSON request, and the words a
// description of them may name: the fields, their values and defaults,
// booleans, and the codes a refusal may have. (The caller adds command
// names and the result's fields.)
func requestFields(op *openapi3.Operation) ([]string, map[string]bool) {
	words := map[string]bool{"true": true, "false": true}
	for _, code := range []string{"not_found", "permission_denied", "already_exists", "not_empty", "not_a_directory", "is_a_directory", "not_text", "unsupported", "failure"} {
		words[code] = true
	}
	if op.RequestBody == nil {
		return nil, words
	}
	schema := op.RequestBody.Value.Content.Get("application/json").Schema.Value
	for name, prop := range schema.Properties {
		words[name] = true
		for _, v := range prop.Value.Enum {
			words[fmt.Sprint(v)] = true
		}
		if prop.Value.Default != nil {
			words[fmt.Sprint(prop.Value.Default)] = true
		}
	}
	return slices.Sorted(maps.Keys(schema.Properties)), words
}

// resultFields returns the fields of command's result in op's 200 answer.
func resultFields(op *openapi3.Operation, command string) []string {
	envelope := op.Responses.Status(200).Value.Content.Get("application/json").Schema.Value
	result := envelope.OneOf[0].Value.Properties[command].Value
	return slices.Sorted(maps.Keys(result.Properties))
}

// commandNames are the paths of commands: POST with a 200 envelope (the
// others are the tus endpoint's).
func commandNames(doc *openapi3.T) []string {
	var names []string
	for path, item := range doc.Paths.Map() {
		if item.Post != nil && item.Post.Responses.Status(200) != nil {
			names = append(names, strings.TrimPrefix(path, "/{slug}/"))
		}
	}
	return names
}

func errorCodes(t *testing.T, doc *openapi3.T) []string {
	t.Helper()
	return enumOf(doc.Components.Schemas["Error"].Value.Properties["error"].Value.Properties["code"].Value)
}

func enumOf(schema *openapi3.Schema) []string {
	var values []string
	for _, v := range schema.Enum {
		values = append(values, fmt.Sprint(v))
	}
	return values
}
