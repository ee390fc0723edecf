// Package conformance is one table of every gateway command, its success
// and its usual failures, run through a gateway against each SFTP server
// sftpgate ships or is tested with: a real OpenSSH sshd, the in-process
// test server and the demo server of make run. Every backend must give the
// same answers; a command added later gets its rows here.
package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sftpgate/sftpgate/internal/tempname"
)

// Target is a connection under test, reached through a gateway.
type Target struct {
	// URL is where the connection's commands are: {gateway}/{slug}.
	URL   string
	Token string
	// Dir is the connection's root directory on this machine. Its parent
	// is the test's own: the table makes a directory there, outside the
	// root, for symlinks to lead to.
	Dir string
	// UID and GID own what the table makes on this machine (the user the
	// server logs in as); -1 keeps this process's.
	UID, GID int
	// ScopedToken is a key of the same connection limited to ScopedPath
	// (ApiKey.spec.paths), for the rows of scoped keys: a target without
	// one fails them.
	ScopedToken string
	// MaxInFlight, when set, is the most requests the gateway takes at
	// once from the scoped key's namespace: Race sends no more.
	MaxInFlight int
	// Check, when set, checks each answer, as against the OpenAPI
	// document.
	Check func(t testing.TB, req *http.Request, body string, resp *http.Response, raw []byte)
}

// step is one request of a row, or a look at the files on this machine,
// and what it must find. In paths and bodies, $d is the row's own
// directory, as the client names it.
type step struct {
	command, body string
	// want is "ok", the code of the server's refusal (a 200 with an error),
	// or an HTTP status and code ("400 invalid_request").
	want string
	// result is JSON the result must match: an object's listed fields,
	// or the whole value.
	result string
	// query and upload make it a raw upload; download a raw read, whose
	// bytes must be result.
	query    string
	upload   []byte
	download bool
	// local looks at the files on this machine; d is $d's path there.
	local func(t *testing.T, d string)
	// scoped sends the request with the target's ScopedToken.
	scoped bool
	// tus makes it a request of a resumable upload (uploads.go).
	tus *tusCall
}

func ok(command, body, result string) step {
	return step{command: command, body: body, want: "ok", result: result}
}
func fails(command, body, want string) step { return step{command: command, body: body, want: want} }

// ScopedPath is what a target's ScopedToken is limited to.
const ScopedPath = "/scoped/"

// asScoped is s sent with the key limited to ScopedPath.
func asScoped(s step) step {
	s.scoped = true
	return s
}

// scopeLink makes a symlink in ScopedPath, named as $d, that leads to $d,
// outside it.
var scopeLink = step{local: func(t *testing.T, d string) {
	t.Helper()
	must(t, os.Symlink(filepath.Join("..", filepath.Base(d)), filepath.Join(filepath.Dir(d), "scoped", filepath.Base(d))))
}}

// row is a case of one command: the steps to set it up, the request, and
// the checks after.
type row struct {
	command, name string
	steps         []step
}

// file checks that p (relative to $d) holds content.
func file(p, content string) step {
	return step{local: func(t *testing.T, d string) {
		t.Helper()
		if b, err := os.ReadFile(filepath.Join(d, p)); err != nil || string(b) != content {
			t.Errorf("%s holds %q (%v), want %q", p, b, err, content)
		}
	}}
}

// absent checks that nothing is at p (relative to $d).
func absent(p string) step {
	return step{local: func(t *testing.T, d string) {
		t.Helper()
		if _, err := os.Lstat(filepath.Join(d, p)); !os.IsNotExist(err) {
			t.Errorf("%s exists (%v), want nothing there", p, err)
		}
	}}
}

// only checks that $d holds exactly names: no temporary files are left.
func only(names ...string) step {
	return step{local: func(t *testing.T, d string) {
		t.Helper()
		entries, err := os.ReadDir(d)
		var got []string
		for _, e := range entries {
			name := e.Name()
			if tempname.Is(name) {
				name = tempFile
			}
			got = append(got, name)
		}
		if err != nil || !slices.Equal(got, names) {
			t.Errorf("the directory holds %v (%v), want %v", got, err, names)
		}
	}}
}

