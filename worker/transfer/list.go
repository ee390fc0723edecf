package transfer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/worker/watch"
)

// ErrTooManyFiles is a source with more files than a transfer may copy.
type ErrTooManyFiles = watch.ErrTooManyFiles

// List makes the plan of src: its files, listed on fsys below the
// connection's root, at most maxFiles. A path that is missing is an
// *Error with reason SourceNotFound.
func List(ctx context.Context, fsys files.FS, root string, src v1alpha1.TransferSource, maxFiles int) (*Plan, error) {
	if len(src.Paths) > 0 {
		return listPaths(fsys, root, src.Paths)
	}
	// As the files' paths are: clean (the API refuses // and a trailing
	// /; a Transfer made before that rule may have them).
	src.Path = path.Clean(src.Path)
	fi, err := fsys.Stat(path.Join(root, src.Path))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, &Error{Reason: v1alpha1.ReasonSourceNotFound, Permanent: true, Err: fmt.Errorf("%s is not on the source server", src.Path)}
	case err != nil:
		return nil, fail(err, "reading the source path")
	case fi.Mode().IsRegular():
		return &Plan{Files: []File{{Path: src.Path, Size: fi.Size(), ModTime: fi.ModTime().Unix()}}}, nil
	case !fi.IsDir():
		return nil, &Error{Reason: v1alpha1.ReasonSourceNotFound, Permanent: true, Err: fmt.Errorf("%s is neither a file nor a folder", src.Path)}
	}
	filter := watch.Filter{Include: src.Include, Exclude: src.Exclude}
	if err := filter.Check(); err != nil {
		return nil, &Error{Reason: v1alpha1.ReasonInvalidSpec, Permanent: true, Err: err}
	}
	walk := watch.Walk{Dir: path.Join(root, src.Path), Filter: filter, MaxFiles: maxFiles}
	if src.Recursive {
		walk.Depth = int(max(src.MaxDepth, 1))
	}
	found, err := walk.List(ctx, fsys)
	var tooMany *ErrTooManyFiles
	switch {
	case errors.As(err, &tooMany):
		return nil, &Error{Reason: v1alpha1.ReasonTooManyFiles, Permanent: true,
			Err: fmt.Errorf("%s holds more than %d files, the most a transfer may copy", src.Path, maxFiles)}
	case err != nil:
		return nil, fail(err, "listing the source folder")
	}
	p := &Plan{Base: src.Path, Files: make([]File, len(found))}
	for i, f := range found {
		p.Files[i] = File{Path: path.Join(src.Path, f.Path), Size: f.Size, ModTime: f.ModTime}
	}
	return p, nil
}

// listPaths plans the files of a list, each to go under its own name.
func listPaths(fsys files.FS, root string, paths []string) (*Plan, error) {
	p := &Plan{}
	names := map[string]string{}
	for _, name := range paths {
		base := path.Base(name)
		if other, ok := names[base]; ok {
			return nil, &Error{Reason: v1alpha1.ReasonInvalidSpec, Permanent: true,
				Err: fmt.Errorf("%s and %s would both be copied to %s", other, name, base)}
		}
		names[base] = name
		f := File{Path: name}
		fi, err := fsys.Stat(path.Join(root, name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			f.State, f.Reason, f.Message = Failed, v1alpha1.ReasonSourceNotFound, name+" is not on the source server"
		case err != nil:
			return nil, fail(err, "reading "+name)
		case !fi.Mode().IsRegular():
			f.State, f.Reason, f.Message = Failed, v1alpha1.ReasonSourceNotFound, name+" is not a file"
		default:
			f.Size, f.ModTime = fi.Size(), fi.ModTime().Unix()
		}
		p.Files = append(p.Files, f)
	}
	return p, nil
}
