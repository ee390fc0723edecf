package gateway_test

import (
	"context"
	"fmt"
	iofs "io/fs"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/sftpgate/sftpgate/gateway"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/internal/sftpdir"
)

// TestCappedDirectoriesAnswerTooLarge: on a server that allows one SFTP
// channel per connection, list and recursive rmdir of a directory past
// --max-directory-entries answer 200 with the too_large failure, the tree
// is left whole, and the connection goes on serving.
func TestCappedDirectoriesAnswerTooLarge(t *testing.T) {
	sshd := testsshd.StartWith(t, "MaxSessions 1")
	f := serve(t, newConnectionTo(t, sshd.Host, sshd.Port, testsshd.User, sshd.Password, "", sshd.Dir), sshd)
	url := startReplica(t, gateway.Options{Directories: sftpdir.Limits{MaxEntries: 20}}) + "/" + f.slug

	for _, dir := range []string{"small", "tree", "tree/a", "tree/big"} {
		must(t, os.Mkdir(filepath.Join(sshd.Dir, dir), 0o755))
	}
	for dir, n := range map[string]int{"small": 2, "tree": 10, "tree/a": 10, "tree/big": 21} {
		for i := range n {
			must(t, os.WriteFile(filepath.Join(sshd.Dir, dir, fmt.Sprintf("f%02d", i)), []byte("x"), 0o644))
		}
	}
	must(t, filepath.WalkDir(sshd.Dir, func(p string, _ iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, sshd.UID, sshd.GID)
	}))
	count := func() (n int) {
		must(t, filepath.WalkDir(filepath.Join(sshd.Dir, "tree"), func(_ string, _ iofs.DirEntry, err error) error { n++; return err }))
		return n
	}
	before := count()
	const says = ": has more than 20 entries, more than this gateway reads at once from a server that allows one SFTP channel per connection; " +
		"allow the account more sessions (OpenSSH: MaxSessions), or raise --max-directory-entries"

	for _, tc := range []struct{ command, body, dir string }{
		{"list", `{"path": "tree/big"}`, "/tree/big"},
		{"rmdir", `{"path": "tree", "recursive": true}`, "/tree/big"},
	} {
		status, _, out := post(t, context.Background(), url, f.token, tc.command, tc.body)
		e, _ := out["error"].(map[string]any)
		result, named := out[tc.command]
		sftpStatus, hasStatus := e["sftpStatus"]
		if status != http.StatusOK || !named || result != nil || e["code"] != "too_large" || e["message"] != tc.dir+says ||
			!hasStatus || sftpStatus != nil {
			t.Errorf("%s %s: %d %v, want 200 with a null result and too_large naming %s, sftpStatus null", tc.command, tc.body, status, out, tc.dir)
		}
	}
	if after := count(); after != before {
		t.Errorf("the tree after a refused rmdir: %d names, had %d", after, before)
	}
	status, _, out := post(t, context.Background(), url, f.token, "list", `{"path": "small"}`)
	if list, _ := out["list"].(map[string]any); status != http.StatusOK || len(list["entries"].([]any)) != 2 { //nolint:forcetypeassert // list's answer
		t.Errorf("list after the refusals: %d %v", status, out)
	}
}
