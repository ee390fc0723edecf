package tenant

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestParsePaths: the key form's folders become spec.paths, or a problem
// said in the form's words.
func TestParsePaths(t *testing.T) {
	for field, want := range map[string][]string{
		"":                             nil,
		"/incoming/":                   {"/incoming/"},
		" /a ,\n/b/\r\n\n/a , ":        {"/a", "/b/"},
		"/reports/2026/, /out/archive": {"/reports/2026/", "/out/archive"},
	} {
		if got, problem := parsePaths(field); problem != "" || !slices.Equal(got, want) {
			t.Errorf("%q: %q %s, want %q", field, got, problem, want)
		}
	}
	var many []string
	for i := range maxKeyPaths + 1 {
		many = append(many, fmt.Sprintf("/%d", i))
	}
	for field, says := range map[string]string{
		"incoming":               "start it with /",
		"/incoming/../etc":       "a . or .. part",
		"/./x":                   "a . or .. part",
		strings.Join(many, "\n"): "at most 32",
	} {
		if got, problem := parsePaths(field); got != nil || !strings.Contains(problem, says) {
			t.Errorf("%.40q: %q %q, want a problem saying %q", field, got, problem, says)
		}
	}
}
