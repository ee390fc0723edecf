// Package docs tests the repository's Markdown: every relative link leads
// to a file that exists and, with a #fragment, to a heading it has, so the
// README's table of links finds every page and section it names.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sftpgate/sftpgate/hack/repo"
)

var (
	link    = regexp.MustCompile(`\]\(([^)\s]+)\)|<img src="([^"]+)"`)
	heading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
)

func TestLinksLead(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(root, "README.md"), filepath.Join(root, "DEVELOPMENT.md"))
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, page)
		for _, m := range link.FindAllStringSubmatch(string(text), -1) {
			target := m[1] + m[2]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, fragment, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links to %s, which does not exist", name, target)
				continue
			}
			if fragment != "" && !anchors(t, path)[fragment] {
				t.Errorf("%s links to %s, which has no heading #%s", name, target, fragment)
			}
		}
	}
}

// anchors returns the fragments GitHub gives the headings of a Markdown
// file: lower case, spaces as hyphens, punctuation but hyphens dropped.
func anchors(t *testing.T, path string) map[string]bool {
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(string(text), -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				b.WriteRune(r)
			}
		}
		found[b.String()] = true
	}
	return found
}

// TestREADMEIsAFrontDoor keeps the README to what a newcomer reads first;
// the rest belongs in docs/ and DEVELOPMENT.md, linked from its table.
func TestREADMEIsAFrontDoor(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(text), "\n"); lines > 150 {
		t.Errorf("README.md has %d lines; move what a newcomer does not need first into docs/", lines)
	}
}