const (
	writeA    = `{"path": "$d/a", "file": {"text": "alpha"}}`
	mkdirSub  = `{"path": "$d/sub"}`
	writeSubF = `{"path": "$d/sub/f", "file": {"text": "f"}}`
	linkToA   = `{"path": "$d/link", "target": "$d/a"}`
)

// storedAbsolute checks that the symlink at p (relative to $d) holds an
// absolute target.
func storedAbsolute(p string) step {
	return step{local: func(t *testing.T, d string) {
		t.Helper()
		if target, err := os.Readlink(filepath.Join(d, p)); err != nil || !filepath.IsAbs(target) {
			t.Errorf("%s holds %q (%v), want an absolute target", p, target, err)
		}
	}}
}

// gatewayTemp makes a file with a name of the gateway's temporary files.
var gatewayTemp = step{local: func(t *testing.T, d string) {
	t.Helper()
	must(t, os.WriteFile(filepath.Join(d, ".sftpgate-0123456789abcdef.tmp"), nil, 0o644))
}}

// escape makes $d/escape a symlink to the directory outside the root,
// which holds a file "secret".
var escape = step{local: func(t *testing.T, d string) {
	t.Helper()
	must(t, os.Symlink(filepath.Join("..", "..", outsideName), filepath.Join(d, "escape")))
}}

