package gateway_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// TestKeyPaths: a key scoped to /incoming/ reaches nothing else on its
// connection, however a path is named: outside, through "..", through a
// symlink the server resolves outside, or as the other side of a rename,
// copy or symlink. Each refusal is 403 path_not_allowed naming the field;
// the symlink leading out cannot be moved.
func TestKeyPaths(t *testing.T) {
	f := newFixture(t, func(k *v1alpha1.ApiKey) { k.Spec.Paths = []string{"/incoming/"} })
	for _, d := range []string{"incoming", "private"} {
		must(t, os.Mkdir(filepath.Join(f.sshd.Dir, d), 0o755))
	}
	must(t, os.WriteFile(filepath.Join(f.sshd.Dir, "private", "secret.txt"), []byte("secret"), 0o644))
	must(t, os.Symlink("../private", filepath.Join(f.sshd.Dir, "incoming", "escape")))
	for _, p := range []string{"incoming", "private", "private/secret.txt", "incoming/escape"} {
		must(t, os.Lchown(filepath.Join(f.sshd.Dir, p), f.sshd.UID, f.sshd.GID))
	}
	ctx := context.Background()
	url := baseURL + "/" + f.slug

	for _, allowed := range []struct{ command, body string }{
		{"write", `{"path": "incoming/a.txt", "file": {"text": "a"}}`},
		{"write", `{"path": "/incoming/new/b.txt", "file": {"text": "b"}, "createParents": true}`},
		{"list", `{"path": "incoming"}`},
		{"rename", `{"from": "incoming/a.txt", "to": "incoming/c.txt"}`},
		{"copy", `{"from": "incoming/c.txt", "to": "incoming/d.txt"}`},
		{"symlink", `{"path": "incoming/link", "target": "/incoming/d.txt"}`},
	} {
		if status, _, out := post(t, ctx, url, f.token, allowed.command, allowed.body); status != http.StatusOK || out["error"] != nil {
			t.Errorf("%s %s: %d %v, want 200", allowed.command, allowed.body, status, out)
		}
	}
	for _, refused := range []struct{ command, body, field string }{
		{"write", `{"path": "private/x.txt", "file": {"text": "x"}}`, "path"},
		// Checked with its temporary file's open: refused, it leaves
		// nothing where the link leads (the entries checked below).
		{"write", `{"path": "incoming/escape/x.txt", "file": {"text": "x"}}`, "path"},
		{"stat", `{"path": "incoming/../private/secret.txt"}`, "path"},
		{"read", `{"path": "incoming/escape/secret.txt"}`, "path"},
		{"list", `{"path": "/"}`, "path"},
		{"list", `{"path": "incoming/escape"}`, "path"},
		{"rename", `{"from": "incoming/c.txt", "to": "private/c.txt"}`, "to"},
		{"rename", `{"from": "private/secret.txt", "to": "incoming/s.txt"}`, "from"},
		{"copy", `{"from": "private/secret.txt", "to": "incoming/s.txt"}`, "from"},
		{"copy", `{"from": "incoming/d.txt", "to": "incoming/escape/d.txt"}`, "to"},
		{"symlink", `{"path": "incoming/out", "target": "/private/secret.txt"}`, "target"},
		{"rmdir", `{"path": "private", "recursive": true}`, "path"},
		{"readlink", `{"path": "incoming/escape"}`, "target"},
	} {
		status, _, out := post(t, ctx, url, f.token, refused.command, refused.body)
		e, _ := out["error"].(map[string]any)
		if status != http.StatusForbidden || errorCode(out) != "path_not_allowed" || e["field"] != refused.field {
			t.Errorf("%s %s: %d %v, want 403 path_not_allowed for %s", refused.command, refused.body, status, out, refused.field)
		}
	}
	// The link leading out stays where it is (docs/gateway.md).
	status, _, out := post(t, ctx, url, f.token, "rename", `{"from": "incoming/escape", "to": "incoming/d.txt", "overwrite": true}`)
	if e, _ := out["error"].(map[string]any); status != http.StatusForbidden || errorCode(out) != "symlink_not_allowed" || e["field"] != "from" {
		t.Errorf("renaming the link leading out: %d %v, want 403 symlink_not_allowed for from", status, out)
	}
	if _, err := os.Stat(filepath.Join(f.sshd.Dir, "private", "secret.txt")); err != nil {
		t.Errorf("the file outside the paths: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(f.sshd.Dir, "private")); len(entries) != 1 {
		t.Errorf("the directory outside the paths holds %d entries, want its one", len(entries))
	}
}
