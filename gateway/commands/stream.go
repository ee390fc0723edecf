package commands

import (
	"crypto/rand"
	"errors"
	"io"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/pkg/sftp"
)

// Raw bodies: write and append also take the file's bytes as the request
// body (Content-Type: application/octet-stream) with their other
// parameters in the query, and read answers with the bytes themselves
// (Accept: application/octet-stream). Neither holds the file in memory.

// WriteStream runs write or append with the request body as the content:
// size is its length, or -1 when unknown (a chunked upload).
func WriteStream(fs *FS, appending bool, query url.Values, body io.Reader, size int64) (any, error) {
	allowed := map[string]bool{"path": true, "mode": true, "createParents": true, "overwrite": !appending}
	for name := range query {
		if !allowed[name] {
			return nil, &BadRequest{Field: name, Message: "is not a query parameter of this command"}
		}
	}
	var mode *string
	if query.Has("mode") {
		m := query.Get("mode")
		mode = &m
	}
	fileMode, err := parseMode(mode)
	if err != nil {
		return nil, err
	}
	createParents, err := boolParam(query, "createParents")
	if err != nil {
		return nil, err
	}
	var overwrite *bool
	if query.Has("overwrite") {
		o, err := boolParam(query, "overwrite")
		if err != nil {
			return nil, err
		}
		overwrite = &o
	}
	client := &clientBody{r: body}
	if size >= 0 {
		client.r = io.LimitReader(body, size)
	}
	var result any
	if appending {
		var f *sftp.File
		var target string
		if f, target, err = openForWrite(fs, query.Get("path"), fileMode, createParents, writeFlags(true, nil)); err != nil {
			return nil, err
		}
		result, err = fill(fs, f, target, true, func(f *sftp.File) (int64, error) {
			// Many writes in flight: a large upload is not bound by one
			// round trip per 32 KiB (ReadFrom would write one at a time
			// here, as it cannot see the body's length through clientBody).
			return f.ReadFromWithConcurrency(client, 0)
		})
	} else {
		result, err = replaceFile(fs, query.Get("path"), fileMode, createParents, overwrite == nil || *overwrite, client)
	}
	if client.err != nil {
		// The client's body failed (too large, cut off), not the server.
		return nil, &BodyError{Err: client.err}
	}
	return result, err
}

// replaceFile writes a whole file under a temporary name beside it and
// renames it into place once complete, so that an upload cut off halfway
// leaves the file as it was. A file that is replaced keeps its permissions
// unless mode is given; a symlink (inside the root) is written through, as
// an ordinary write would.
func replaceFile(fs *FS, p string, mode *os.FileMode, createParents, overwrite bool, body io.Reader) (any, error) {
	target, err := fs.Resolve(p)
	if err != nil {
		return nil, err
	}
	if createParents {
		if err := fs.Client.MkdirAll(path.Dir(target)); err != nil {
			return nil, serverFailure(err, fs.Rel(path.Dir(target)))
		}
	}
	dest := target
	if real, err := fs.Client.RealPath(target); err == nil {
		dest = path.Clean(real) // inside the root: Resolve checked it
	}
	existing, statErr := fs.Client.Stat(dest)
	switch {
	case statErr == nil && existing.IsDir():
		return nil, fail("is_a_directory", fxFileIsADirectory, fs.Rel(target)+": is a directory")
	case statErr == nil && !overwrite:
		return nil, fail("already_exists", fxFileAlreadyExists, fs.Rel(target)+": already exists and overwrite is false")
	case statErr == nil && mode == nil:
		perm := existing.Mode().Perm()
		mode = &perm
	}
	tmp := path.Join(path.Dir(dest), "."+path.Base(dest)+".sftpgate-"+strings.ToLower(rand.Text()[:12]))
	f, err := fs.Client.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return nil, serverFailure(err, fs.Rel(target))
	}
	var n int64
	if mode != nil {
		err = f.Chmod(*mode)
	}
	if err == nil {
		n, err = f.ReadFromWithConcurrency(body, 0)
	}
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err == nil {
		err = fs.rename(tmp, dest, overwrite)
	}
	if err != nil {
		_ = fs.Client.Remove(tmp)
		if !overwrite && !SessionFailed(err) {
			if _, statErr := fs.Client.Lstat(dest); statErr == nil {
				return nil, fail("already_exists", fxFileAlreadyExists, fs.Rel(target)+": already exists and overwrite is false")
			}
		}
		return nil, serverFailure(err, fs.Rel(target))
	}
	return WriteResult{Path: fs.Rel(target), BytesWritten: n}, nil
}

// rename moves from to to; with overwrite it replaces to in one step where
// the server offers posix-rename, and removes it first where not.
func (fs *FS) rename(from, to string, overwrite bool) error {
	switch {
	case !overwrite:
		return fs.Client.Rename(from, to) // SFTP's rename refuses an existing target
	case hasPosixRename(fs.Client):
		return fs.Client.PosixRename(from, to)
	}
	if err := fs.Client.Remove(to); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return fs.Client.Rename(from, to)
}

func hasPosixRename(c *sftp.Client) bool {
	_, ok := c.HasExtension("posix-rename@openssh.com")
	return ok
}

// BodyError is a request body that could not be read to its end. The file
// holds what arrived before.
type BodyError struct{ Err error }

func (e *BodyError) Error() string { return "reading the request body: " + e.Err.Error() }
func (e *BodyError) Unwrap() error { return e.Err }

// clientBody remembers why reading the client's body failed.
type clientBody struct {
	r   io.Reader
	err error
}

func (c *clientBody) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	if err != nil && err != io.EOF {
		c.err = err
	}
	return n, err
}

// ReadStreamPath reads the path of a raw read from its JSON request, where
// a part of the file is asked for with a Range header, not offset and
// length.
func ReadStreamPath(body []byte) (string, error) {
	var req readRequest
	if err := decode(body, &req); err != nil {
		return "", err
	}
	switch {
	case req.Encoding != "":
		return "", &BadRequest{Field: "encoding", Message: "does not apply to a raw read (Accept: application/octet-stream)"}
	case req.Offset != 0 || req.Length != nil:
		return "", &BadRequest{Field: "offset", Message: "does not apply to a raw read: send a Range header"}
	}
	return req.Path, nil
}

func boolParam(query url.Values, name string) (bool, error) {
	if !query.Has(name) {
		return false, nil
	}
	b, err := strconv.ParseBool(query.Get(name))
	if err != nil {
		return false, &BadRequest{Field: name, Message: "must be true or false"}
	}
	return b, nil
}

// OpenRead opens a file to stream to the client, refusing directories.
func OpenRead(fs *FS, p string) (*sftp.File, os.FileInfo, error) {
	target, err := fs.Resolve(p)
	if err != nil {
		return nil, nil, err
	}
	f, err := fs.Client.Open(target)
	if err != nil {
		return nil, nil, serverFailure(err, fs.Rel(target))
	}
	fi, err := f.Stat()
	if err == nil && fi.IsDir() {
		_ = f.Close()
		return nil, nil, fail("is_a_directory", fxFileIsADirectory, fs.Rel(target)+": is a directory; use list")
	}
	if err != nil {
		_ = f.Close()
		return nil, nil, serverFailure(err, fs.Rel(target))
	}
	return f, fi, nil
}
