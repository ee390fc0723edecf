package commands

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"path"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/memfs"
	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/plainjson"
	"github.com/sftpgate/sftpgate/internal/tempname"
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

// FuzzDecode: any body runs every command of the table (its JSON form,
// its raw download's, on a server of a few files that refuses every
// change) to a result that encodes as the gateway answers it, or to a
// *BadRequest that names a field or a *Failure with a code; it never
// panics, and never fails otherwise.
func FuzzDecode(f *testing.F) {
	for _, b := range []string{``, `{}`, `{"path": "a", "file": {"text": "x"}}`, `{"path": 5}`, `[]`, `null`, `{"path": "a"} {}`, `{"a":`, `"x"`,
		`{"file": {"base64": "!!"}}`, `{"length": -1}`, `{"path": "sub", "limit": 2, "after": "a"}`, `{"path": "a.txt", "offset": 1, "length": 2}`,
		`{"from": "a.txt", "to": "b"}`, `{"path": "a.txt", "mode": "0644"}`, `{"path": "a.txt", "modified": "2024-01-02T03:04:05Z"}`,
		`{"path": "l", "target": "../x"}`, `{"path": "a.txt", "algorithm": "sha256"}`, `{"path": "sub", "recursive": true}`,
		`{"path": "/sub/../..", "followSymlinks": false}`, `{"path": "new", "parents": true}`} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, name := range Names() {
			c, _ := Lookup(string(name))
			res, err := c.Run(context.Background(), fuzzFS(), body)
			checkAnswer(t, name, body, res, err)
			if c.Download != nil {
				if file, _, err := c.Download(fuzzFS(), body); err == nil {
					_ = file.Close()
				} else {
					checkAnswer(t, name+" (raw)", body, nil, err)
				}
			}
		}
	})
}

// FuzzRawUpload: any query and body of a raw upload (write's and
// append's, Content-Type: application/octet-stream) ends as FuzzDecode's
// do.
func FuzzRawUpload(f *testing.F) {
	for _, q := range []string{"", "path=a.txt", "path=new&mode=0600&createParents=true", "path=a.txt&overwrite=false", "path=x&mode=abc",
		"path=x&other=1", "path=%00", "path=x&overwrite=maybe", "path=x&path=y"} {
		f.Add(q, []byte("content"))
	}
	f.Fuzz(func(t *testing.T, rawQuery string, body []byte) {
		query, err := url.ParseQuery(rawQuery)
		if err != nil {
			return // the gateway's router refuses it first
		}
		for _, name := range Names() {
			c, _ := Lookup(string(name))
			if c.Upload == nil {
				continue
			}
			res, err := c.Upload.Bytes(fuzzFS(), query, body)
			checkAnswer(t, name+" (raw bytes)", body, res, err)
			res, err = c.Upload.Stream(fuzzFS(), query, bytes.NewReader(body), int64(len(body)))
			checkAnswer(t, name+" (raw stream)", body, res, err)
		}
	})
}

// fuzzFS is a server of a few files below the root /srv, whatever the
// commands ask of it: every change is refused.
func fuzzFS() *FS {
	when := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	return &FS{Env: &Env{Root: "/srv"}, Files: memfs.New(map[string][]memfs.Entry{
		"/":        {{Name: "srv", Dir: true}},
		"/srv":     {{Name: "a.txt", Size: 3, ModTime: when}, {Name: "sub", Dir: true}},
		"/srv/sub": {{Name: "b", Size: 1, ModTime: when}},
	})}
}

// checkAnswer fails t unless err is one the gateway answers as the
// client's mistake or the server's refusal, or res encodes as the
// gateway's answer does.
func checkAnswer(t *testing.T, command v1alpha1.Command, body []byte, res any, err error) {
	t.Helper()
	var (
		bad     *BadRequest
		failure *Failure
	)
	switch {
	case errors.As(err, &bad):
		if bad.Field == "" {
			t.Fatalf("%s of %q: %v names no field", command, body, err)
		}
	case errors.As(err, &failure):
		if failure.Code == "" {
			t.Fatalf("%s of %q: %v has no code", command, body, err)
		}
	case err != nil:
		t.Fatalf("%s of %q: %v is neither a *BadRequest nor a *Failure", command, body, err)
	default:
		encoded, err := answerJSON(res)
		if err != nil || !json.Valid(encoded) {
			t.Fatalf("%s of %q: the result %#v does not encode (%v)", command, body, res, err)
		}
	}
}

// answerJSON encodes a result as the gateway's answers do (package
// answer): a Streamer writes its own.
func answerJSON(res any) ([]byte, error) {
	if s, ok := res.(interface{ WriteJSON(io.Writer) error }); ok {
		var buf bytes.Buffer
		err := s.WriteJSON(&buf)
		return buf.Bytes(), err
	}
	return plainjson.Marshal(res)
}

