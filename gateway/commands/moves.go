package commands

// Moving and copying: rename, copy.

import (
	"context"
	"io"
	"path"

	"github.com/sftpgate/sftpgate/internal/files"
)

type twoPathRequest struct {
	From      string `json:"from"`
	To        string `json:"to"`
	Overwrite bool   `json:"overwrite,omitempty"`
}

// TwoPathResult is the result of rename and copy.
type TwoPathResult struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Bytes *int64 `json:"bytesCopied,omitempty"`
}

func (req *twoPathRequest) resolve(fs *FS) (from, to string, err error) {
	if req.From == "" {
		return "", "", &BadRequest{Field: "from", Message: "is required"}
	}
	if req.To == "" {
		return "", "", &BadRequest{Field: "to", Message: "is required"}
	}
	if from, err = fs.ResolveParent(req.From); err != nil {
		return "", "", inField(err, "from")
	}
	if to, err = fs.ResolveParent(req.To); err != nil {
		return "", "", inField(err, "to")
	}
	if from == fs.Root || to == fs.Root {
		return "", "", &BadRequest{Field: "from", Message: "cannot be the connection's root directory, nor can to"}
	}
	return from, to, nil
}

// rename moves a file, directory or symlink (the name itself, never what a
// symlink points to); where the request is confined, never a symlink, nor
// a directory with one below it (scope.go). With overwrite it replaces an
// existing target (posix-rename@openssh.com); without, an existing target
// fails.
func rename(fs *FS, req *twoPathRequest) (any, error) {
	from, to, err := req.resolve(fs)
	if err != nil {
		return nil, err
	}
	if err := fs.movable(from); err != nil {
		return nil, err
	}
	if !req.Overwrite {
		switch _, statErr := fs.Files.Lstat(to); {
		case files.SessionFailed(statErr):
			return nil, statErr
		case statErr == nil:
			return nil, fail("already_exists", files.FxFileAlreadyExists, fs.Rel(to)+": already exists and overwrite is false")
		}
	}
	if err := fs.rename(from, to, req.Overwrite); err != nil {
		return nil, serverFailure(err, fs.Rel(from))
	}
	return TwoPathResult{From: fs.Rel(from), To: fs.Rel(to)}, nil
}

// copyFile copies a file's content through the gateway (SFTP version 3
// has no server-side copy that pkg/sftp speaks).
func copyFile(ctx context.Context, fs *FS, req *twoPathRequest) (any, error) {
	switch {
	case req.From == "":
		return nil, &BadRequest{Field: "from", Message: "is required"}
	case req.To == "":
		return nil, &BadRequest{Field: "to", Message: "is required"}
	}
	// Both ends are followed (and so checked where they lead) on opening.
	_, src, fi, err := openRead(fs, req.From)
	if err != nil {
		return nil, inField(err, "from")
	}
	defer func() { _ = src.Close() }()
	from := src.Name()
	if real, err := fs.Files.RealPath(from); err == nil {
		if toReal, err := fs.Files.RealPath(path.Join(fs.Root, path.Clean("/"+req.To))); err == nil && toReal == real {
			// Opening the target would truncate the source before it is read.
			return nil, &BadRequest{Field: "to", Message: "is the same file as from"}
		}
	}
	to, err := fs.Resolve(req.To)
	if err != nil {
		return nil, inField(err, "to")
	}
	n, err := fs.writeFile(to, nil, fs.keptMode(fi), req.Overwrite, func(dst files.File) (int64, error) {
		n, err := io.Copy(bulk{ctx.Err, fs, dst}, src) // src.WriteTo: concurrent reads
		if err == nil && n < fi.Size() {
			err = ConfirmEnd(src, n) // a copy cut short is not a copy
		}
		return n, err
	})
	if stop := ctx.Err(); stop != nil {
		return nil, stop // what it wrote is undone
	}
	if err != nil {
		return nil, notAFile(fs, err, to)
	}
	return TwoPathResult{From: fs.Rel(from), To: fs.Rel(to), Bytes: &n}, nil
}