// rows is the table.
var rows = []row{
	{"write", "with a key limited to /scoped/", []step{
		asScoped(ok("write", `{"path": "/scoped$d.txt", "file": {"text": "in"}}`, `{"path": "/scoped$d.txt"}`)),
		asScoped(fails("write", `{"path": "$d/out", "file": {"text": "out"}}`, "403 path_not_allowed")),
		absent("out"),
	}},
	{"read", "through a symlink out of a key's /scoped/", []step{
		ok("write", `{"path": "$d/x", "file": {"text": "x"}}`, ""), scopeLink,
		asScoped(fails("read", `{"path": "/scoped$d/x"}`, "403 path_not_allowed")),
	}},
	{"rename", "out of a key's /scoped/", []step{
		asScoped(ok("write", `{"path": "/scoped$d-r", "file": {"text": "r"}}`, "")),
		asScoped(fails("rename", `{"from": "/scoped$d-r", "to": "$d/r"}`, "403 path_not_allowed")),
		absent("r"),
	}},
	{"write", "a new file", []step{
		ok("write", `{"path": "$d/a", "file": {"text": "héllo"}}`, `{"path": "$d/a", "bytesWritten": 6}`), file("a", "héllo"),
	}},
	{"write", "base64, mode and parents", []step{
		ok("write", `{"path": "$d/x/y/b", "file": {"base64": "AP8="}, "mode": "0600", "createParents": true}`, `{"bytesWritten": 2}`),
		ok("stat", `{"path": "$d/x/y/b"}`, `{"type": "file", "size": 2, "mode": "0600"}`),
	}},
	{"write", "over an existing file", []step{
		ok("write", writeA, ""), ok("chmod", `{"path": "$d/a", "mode": "0640"}`, ""),
		ok("write", `{"path": "$d/a", "file": {"text": "new"}}`, `{"bytesWritten": 3}`), file("a", "new"),
		ok("stat", `{"path": "$d/a"}`, `{"mode": "0640"}`), only("a"),
	}},
	{"write", "through a symlink", []step{
		ok("write", writeA, ""), ok("symlink", linkToA, ""),
		ok("write", `{"path": "$d/link", "file": {"text": "via link"}}`, ""), file("a", "via link"),
		ok("stat", `{"path": "$d/link", "followSymlinks": false}`, `{"type": "symlink"}`),
	}},
	{"write", "overwrite false on an existing file", []step{
		ok("write", writeA, ""), fails("write", `{"path": "$d/a", "file": {"text": "x"}, "overwrite": false}`, "already_exists"), file("a", "alpha"),
	}},
	{"write", "into a missing directory", []step{fails("write", `{"path": "$d/no/a", "file": {"text": "x"}}`, "not_found")}},
	{"write", "onto a directory", []step{
		ok("mkdir", mkdirSub, ""), fails("write", `{"path": "$d/sub", "file": {"text": "x"}}`, "is_a_directory"), only("sub"),
	}},
	{"write", "raw, new and over an existing file", []step{
		{command: "write", query: "path=$d/r&mode=0600", upload: []byte("raw bytes"), want: "ok", result: `{"bytesWritten": 9}`},
		{command: "write", query: "path=$d/r", upload: []byte("again"), want: "ok"}, file("r", "again"),
		ok("stat", `{"path": "$d/r"}`, `{"mode": "0600"}`), only("r"),
		{command: "write", query: "path=$d/r&overwrite=false", upload: []byte("x"), want: "already_exists"},
	}},
	{"write", "a path out of the root", []step{
		escape, fails("write", `{"path": "$d/escape/f", "file": {"text": "x"}}`, "400 invalid_request"),
	}},

	{"append", "to an existing file", []step{
		ok("write", writeA, ""), ok("append", `{"path": "$d/a", "file": {"text": "+1"}}`, `{"size": 7}`), file("a", "alpha+1"),
	}},
	{"append", "a large part, in order", []step{
		ok("write", writeA, ""), ok("append", `{"path": "$d/a", "file": {"text": "`+strings.Repeat("0123456789", 20000)+`"}}`, `{"size": 200005}`),
		file("a", "alpha"+strings.Repeat("0123456789", 20000)),
	}},
	{"append", "creates a missing file", []step{ok("append", `{"path": "$d/n", "file": {"text": "one"}}`, `{"size": 3}`), file("n", "one")}},
	{"append", "raw", []step{
		ok("write", writeA, ""), {command: "append", query: "path=$d/a", upload: []byte("!"), want: "ok", result: `{"size": 6}`}, file("a", "alpha!"),
	}},
	{"append", "into a missing directory", []step{fails("append", `{"path": "$d/no/a", "file": {"text": "x"}}`, "not_found")}},
	{"append", "to a directory", []step{ok("mkdir", mkdirSub, ""), fails("append", `{"path": "$d/sub", "file": {"text": "x"}}`, "is_a_directory")}},

	{"read", "text, a part and base64", []step{
		ok("write", writeA, ""),
		ok("read", `{"path": "$d/a"}`, `{"path": "$d/a", "size": 5, "offset": 0, "encoding": "text", "content": "alpha"}`),
		ok("read", `{"path": "$d/a", "offset": 1, "length": 3}`, `{"content": "lph"}`),
		ok("read", `{"path": "$d/a", "encoding": "base64"}`, `{"content": "YWxwaGE="}`),
	}},
	{"read", "raw", []step{ok("write", writeA, ""), {command: "read", body: `{"path": "$d/a"}`, download: true, want: "ok", result: "alpha"}}},
	{"read", "a missing file", []step{fails("read", `{"path": "$d/none"}`, "not_found")}},
	{"read", "a directory", []step{ok("mkdir", mkdirSub, ""), fails("read", `{"path": "$d/sub"}`, "is_a_directory")}},
	{"read", "bytes as text", []step{ok("write", `{"path": "$d/b", "file": {"base64": "AP8="}}`, ""), fails("read", `{"path": "$d/b"}`, "not_text")}},
	{"read", "out of the root", []step{escape, fails("read", `{"path": "$d/escape/secret"}`, "400 invalid_request")}},

	{"list", "sorted, a page at a time, without the gateway's temporary files", []step{
		ok("write", writeA, ""), ok("mkdir", mkdirSub, ""), ok("write", `{"path": "$d/c", "file": {"text": "c"}}`, ""), gatewayTemp,
		ok("list", `{"path": "$d", "limit": 2}`, `{"path": "$d", "entries": [
			{"name": "a", "path": "$d/a", "type": "file", "size": 5},
			{"name": "c", "path": "$d/c", "type": "file", "size": 1}], "next": "c"}`),
		ok("list", `{"path": "$d", "after": "c"}`, `{"entries": [{"name": "sub", "type": "directory"}]}`),
	}},
	{"list", "a missing directory", []step{fails("list", `{"path": "$d/none"}`, "not_found")}},
	{"list", "a file", []step{ok("write", writeA, ""), fails("list", `{"path": "$d/a"}`, "not_a_directory")}},
	{"list", "out of the root", []step{escape, fails("list", `{"path": "$d/escape"}`, "400 invalid_request")}},

	{"stat", "a file, a directory and a symlink", []step{
		ok("write", writeA, ""), ok("mkdir", mkdirSub, ""), ok("symlink", linkToA, ""), escape,
		ok("stat", `{"path": "$d/a"}`, `{"name": "a", "path": "$d/a", "type": "file", "size": 5}`),
		ok("stat", `{"path": "$d/sub"}`, `{"type": "directory"}`),
		ok("stat", `{"path": "$d/link"}`, `{"type": "file", "size": 5}`),
		ok("stat", `{"path": "$d/link", "followSymlinks": false}`, `{"name": "link", "type": "symlink"}`),
		ok("stat", `{"path": "$d/escape", "followSymlinks": false}`, `{"type": "symlink"}`),
	}},
	{"stat", "a missing file", []step{fails("stat", `{"path": "$d/none"}`, "not_found")}},

	{"exists", "yes and no", []step{
		ok("write", writeA, ""), ok("exists", `{"path": "$d/a"}`, `true`), ok("exists", `{"path": "$d/none"}`, `false`),
		ok("exists", `{"path": "$d/none/deeper"}`, `false`),
	}},

	{"mkdir", "one and with parents", []step{
		ok("mkdir", mkdirSub, `{"path": "$d/sub"}`), ok("mkdir", `{"path": "$d/p/q/r", "parents": true}`, ""),
		ok("mkdir", `{"path": "$d/p/q/r", "parents": true}`, ""), ok("stat", `{"path": "$d/p/q/r"}`, `{"type": "directory"}`),
	}},
	{"mkdir", "an existing one", []step{ok("mkdir", mkdirSub, ""), fails("mkdir", mkdirSub, "already_exists")}},
	{"mkdir", "in a missing directory", []step{fails("mkdir", `{"path": "$d/no/sub"}`, "not_found")}},
	{"mkdir", "through a file", []step{ok("write", writeA, ""), fails("mkdir", `{"path": "$d/a/sub", "parents": true}`, "not_a_directory")}},

	{"rmdir", "an empty directory", []step{ok("mkdir", mkdirSub, ""), ok("rmdir", mkdirSub, `{"path": "$d/sub"}`), absent("sub")}},
	{"rmdir", "a tree", []step{
		ok("mkdir", `{"path": "$d/sub/deep/er", "parents": true}`, ""), ok("write", writeSubF, ""),
		ok("write", `{"path": "$d/sub/deep/er/g", "file": {"text": "g"}}`, ""),
		ok("rmdir", `{"path": "$d/sub", "recursive": true}`, ""), only(),
	}},
	{"rmdir", "a tree holding a symlink to another directory", []step{
		ok("mkdir", `{"path": "$d/keep"}`, ""), ok("write", `{"path": "$d/keep/precious", "file": {"text": "p"}}`, ""),
		ok("mkdir", mkdirSub, ""), ok("symlink", `{"path": "$d/sub/to-keep", "target": "$d/keep"}`, ""),
		ok("rmdir", `{"path": "$d/sub", "recursive": true}`, ""), absent("sub"), file("keep/precious", "p"),
	}},
	{"rmdir", "a directory that is not empty", []step{
		ok("mkdir", mkdirSub, ""), ok("write", writeSubF, ""), fails("rmdir", mkdirSub, "not_empty"), file("sub/f", "f"),
	}},
	{"rmdir", "a missing directory", []step{fails("rmdir", `{"path": "$d/none"}`, "not_found")}},
	{"rmdir", "a file", []step{ok("write", writeA, ""), fails("rmdir", `{"path": "$d/a"}`, "not_a_directory")}},
	{"rmdir", "the root", []step{fails("rmdir", `{"path": "/", "recursive": true}`, "400 invalid_request")}},

	{"unlink", "a file", []step{ok("write", writeA, ""), ok("unlink", `{"path": "$d/a"}`, `{"path": "$d/a"}`), absent("a")}},
	{"unlink", "a symlink, not its target", []step{
		ok("write", writeA, ""), ok("symlink", linkToA, ""), ok("unlink", `{"path": "$d/link"}`, ""), absent("link"), file("a", "alpha"),
		escape, ok("unlink", `{"path": "$d/escape"}`, ""), absent("escape"),
	}},
	{"unlink", "a missing file", []step{fails("unlink", `{"path": "$d/none"}`, "not_found")}},
	{"unlink", "a directory", []step{ok("mkdir", mkdirSub, ""), fails("unlink", mkdirSub, "is_a_directory")}},

	{"ping", "answers", []step{ok("ping", ``, `{"ok": true}`)}},

	{"rename", "a file and a directory", []step{
		ok("write", writeA, ""), ok("rename", `{"from": "$d/a", "to": "$d/b"}`, `{"from": "$d/a", "to": "$d/b"}`), file("b", "alpha"), absent("a"),
		ok("mkdir", mkdirSub, ""), ok("write", writeSubF, ""), ok("rename", `{"from": "$d/sub", "to": "$d/moved"}`, ""), file("moved/f", "f"),
	}},
	{"rename", "onto an existing file", []step{
		ok("write", writeA, ""), ok("write", `{"path": "$d/b", "file": {"text": "bravo"}}`, ""),
		fails("rename", `{"from": "$d/a", "to": "$d/b"}`, "already_exists"), file("b", "bravo"),
		ok("rename", `{"from": "$d/a", "to": "$d/b", "overwrite": true}`, ""), file("b", "alpha"), only("b"),
	}},
	{"rename", "a missing file", []step{fails("rename", `{"from": "$d/none", "to": "$d/b"}`, "not_found")}},
	{"rename", "a symlink, or a directory holding one, below a root path", []step{
		ok("write", writeA, ""), ok("symlink", linkToA, ""),
		fails("rename", `{"from": "$d/link", "to": "$d/moved"}`, "403 symlink_not_allowed"),
		ok("mkdir", mkdirSub, ""), ok("symlink", `{"path": "$d/sub/deep", "target": "$d/a"}`, ""),
		fails("rename", `{"from": "$d/sub", "to": "$d/moved"}`, "403 symlink_not_allowed"),
		escape, fails("rename", `{"from": "$d/escape", "to": "$d/moved", "overwrite": true}`, "403 symlink_not_allowed"),
		absent("moved"), ok("unlink", `{"path": "$d/sub/deep"}`, ""), ok("rename", `{"from": "$d/sub", "to": "$d/moved"}`, ""),
	}},

	{"copy", "a file", []step{
		ok("write", `{"path": "$d/a", "file": {"text": "alpha"}, "mode": "0640"}`, ""),
		ok("copy", `{"from": "$d/a", "to": "$d/b"}`, `{"from": "$d/a", "to": "$d/b", "bytesCopied": 5}`), file("b", "alpha"),
		ok("stat", `{"path": "$d/b"}`, `{"mode": "0640"}`),
	}},
	{"copy", "onto an existing file", []step{
		ok("write", writeA, ""), ok("write", `{"path": "$d/b", "file": {"text": "bravo"}}`, ""),
		fails("copy", `{"from": "$d/a", "to": "$d/b"}`, "already_exists"), file("b", "bravo"),
		ok("copy", `{"from": "$d/a", "to": "$d/b", "overwrite": true}`, ""), file("b", "alpha"), only("a", "b"),
	}},
	{"copy", "onto itself", []step{
		ok("write", writeA, ""), ok("symlink", linkToA, ""),
		fails("copy", `{"from": "$d/a", "to": "$d/link", "overwrite": true}`, "400 invalid_request"), file("a", "alpha"),
	}},
	{"copy", "a missing file", []step{fails("copy", `{"from": "$d/none", "to": "$d/b"}`, "not_found")}},
	{"copy", "a directory", []step{ok("mkdir", mkdirSub, ""), fails("copy", `{"from": "$d/sub", "to": "$d/b"}`, "is_a_directory")}},
	{"copy", "from out of the root", []step{escape, fails("copy", `{"from": "$d/escape/secret", "to": "$d/b"}`, "400 invalid_request")}},

	{"chmod", "a file", []step{
		ok("write", writeA, ""), ok("chmod", `{"path": "$d/a", "mode": "0604"}`, `{"path": "$d/a"}`), ok("stat", `{"path": "$d/a"}`, `{"mode": "0604"}`),
	}},
	{"chmod", "a missing file", []step{fails("chmod", `{"path": "$d/none", "mode": "0600"}`, "not_found")}},

	{"chtimes", "a file", []step{
		ok("write", writeA, ""), ok("chtimes", `{"path": "$d/a", "modified": "2020-01-02T03:04:05Z"}`, `{"path": "$d/a"}`),
		ok("stat", `{"path": "$d/a"}`, `{"modified": "2020-01-02T03:04:05Z", "accessed": "2020-01-02T03:04:05Z"}`),
	}},
	{"chtimes", "a missing file", []step{fails("chtimes", `{"path": "$d/none", "modified": "2020-01-02T03:04:05Z"}`, "not_found")}},

	{"symlink", "absolute and relative targets", []step{
		ok("write", writeA, ""), ok("symlink", linkToA, `{"path": "$d/link", "target": "$d/a"}`),
		ok("read", `{"path": "$d/link"}`, `{"content": "alpha"}`),
		ok("symlink", `{"path": "$d/rel", "target": "a"}`, `{"target": "$d/a"}`), ok("read", `{"path": "$d/rel"}`, `{"content": "alpha"}`),
		ok("symlink", `{"path": "$d/up", "target": "../../../../$d/a"}`, `{"target": "$d/a"}`), ok("hash", `{"path": "$d/up"}`, `{"size": 5}`),
	}},
	{"symlink", "to a directory holding a symlink, below a root path", []step{
		ok("write", writeA, ""), ok("mkdir", mkdirSub, ""), ok("symlink", `{"path": "$d/sub/l", "target": "$d/a"}`, ""),
		fails("symlink", `{"path": "$d/to-sub", "target": "$d/sub"}`, "403 symlink_not_allowed"),
		ok("symlink", `{"path": "$d/to-l", "target": "$d/sub/l"}`, ""), absent("to-sub"),
	}},
	{"symlink", "stored absolute, so that moving it never changes where it leads", []step{
		ok("mkdir", `{"path": "$d/x/y", "parents": true}`, ""), ok("write", writeA, ""),
		ok("symlink", `{"path": "$d/x/y/l", "target": "../../a"}`, `{"target": "$d/a"}`), storedAbsolute("x/y/l"),
		ok("readlink", `{"path": "$d/x/y/l"}`, `{"target": "$d/a"}`), ok("read", `{"path": "$d/x/y/l"}`, `{"content": "alpha"}`),
	}},
	{"symlink", "over an existing name", []step{ok("write", writeA, ""), fails("symlink", `{"path": "$d/a", "target": "$d/a"}`, "already_exists")}},

	{"readlink", "a symlink", []step{
		ok("write", writeA, ""), ok("symlink", linkToA, ""), ok("readlink", `{"path": "$d/link"}`, `{"path": "$d/link", "target": "$d/a"}`),
	}},
	{"readlink", "a missing name", []step{fails("readlink", `{"path": "$d/none"}`, "not_found")}},
	{"readlink", "a file", []step{ok("write", writeA, ""), fails("readlink", `{"path": "$d/a"}`, "failure")}},
	{"readlink", "out of the root", []step{escape, fails("readlink", `{"path": "$d/escape"}`, "400 invalid_request")}},

	{"realpath", "through a symlink", []step{
		ok("mkdir", mkdirSub, ""), ok("symlink", `{"path": "$d/link", "target": "$d/sub"}`, ""),
		ok("realpath", `{"path": "$d/link"}`, `{"path": "$d/sub"}`), ok("realpath", `{"path": "$d/link/new"}`, `{"path": "$d/sub/new"}`),
		ok("realpath", `{"path": "$d/./sub/../link"}`, `{"path": "$d/sub"}`),
	}},
	{"realpath", "below a missing directory", []step{fails("realpath", `{"path": "$d/none/deeper"}`, "not_found")}},
	{"realpath", "out of the root", []step{escape, fails("realpath", `{"path": "$d/escape"}`, "400 invalid_request")}},

	{"statvfs", "the root's file system", []step{ok("statvfs", ``, `{"path": "/"}`), ok("statvfs", `{"path": "$d"}`, `{"path": "$d"}`)}},
	{"statvfs", "a missing path", []step{fails("statvfs", `{"path": "$d/none"}`, "not_found")}},

	{"hash", "sha256 and md5", []step{
		ok("write", `{"path": "$d/a", "file": {"text": "abc"}}`, ""),
		ok("hash", `{"path": "$d/a"}`, `{"algorithm": "sha256", "hash": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "size": 3}`),
		ok("hash", `{"path": "$d/a", "algorithm": "md5"}`, `{"hash": "900150983cd24fb0d6963f7d28e17f72"}`),
	}},
	{"hash", "a missing file", []step{fails("hash", `{"path": "$d/none"}`, "not_found")}},
	{"hash", "a directory", []step{ok("mkdir", mkdirSub, ""), fails("hash", `{"path": "$d/sub"}`, "is_a_directory")}},
}

