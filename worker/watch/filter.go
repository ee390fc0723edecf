package watch

import (
	"fmt"
	"path"

	"github.com/sftpgate/sftpgate/internal/tempname"
)

// Filter says which files a watch reports: those that match an include
// pattern (all, with none) and no exclude pattern, a pattern matching a
// file's name or its path below the watched folder (Go's path.Match).
// sftpgate's own temporary files never are.
type Filter struct {
	Include, Exclude []string
}

// Check says why a pattern cannot work.
func (f Filter) Check() error {
	for _, p := range append(append([]string{}, f.Include...), f.Exclude...) {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("%q is not a glob pattern: %w", p, err)
		}
	}
	return nil
}

// Match reports whether the file at rel, a path below the watched folder
// (no leading slash), is reported.
func (f Filter) Match(rel string) bool {
	name := path.Base(rel)
	if tempname.Is(name) || matchAny(f.Exclude, name, rel) {
		return false
	}
	return len(f.Include) == 0 || matchAny(f.Include, name, rel)
}

func matchAny(patterns []string, name, rel string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
		if ok, _ := path.Match(p, rel); ok {
			return true
		}
	}
	return false
}
