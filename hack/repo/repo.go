// Package repo finds the repository's files for tests and tools run with
// go test or go run, which start in a package's directory.
package repo

import (
	"errors"
	"os"
	"path/filepath"
)

// Root finds the directory of go.mod above the working directory, which
// go test sets to the package under test.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}