// noFailureRow lists the commands that have no usual failure to show.
var noFailureRow = map[string]bool{"ping": true, "exists": true}

// outsideName is the directory beside the root, outside it.
const outsideName = "outside"

// Run runs the table against target, a row at a time, each in a directory
// of its own under the root.
func Run(t *testing.T, target Target) {
	outside := filepath.Join(filepath.Dir(target.Dir), outsideName)
	mkdirOwned(t, target, outside)
	mkdirOwned(t, target, filepath.Join(target.Dir, ScopedPath))
	must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644))
	t.Cleanup(func() { _ = os.RemoveAll(outside) })
	for i, r := range slices.Concat(rows, uploadRows) {
		t.Run(r.command+"/"+r.name, func(t *testing.T) {
			d := fmt.Sprintf("/%s-%d", r.command, i)
			local := filepath.Join(target.Dir, d)
			mkdirOwned(t, target, local)
			var upload string
			for _, s := range r.steps {
				switch {
				case s.local != nil:
					s.local(t, local)
				case s.tus != nil:
					runTus(t, target, d, s, &upload)
				default:
					run(t, target, d, s)
				}
			}
		})
	}
}

func mkdirOwned(t *testing.T, target Target, dir string) {
	t.Helper()
	must(t, os.Mkdir(dir, 0o755))
	if target.UID >= 0 {
		must(t, os.Chown(dir, target.UID, target.GID))
	}
}

