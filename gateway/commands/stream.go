package commands

import (
	"io"
	"net/url"
	"os"
	"strconv"
	"sync"

	"github.com/sftpgate/sftpgate/internal/files"
)

// Raw bodies: write and append also take the file's bytes as the request
// body (Content-Type: application/octet-stream) with their other
// parameters in the query, and read answers with the bytes themselves
// (Accept: application/octet-stream). Neither holds the file in memory.

// upload is the raw form of write, or of append.
func upload(appending bool) *Upload {
	return &Upload{
		Stream: func(fs *FS, query url.Values, body io.Reader, size int64) (any, error) {
			return writeStream(fs, appending, query, body, size)
		},
		Bytes: func(fs *FS, query url.Values, body []byte) (any, error) {
			return writeBytes(fs, appending, query, body)
		},
	}
}

// writeStream runs write or append with the request body as the content:
// size is its length, or -1 when unknown (a chunked upload).
func writeStream(fs *FS, appending bool, query url.Values, body io.Reader, size int64) (any, error) {
	req, err := rawRequest(query, appending)
	if err != nil {
		return nil, err
	}
	fileMode, err := parseMode(req.Mode)
	if err != nil {
		return nil, err
	}
	createParents, overwrite := req.CreateParents, req.Overwrite
	client := &clientBody{r: fs.Pace.Reader(body, 0)}
	if size >= 0 {
		client.r = io.LimitReader(body, size)
	}
	target, err := resolveForWrite(fs, req.Path, createParents)
	if err != nil {
		return nil, err
	}
	// Many writes in flight: a large upload is not bound by one round trip
	// per 32 KiB (a plain copy would write one at a time here, as it
	// cannot see the body's length through clientBody).
	fill := func(f files.File) (int64, error) { return f.ReadFromWithConcurrency(client, 0) }
	var result any
	if appending {
		result, err = appendTo(fs, target, fileMode, -1, fill)
	} else {
		// Always through a temporary file: an upload cut off halfway,
		// however large, leaves the file as it was.
		var n int64
		if n, err = fs.replace(target, fileMode, overwrite == nil || *overwrite, fill); err == nil {
			result = WriteResult{Path: fs.Rel(target), BytesWritten: n}
		}
		err = serverFailure(err, fs.Rel(target))
	}
	if client.err != nil {
		// The client's body failed (too large, cut off), not the server.
		return nil, &BodyError{Err: client.err}
	}
	return result, err
}

// writeBytes runs write or append with a raw body read whole before it
// (a small one): as a JSON write does, it makes a new file in place.
func writeBytes(fs *FS, appending bool, query url.Values, data []byte) (any, error) {
	req, err := rawRequest(query, appending)
	if err != nil {
		return nil, err
	}
	return writeData(fs, req, appending, data)
}

// rawRequest reads write's or append's parameters from a raw upload's
// query.
func rawRequest(query url.Values, appending bool) (*writeRequest, error) {
	allowed := map[string]bool{"path": true, "mode": true, "createParents": true, "overwrite": !appending}
	for name := range query {
		if name == "" {
			return nil, &BadRequest{Field: "query", Message: "has a parameter with an empty name"}
		}
		if !allowed[name] {
			return nil, &BadRequest{Field: name, Message: "is not a query parameter of this command"}
		}
	}
	req := &writeRequest{Path: query.Get("path")}
	if query.Has("mode") {
		m := query.Get("mode")
		req.Mode = &m
	}
	var err error
	if req.CreateParents, err = boolParam(query, "createParents"); err != nil {
		return nil, err
	}
	if query.Has("overwrite") {
		o, err := boolParam(query, "overwrite")
		if err != nil {
			return nil, err
		}
		req.Overwrite = &o
	}
	return req, nil
}

// BodyError is a request body that could not be read to its end. The file
// is left as it was.
type BodyError struct{ Err error }

func (e *BodyError) Error() string { return "reading the request body: " + e.Err.Error() }
func (e *BodyError) Unwrap() error { return e.Err }

