package files

import (
	"errors"
	"os"
	"path"

	"github.com/sftpgate/sftpgate/internal/tempname"
)

// ReplaceInto renames from, a complete file, to to. With replace, a file at
// to is replaced: in one step where the backend offers it (posix-rename);
// where not, to is moved aside first and put back if from cannot take its
// place, so that it is never missing for good. Without replace, an
// existing to is refused.
//
// When a file was moved aside, leftover (else nil) finishes the work on
// the same session or, if that broke, on a later one: it puts the file
// back if to is missing (from never took its place), and otherwise
// removes it. Run it whatever err is.
func ReplaceInto(f FS, from, to string, replace bool) (leftover func(FS) error, err error) {
	switch {
	case !replace:
		return nil, f.Rename(from, to)
	case f.HasPosixRename():
		return nil, f.PosixRename(from, to)
	}
	aside := tempname.In(path.Dir(to))
	err = f.Rename(to, aside)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, f.Rename(from, to)
	case err != nil:
		return nil, err
	}
	leftover = func(f FS) error {
		if _, err := f.Lstat(to); errors.Is(err, os.ErrNotExist) {
			return f.Rename(aside, to)
		} else if err != nil {
			return err
		}
		return IgnoreMissing(f.Remove(aside))
	}
	return leftover, f.Rename(from, to)
}

// IgnoreMissing is err, unless it says the file was not there.
func IgnoreMissing(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
