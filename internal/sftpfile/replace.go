// Package sftpfile is what every component does to files on an SFTP
// server in one way: put a complete file in place of another without ever
// losing the one it replaces, read the server's status codes, and tell a
// session that broke from a server that refused one request.
package sftpfile

import (
	"errors"
	"os"
	"path"

	"github.com/pkg/sftp"

	"github.com/sftpgate/sftpgate/internal/tempname"
)

// ReplaceInto renames from, a complete file, to to. With replace, a file at
// to is replaced: in one step where the server offers posix-rename; where
// not, to is moved aside first and put back if from cannot take its place,
// so that it is never missing for good. Without replace, SFTP's rename
// refuses an existing to.
//
// When a file was moved aside, leftover (else nil) finishes the work on
// the same session or, if that broke, on a later one: it puts the file
// back if to is missing (from never took its place), and otherwise
// removes it. Run it whatever err is.
func ReplaceInto(c *sftp.Client, from, to string, replace bool) (leftover func(*sftp.Client) error, err error) {
	switch {
	case !replace:
		return nil, c.Rename(from, to)
	case HasPosixRename(c):
		return nil, c.PosixRename(from, to)
	}
	aside := tempname.In(path.Dir(to))
	err = c.Rename(to, aside)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, c.Rename(from, to)
	case err != nil:
		return nil, err
	}
	leftover = func(c *sftp.Client) error {
		if _, err := c.Lstat(to); errors.Is(err, os.ErrNotExist) {
			return c.Rename(aside, to)
		} else if err != nil {
			return err
		}
		return IgnoreMissing(c.Remove(aside))
	}
	return leftover, c.Rename(from, to)
}

// HasPosixRename says whether the server renames over an existing file in
// one step (OpenSSH's posix-rename extension).
func HasPosixRename(c *sftp.Client) bool {
	_, ok := c.HasExtension("posix-rename@openssh.com")
	return ok
}

// IgnoreMissing is err, unless it says the file was not there.
func IgnoreMissing(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
