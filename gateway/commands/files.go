package commands

import (
	"encoding/base64"
	"errors"
	"io"
	"os"
	"path"
	"strconv"
	"unicode/utf8"
)

// FileContent is a file's content in a request: text or base64, one of them.
type FileContent struct {
	Text   *string `json:"text,omitempty"`
	Base64 *string `json:"base64,omitempty"`
}

func (c *FileContent) bytes() ([]byte, error) {
	switch {
	case c == nil || (c.Text == nil) == (c.Base64 == nil):
		return nil, &BadRequest{Field: "file", Message: `needs exactly one of "text" and "base64"`}
	case c.Text != nil:
		return []byte(*c.Text), nil
	}
	b, err := base64.StdEncoding.DecodeString(*c.Base64)
	if err != nil {
		return nil, &BadRequest{Field: "file.base64", Message: "is not valid base64"}
	}
	return b, nil
}

type writeRequest struct {
	Path          string       `json:"path"`
	File          *FileContent `json:"file"`
	Mode          *string      `json:"mode,omitempty"`
	Overwrite     *bool        `json:"overwrite,omitempty"`
	CreateParents bool         `json:"createParents,omitempty"`
}

// WriteResult is the result of write.
type WriteResult struct {
	Path         string `json:"path"`
	BytesWritten int64  `json:"bytesWritten"`
}

// AppendResult is the result of append.
type AppendResult struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// parseMode reads octal permissions; nil when none are given.
func parseMode(mode *string) (*os.FileMode, error) {
	if mode == nil {
		return nil, nil
	}
	m, err := strconv.ParseUint(*mode, 8, 32)
	if err != nil || m > 0o777 {
		return nil, &BadRequest{Field: "mode", Message: `must be octal permissions such as "0644"`}
	}
	fm := os.FileMode(m)
	return &fm, nil
}

// open validates a write or append request and opens its file.
func open(fs *FS, req *writeRequest, flags int) (*openFile, error) {
	if err := requirePath(req.Path); err != nil {
		return nil, err
	}
	data, err := req.File.bytes()
	if err != nil {
		return nil, err
	}
	mode, err := parseMode(req.Mode)
	if err != nil {
		return nil, err
	}
	target, err := fs.Resolve(req.Path)
	if err != nil {
		return nil, err
	}
	if req.CreateParents {
		if err := fs.Client.MkdirAll(path.Dir(target)); err != nil {
			return nil, serverFailure(err, fs.Rel(path.Dir(target)))
		}
	}
	f, err := fs.Client.OpenFile(target, flags)
	if err != nil {
		if flags&os.O_EXCL != 0 {
			if _, statErr := fs.Client.Lstat(target); statErr == nil {
				return nil, fail("already_exists", fxFileAlreadyExists, fs.Rel(target)+": already exists and overwrite is false")
			}
		}
		return nil, serverFailure(err, fs.Rel(target))
	}
	return &openFile{f: f, target: target, data: data, mode: mode}, nil
}

type openFile struct {
	f interface {
		io.Writer
		io.Closer
		Chmod(os.FileMode) error
		Stat() (os.FileInfo, error)
	}
	target string
	data   []byte
	mode   *os.FileMode
}

// finish applies the mode (before the data arrives, so a private file is
// never readable with default permissions), writes the data and closes.
func (o *openFile) finish(fs *FS) (int64, error) {
	var err error
	if o.mode != nil {
		err = o.f.Chmod(*o.mode)
	}
	var n int
	if err == nil {
		n, err = o.f.Write(o.data)
	}
	if closeErr := o.f.Close(); err == nil {
		err = closeErr
	}
	return int64(n), serverFailure(err, fs.Rel(o.target))
}

func write(fs *FS, req *writeRequest) (any, error) {
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if req.Overwrite != nil && !*req.Overwrite {
		flags |= os.O_EXCL
	}
	o, err := open(fs, req, flags)
	if err != nil {
		return nil, err
	}
	n, err := o.finish(fs)
	if err != nil {
		return nil, err
	}
	return WriteResult{Path: fs.Rel(o.target), BytesWritten: n}, nil
}

func appendFile(fs *FS, req *writeRequest) (any, error) {
	if req.Overwrite != nil {
		return nil, &BadRequest{Field: "overwrite", Message: "does not apply to append"}
	}
	o, err := open(fs, req, os.O_WRONLY|os.O_CREATE|os.O_APPEND)
	if err != nil {
		return nil, err
	}
	if _, err := o.finish(fs); err != nil {
		return nil, err
	}
	fi, err := fs.Client.Stat(o.target)
	if err != nil {
		return nil, serverFailure(err, fs.Rel(o.target))
	}
	return AppendResult{Path: fs.Rel(o.target), Size: fi.Size()}, nil
}

// MaxReadLength is the most a JSON read returns at once; larger files are
// read in parts with offset and length.
const MaxReadLength = 16 << 20

type readRequest struct {
	Path     string `json:"path"`
	Encoding string `json:"encoding,omitempty"`
	Offset   int64  `json:"offset,omitempty"`
	Length   *int64 `json:"length,omitempty"`
}

// ReadResult is the result of read.
type ReadResult struct {
	Path     string `json:"path"`
	Size     int64  `json:"size"`
	Offset   int64  `json:"offset"`
	Encoding string `json:"encoding"`
	Content  string `json:"content"`
}

func read(fs *FS, req *readRequest) (any, error) {
	if err := requirePath(req.Path); err != nil {
		return nil, err
	}
	encoding := req.Encoding
	switch encoding {
	case "":
		encoding = "text"
	case "text", "base64":
	default:
		return nil, &BadRequest{Field: "encoding", Message: `must be "text" or "base64"`}
	}
	if req.Offset < 0 {
		return nil, &BadRequest{Field: "offset", Message: "must not be negative"}
	}
	if req.Length != nil && (*req.Length < 0 || *req.Length > MaxReadLength) {
		return nil, &BadRequest{Field: "length", Message: "must be between 0 and " + strconv.Itoa(MaxReadLength)}
	}
	target, err := fs.Resolve(req.Path)
	if err != nil {
		return nil, err
	}
	f, err := fs.Client.Open(target)
	if err != nil {
		return nil, serverFailure(err, fs.Rel(target))
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, serverFailure(err, fs.Rel(target))
	}
	if fi.IsDir() {
		return nil, fail("is_a_directory", fxFileIsADirectory, fs.Rel(target)+": is a directory; use list")
	}
	length := max(fi.Size()-req.Offset, 0)
	if req.Length != nil {
		length = min(length, *req.Length)
	} else if length > MaxReadLength {
		return nil, &BadRequest{Field: "length", Message: "the file is larger than " + strconv.Itoa(MaxReadLength) +
			" bytes: read it in parts with offset and length"}
	}
	buf := make([]byte, length)
	n, err := f.ReadAt(buf, req.Offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, serverFailure(err, fs.Rel(target))
	}
	buf = buf[:n]
	res := ReadResult{Path: fs.Rel(target), Size: fi.Size(), Offset: req.Offset, Encoding: encoding}
	if encoding == "base64" {
		res.Content = base64.StdEncoding.EncodeToString(buf)
		return res, nil
	}
	if !utf8.Valid(buf) {
		return nil, fail("not_text", fxFailure, fs.Rel(target)+`: the content is not valid UTF-8 text; read it with "encoding": "base64"`)
	}
	res.Content = string(buf)
	return res, nil
}
