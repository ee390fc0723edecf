package framework

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/sftpgate/sftpgate/hack/repo"
)

// Release is an earlier commit of this repository, built: a system
// starts from it (Options.Release) and is upgraded to the current tree
// (System.Upgrade), as a cluster runs one release and then the next.
type Release struct {
	Commit string
	// Binary is the commit's sftpgate binary; CRDs the directory of its
	// CustomResourceDefinitions (config/crd/bases).
	Binary, CRDs string
}

// BuildRelease builds commit from the repository's history (git archive,
// then go build with the commit's go.mod), once per machine: the result
// is kept in the user's cache directory, under sftpgate/releases. A clone
// without the commit (a shallow one) is an error saying so.
func BuildRelease(commit string) (Release, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return Release{}, err
	}
	dir := filepath.Join(cache, "sftpgate", "releases", commit)
	r := Release{Commit: commit, Binary: filepath.Join(dir, "sftpgate"), CRDs: filepath.Join(dir, "crds")}
	if _, err := os.Stat(r.Binary); err == nil {
		return r, nil
	}
	root, err := repo.Root()
	if err != nil {
		return Release{}, err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return Release{}, err
	}
	// Built aside and renamed into place: a build cut short leaves no
	// half a release behind.
	build, err := os.MkdirTemp(filepath.Dir(dir), commit+".build-")
	if err != nil {
		return Release{}, err
	}
	defer func() { _ = os.RemoveAll(build) }()
	src := filepath.Join(build, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		return Release{}, err
	}
	archive := exec.Command("git", "-C", root, "archive", "--format=tar", commit)
	var tarball, stderr bytes.Buffer
	archive.Stdout, archive.Stderr = &tarball, &stderr
	if err := archive.Run(); err != nil {
		return Release{}, fmt.Errorf("commit %s from the repository's history (a shallow clone lacks it: git fetch --unshallow): %w\n%s", commit, err, stderr.Bytes())
	}
	for _, step := range []*exec.Cmd{
		exec.Command("tar", "-x", "-C", src),
		exec.Command("go", "build", "-o", filepath.Join(build, "sftpgate"), "."),
		exec.Command("cp", "-r", filepath.Join(src, "config", "crd", "bases"), filepath.Join(build, "crds")),
	} {
		if step.Args[0] == "tar" {
			step.Stdin = &tarball
		}
		step.Dir = src
		if out, err := step.CombinedOutput(); err != nil {
			return Release{}, fmt.Errorf("building %s: %s: %w\n%s", commit, step.Args[0], err, out)
		}
	}
	if err := os.RemoveAll(src); err != nil {
		return Release{}, err
	}
	if err := os.Rename(build, dir); err != nil && !os.IsExist(err) {
		return Release{}, err
	}
	return r, nil
}
