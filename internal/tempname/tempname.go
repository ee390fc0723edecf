// Package tempname names the temporary files sftpgate writes on SFTP
// servers (a file written whole before it is renamed into place, one moved
// aside), so that every component makes them alike and none reports
// another's: the gateway's list leaves them out, and a watch never sends
// an event for one.
package tempname

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"path"
	"strings"
)

// Prefix starts every temporary name: short and fixed, so that it fits the
// server's name length limit whatever the target's name.
const Prefix = ".sftpgate-"

const (
	random = 16
	suffix = ".tmp"
)

// In is a new temporary name in dir.
func In(dir string) string {
	return path.Join(dir, Prefix+strings.ToLower(rand.Text()[:random])+suffix)
}

// For is the temporary name in dir that seed always gives: a transfer's
// partial copy of a file, found again by whichever replica resumes it.
func For(dir, seed string) string {
	sum := sha256.Sum256([]byte(seed))
	return path.Join(dir, Prefix+strings.ToLower(base32.StdEncoding.EncodeToString(sum[:])[:random])+suffix)
}

// Is reports whether name (a base name) is a temporary name.
func Is(name string) bool {
	return len(name) == len(Prefix)+random+len(suffix) && strings.HasPrefix(name, Prefix) && strings.HasSuffix(name, suffix)
}