// run sends a step's request and checks its answer.
func run(t *testing.T, target Target, d string, s step) {
	t.Helper()
	expand := func(v string) string { return strings.ReplaceAll(v, "$d", d) }
	body, query := expand(s.body), expand(s.query)
	var req *http.Request
	var err error
	if s.upload != nil {
		req, err = http.NewRequest(http.MethodPost, target.URL+"/"+s.command+"?"+query, bytes.NewReader(s.upload))
		body = string(s.upload)
	} else {
		req, err = http.NewRequest(http.MethodPost, target.URL+"/"+s.command, strings.NewReader(body))
	}
	must(t, err)
	token := target.Token
	if s.scoped {
		if target.ScopedToken == "" {
			t.Fatal("the target has no key limited to " + ScopedPath + ": give it a ScopedToken")
		}
		token = target.ScopedToken
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if s.upload != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	if s.download {
		req.Header.Set("Accept", "application/octet-stream")
	}
	got, _, raw := exchange(t, target, req, body)
	what := fmt.Sprintf("%s %s", s.command, body+query)
	if len(what) > 200 {
		what = what[:200] + "..."
	}
	if s.download && s.want == "ok" {
		if got != http.StatusOK || string(raw) != s.result {
			t.Errorf("%s: %d %q, want the bytes %q", what, got, raw, s.result)
		}
		return
	}
	var answer map[string]any
	if err := json.Unmarshal(raw, &answer); err != nil {
		t.Fatalf("%s: %d, not JSON: %q", what, got, raw)
	}
	errObj, _ := answer["error"].(map[string]any)
	switch status, code, isHTTP := strings.Cut(s.want, " "); {
	case s.want == "ok":
		if got != http.StatusOK || errObj != nil {
			t.Fatalf("%s: %d %s, want success", what, got, raw)
		}
		if s.result != "" {
			var want any
			must(t, json.Unmarshal([]byte(expand(s.result)), &want))
			if diff := match(want, answer[s.command]); diff != "" {
				t.Errorf("%s: result %s: %s", what, raw, diff)
			}
		}
	case isHTTP:
		if fmt.Sprint(got) != status || errObj == nil || errObj["code"] != code {
			t.Errorf("%s: %d %s, want %s", what, got, raw, s.want)
		}
	default:
		if got != http.StatusOK || errObj == nil || errObj["code"] != s.want || answer[s.command] != nil {
			t.Errorf("%s: %d %s, want the server's refusal %s", what, got, raw, s.want)
		}
	}
}

// exchange sends req, whose body is body, reads the answer, has the
// target check it, and returns its status, headers and body.
func exchange(t *testing.T, target Target, req *http.Request, body string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := client.Do(req)
	must(t, err)
	raw, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	must(t, err)
	if target.Check != nil {
		target.Check(t, req, body, resp, raw)
	}
	return resp.StatusCode, resp.Header, raw
}

// match compares got with want: objects on want's fields, arrays element
// by element, the rest as equal.
func match(want, got any) string {
	switch w := want.(type) {
	case map[string]any:
		g, isObject := got.(map[string]any)
		if !isObject {
			return fmt.Sprintf("%v is not an object", got)
		}
		for k, v := range w {
			if diff := match(v, g[k]); diff != "" {
				return k + ": " + diff
			}
		}
	case []any:
		g, isArray := got.([]any)
		if !isArray || len(g) != len(w) {
			return fmt.Sprintf("%v, want %d elements", got, len(w))
		}
		for i := range w {
			if diff := match(w[i], g[i]); diff != "" {
				return fmt.Sprintf("[%d]: %s", i, diff)
			}
		}
	default:
		if !reflect.DeepEqual(want, got) {
			return fmt.Sprintf("%v, want %v", got, want)
		}
	}
	return ""
}

// client gives up on an answer after a minute: a request that hangs fails
// its row.
var client = &http.Client{Timeout: time.Minute}

// Coverage reports the commands of names the table has no success row or
// no failure row for.
func Coverage(names []string) []string {
	succeeds, failsFor := map[string]bool{}, map[string]bool{}
	for _, r := range slices.Concat(rows, uploadRows) {
		for _, s := range r.steps {
			if s.command != r.command {
				continue
			}
			if s.want == "ok" {
				succeeds[r.command] = true
			} else {
				failsFor[r.command] = true
			}
		}
	}
	var missing []string
	for _, n := range names {
		if !succeeds[n] || !failsFor[n] && !noFailureRow[n] {
			missing = append(missing, n)
		}
	}
	return missing
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
