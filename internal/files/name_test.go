package files

import (
	"path"
	"strings"
	"testing"
)

// FuzzEntryName: a name EntryName takes, joined to any folder, names a
// file directly in that folder, by that very name, which no server cuts
// short at a NUL byte.
func FuzzEntryName(f *testing.F) {
	for _, n := range []string{"a", ".", "..", "", "a/b", "/", "a\x00", "...", ".hidden", "\xff\xfe", "\x1b[31m", " ", strings.Repeat("n", 300)} {
		f.Add("/srv/in", n)
	}
	f.Fuzz(func(t *testing.T, dir, name string) {
		dir = path.Clean("/" + dir)
		joined := path.Join(dir, name)
		if EntryName(name) && (path.Dir(joined) != dir || path.Base(joined) != name || strings.ContainsRune(name, 0)) {
			t.Fatalf("%q in %q joins to %q", name, dir, joined)
		}
	})
}
