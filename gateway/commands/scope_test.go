package commands

import (
	"strings"
	"testing"
)

// within, compared in place, says what the prefix with a slash said.
func TestWithin(t *testing.T) {
	roots := []string{"/", "/srv", "/srv/", "/srv/a", ""}
	paths := []string{"/", "/srv", "/srv/", "/srv/a", "/srv/a/b", "/srva", "/sr", "srv", "", "/srv//a", "/x/srv"}
	for _, root := range roots {
		for _, p := range paths {
			want := p == root || strings.HasPrefix(p, strings.TrimSuffix(root, "/")+"/")
			if got := within(root, p); got != want {
				t.Errorf("within(%q, %q) = %v, want %v", root, p, got, want)
			}
		}
	}
	root, p := "/srv/", "/srv/a"
	if n := testing.AllocsPerRun(10, func() { withinSink = within(root, p) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// withinSink keeps what TestWithin's allocations run returns.
var withinSink bool
