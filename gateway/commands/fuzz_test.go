package commands

import (
	"errors"
	"path"
	"strings"
	"testing"
)

// FuzzLexical: whatever the client sends, the resolved path is clean and
// inside the root, and a NUL byte is refused.
func FuzzLexical(f *testing.F) {
	for _, p := range []string{"", "/", "a/b", "../../etc/passwd", "/etc/hostname", "a/../../b", "./././", "a\x00b", "..", "//x//y//", "a/./b/../c"} {
		f.Add("/home/user", p)
		f.Add("/", p)
	}
	f.Fuzz(func(t *testing.T, root, p string) {
		if !path.IsAbs(root) || path.Clean(root) != root {
			return // not a root: roots are clean absolute paths (status.rootPath)
		}
		got, err := Lexical(root, p)
		if strings.ContainsRune(p, 0) {
			if !errors.Is(err, ErrNULInPath) {
				t.Fatalf("NUL accepted: %q", p)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if !within(root, got) || path.Clean(got) != got {
			t.Fatalf("Lexical(%q, %q) = %q leaves the root", root, p, got)
		}
	})
}

// FuzzDecode: any body decodes into every command's request or fails with
// a *BadRequest that names a field; it never panics.
func FuzzDecode(f *testing.F) {
	for _, b := range []string{``, `{}`, `{"path": "a", "file": {"text": "x"}}`, `{"path": 5}`, `[]`, `null`, `{"path": "a"} {}`, `{"a":`, `"x"`, `{"file": {"base64": "!!"}}`, `{"length": -1}`} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, req := range []any{&writeRequest{}, &readRequest{}, &listRequest{}, &statRequest{}, &pathRequest{}, &mkdirRequest{}, &rmdirRequest{}, &pingRequest{}} {
			err := decode(body, req)
			var bad *BadRequest
			if err != nil && (!errors.As(err, &bad) || bad.Field == "") {
				t.Fatalf("decode(%q) into %T: %v is not a *BadRequest naming a field", body, req, err)
			}
		}
	})
}
