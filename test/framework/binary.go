package framework

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sftpgate/sftpgate/hack/repo"
)

// BinaryEnv names a built sftpgate binary to run (make chaos builds it);
// unset, Binary builds one.
const BinaryEnv = "SFTPGATE_BINARY"

// Binary is the sftpgate binary the system runs: $SFTPGATE_BINARY, or one
// built from the repository once per test binary.
func Binary() (string, error) { return binary() }

var binary = sync.OnceValues(func() (string, error) {
	if b := os.Getenv(BinaryEnv); b != "" {
		return b, nil
	}
	root, err := repo.Root()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "sftpgate-binary-")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "sftpgate")
	build := exec.Command("go", "build", "-o", out, ".")
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, b)
	}
	return out, nil
})

// New starts a system for one test and stops it when the test ends,
// showing the end of each process's log if the test failed.
func New(t testing.TB, opts Options) *System {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	s, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range s.Processes() {
				t.Logf("%s's log ends:\n%s", p.Name, p.LogTail(30))
			}
		}
		s.Stop()
	})
	return s
}