// FuzzListNames: whatever names a server gives a folder's entries (long,
// not UTF-8, control bytes, slashes, dots), a page of list names each
// entry as the server did, directly in the folder listed, sorted, after
// After and within Limit, with Next when more remain; and its answer
// decodes back to the same names wherever they are UTF-8.
func FuzzListNames(f *testing.F) {
	for _, n := range [][3]string{{"a", "b", "c"}, {"..", ".", ""}, {"a/b", "../x", "/"}, {"\xff\xfe", "é\x80", "x\x00y"},
		{"\x1b[31mred", "line\nbreak", "tab\t"}, {".sftpgate-x.tmp", "b", "b"}, {strings.Repeat("n", 300), "z", "y"}} {
		f.Add(n[0], n[1], n[2], "", 2)
		f.Add(n[0], n[1], n[2], "b", 0)
	}
	f.Fuzz(func(t *testing.T, n1, n2, n3, after string, limit int) {
		names := []string{n1, n2, n3}
		fs := &FS{Env: &Env{Root: "/srv"}, Files: memfs.New(map[string][]memfs.Entry{
			"/srv":   {{Name: "d", Dir: true}},
			"/srv/d": {{Name: n1, Size: 1}, {Name: n2, Dir: true}, {Name: n3, Size: 3}},
		})}
		body, err := json.Marshal(map[string]any{"path": "d", "after": after, "limit": limit})
		if err != nil {
			t.Fatal(err)
		}
		var sent listRequest // After as the gateway reads it: not UTF-8, U+FFFD
		if err := decode(body, &sent); err != nil {
			t.Fatal(err)
		}
		after = sent.After
		c, _ := Lookup("list")
		res, err := c.Run(context.Background(), fs, body)
		if limit < 0 || limit > MaxListLimit {
			if !errors.As(err, new(*BadRequest)) {
				t.Fatalf("limit %d: %v", limit, err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		page := res.(ListResult)
		if limit == 0 {
			limit = DefaultListLimit
		}
		var want []string
		for _, n := range names {
			if files.EntryName(n) && !tempname.Is(n) && n > after {
				want = append(want, n)
			}
		}
		slices.Sort(want)
		if more := len(want) > limit; more != (page.Next != "") {
			t.Fatalf("%q after %q, limit %d: next %q", names, after, limit, page.Next)
		}
		want = want[:min(len(want), limit)]
		var got []string
		for _, e := range page.Entries {
			got = append(got, e.Name)
			if e.Path != "/d/"+e.Name {
				t.Fatalf("entry %q is at %q, not in /d", e.Name, e.Path)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%q after %q, limit %d: listed %q, want %q", names, after, limit, got, want)
		}
		encoded, err := plainjson.Marshal(page)
		if err != nil {
			t.Fatal(err)
		}
		var back ListResult
		if err := json.Unmarshal(encoded, &back); err != nil {
			t.Fatal(err)
		}
		for i, e := range back.Entries {
			if utf8.ValidString(got[i]) && e.Name != got[i] {
				t.Fatalf("%q reads back as %q", got[i], e.Name)
			}
		}
	})
}

// FuzzChecksum: an Upload-Checksum taken says its algorithm and sum, and
// what it says parses back the same; one refused is a *BadRequest on the
// header.
func FuzzChecksum(f *testing.F) {
	for _, h := range []string{"", "sha256 47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=", "sha1 2jmj7l5rSw0yVb/vlWAYkK/YBwk=", "SHA256  47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU= ",
		"md5 1B2M2Y8AsgTpgAmY7PhCfg==", "sha256", "sha256 !!", "sha1 2jmj7l5rSw0yVb/vlWAYkK/YBwk"} {
		f.Add(h)
	}
	f.Fuzz(func(t *testing.T, header string) {
		c, err := ParseChecksum(header)
		var bad *BadRequest
		switch {
		case err != nil:
			if !errors.As(err, &bad) || bad.Field != "Upload-Checksum" {
				t.Fatalf("%q: %v", header, err)
			}
			return
		case c == nil:
			if header != "" {
				t.Fatalf("%q taken as no checksum", header)
			}
			return
		}
		again, err := ParseChecksum(c.Algorithm + " " + base64.StdEncoding.EncodeToString(c.Sum))
		if err != nil || again.Algorithm != c.Algorithm || !bytes.Equal(again.Sum, c.Sum) || c.hash().Size() != len(c.Sum) {
			t.Fatalf("%q: %+v does not parse back (%+v, %v)", header, c, again, err)
		}
	})
}
