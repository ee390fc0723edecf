package watch

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/sftpgate/sftpgate/internal/files"
)

// ErrTooManyFiles is a folder with more files than a watch may track: it
// is refused, not listed further.
type ErrTooManyFiles struct{ Max int }

func (e *ErrTooManyFiles) Error() string {
	return fmt.Sprintf("the folder holds more than %d files, the most a watch may track", e.Max)
}

// Walk is how a poll lists a folder.
type Walk struct {
	// Dir is the folder's server path.
	Dir string
	// Depth is how many levels of folders below Dir are listed; 0 lists
	// Dir alone.
	Depth  int
	Filter Filter
	// MaxFiles bounds the files listed: past it, List stops with
	// *ErrTooManyFiles. Entries the filter leaves out count too, as they
	// cost as much to read.
	MaxFiles int
}

// List lists w's files, regular files only (a symlink is never followed),
// sorted by their path below Dir, until ctx ends.
func (w Walk) List(ctx context.Context, fsys files.FS) ([]File, error) {
	var found []File
	seen := 0
	queue := []struct {
		rel   string
		depth int
	}{{"", 0}}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		err := fsys.Each(path.Join(w.Dir, d.rel), func(fi os.FileInfo) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			if seen++; seen > w.MaxFiles {
				return &ErrTooManyFiles{Max: w.MaxFiles}
			}
			rel := path.Join(d.rel, fi.Name())
			switch mode := fi.Mode(); {
			case mode.IsRegular():
				if w.Filter.Match(rel) {
					found = append(found, File{Path: rel, Size: fi.Size(), ModTime: fi.ModTime().Unix(), Tag: tagOf(fi)})
				}
			case mode.IsDir() && d.depth < w.Depth:
				queue = append(queue, struct {
					rel   string
					depth int
				}{rel, d.depth + 1})
			}
			return nil
		})
		// A folder below that went away meanwhile is no failure of the
		// poll; the watched folder itself going is.
		if err != nil && (d.rel == "" || !errors.Is(err, os.ErrNotExist)) {
			return nil, err
		}
	}
	// Stable, and compacted: a server that names a file twice in a folder
	// has it reported once, as it listed it first.
	slices.SortStableFunc(found, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return slices.CompactFunc(found, func(a, b File) bool { return a.Path == b.Path }), nil
}

// tagOf hashes the tag of fi's content version, where its backend keeps
// one: 64 bits tell versions of one file apart, and store in 8 bytes.
func tagOf(fi os.FileInfo) uint64 {
	tagged, ok := fi.Sys().(files.Tagged)
	if !ok || tagged.Tag() == "" {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(tagged.Tag()))
	return max(h.Sum64(), 1)
}