// SessionFailed is false: the client's body failed, whatever it wraps.
func (e *BodyError) SessionFailed() bool { return false }

// clientBody remembers why reading the client's body failed, and says it
// is the body's failure: a client that hangs up mid-body reads as
// io.ErrUnexpectedEOF, which must not be taken for a broken session (whose
// cleanup waits for the next one).
type clientBody struct {
	r   io.Reader
	err error
}

func (c *clientBody) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	if err != nil && err != io.EOF {
		c.err = err
		return n, &BodyError{Err: err}
	}
	return n, err
}

// openRequested opens the file a raw read's JSON request names, where a
// part of the file is asked for with a Range header, not offset and
// length.
func openRequested(fs *FS, body []byte) (files.File, os.FileInfo, error) {
	p, err := rawReadPath(body)
	if err != nil {
		return nil, nil, err
	}
	_, f, fi, err := openRead(fs, p)
	return f, fi, err
}

// rawReadPath reads the path of a raw read from its JSON request.
func rawReadPath(body []byte) (string, error) {
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

// openRead opens a file to read, refusing directories and what is not a
// regular file: its server path, the file and what it is.
//
// Nothing is opened before the server has said where the path leads and
// what it is there. Opening a FIFO blocks OpenSSH's sftp-server, which
// answers one request at a time, until a writer comes, and SFTP has no
// flag to open without blocking (version 3's are read, write, append,
// create, truncate and exclusive): an open sent beside the check of a
// link out of the root to a FIFO would hold the whole session until the
// operation's timeout. So the stat goes with the check (one round trip),
// and a second stat with the open (the next): when both stats agree, the
// file opened is the one they describe, and the fstat a third round trip
// would take is skipped.
func openRead(fs *FS, p string) (string, files.File, os.FileInfo, error) {
	var (
		fi      os.FileInfo
		statErr error
	)
	target, err := fs.Checked(p, false, func(target string) { fi, statErr = fs.Files.Stat(target) })
	if err == nil {
		err = readable(fs, target, fi, statErr)
	}
	if err != nil {
		return "", nil, nil, err
	}
	var (
		again    os.FileInfo
		againErr error
		stat     sync.WaitGroup
	)
	stat.Go(func() { again, againErr = fs.Files.Stat(target) })
	f, err := fs.Files.Open(target)
	stat.Wait()
	if err != nil {
		return "", nil, nil, serverFailure(err, fs.Rel(target))
	}
	if againErr != nil || !sameFile(fi, again) {
		// Replaced or changed meanwhile: what was opened says what it is.
		fi, err = f.Stat()
		if err = readable(fs, target, fi, err); err != nil {
			_ = f.Close()
			return "", nil, nil, err
		}
	}
	return target, f, fi, nil
}

// readable refuses to read what stat found at target (fi, or err): a
// directory, or what is not a regular file (a FIFO, a socket, a device),
// whose opening or reading may block the server.
func readable(fs *FS, target string, fi os.FileInfo, err error) error {
	switch {
	case err != nil:
		return serverFailure(err, fs.Rel(target))
	case fi.IsDir():
		return fail("is_a_directory", files.FxFileIsADirectory, fs.Rel(target)+": is a directory; use list")
	case !fi.Mode().IsRegular():
		return fail("unsupported", files.FxOpUnsupported, fs.Rel(target)+": not a regular file (a FIFO, socket or device), which the gateway does not open")
	}
	return nil
}

// sameFile says whether two stats of a path describe the same file, as
// far as SFTP shows one: its size, modification time, mode and owner
// (not its access time, which reading may change).
func sameFile(a, b os.FileInfo) bool {
	if a.Size() != b.Size() || !a.ModTime().Equal(b.ModTime()) || a.Mode() != b.Mode() {
		return false
	}
	ao, aOwned := a.Sys().(files.Owned)
	bo, bOwned := b.Sys().(files.Owned)
	if !aOwned || !bOwned {
		return aOwned == bOwned
	}
	au, ag := ao.Owner()
	bu, bg := bo.Owner()
	return au == bu && ag == bg
}
