package commands

import (
	"encoding/base64"
	"errors"
	"io"
	"os"
	"path"
	"reflect"
	"strconv"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sftpgate/sftpgate/gateway/budget"
	"github.com/sftpgate/sftpgate/gateway/pacing"
	"github.com/sftpgate/sftpgate/internal/files"
)

// FileContent is a file's content in a request: text or base64, one of them.
type FileContent struct {
	Text   *jsonString `json:"text,omitempty"`
	Base64 *jsonString `json:"base64,omitempty"`
}

// jsonString is a JSON string of a request that may be large (a file's
// content): the quoted value where it lies in the request body, unquoted
// there when it is used, so that the content is held once, not as the body
// and again as its bytes. The body no longer holds the request after that,
// so the commands with such values (write, append) are never retried,
// which would decode it again.
type jsonString []byte

// UnmarshalJSONFrom keeps the value as the decoder found it. json.Unmarshal
// reads from the body itself, never moving or copying it, so the value
// stays valid with the body.
func (s *jsonString) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if kind := dec.PeekKind(); kind != '"' {
		return &json.SemanticError{JSONKind: kind, GoType: reflect.TypeFor[string]()}
	}
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	*s = jsonString(v)
	return nil
}

// bytes unquotes the value, once. Unquoted, every escape and the quotes
// shrink and valid UTF-8 stays as it is, so each byte is written at or
// before where it was read, and the body can take the result itself. Only
// invalid UTF-8 grows, each byte becoming a U+FFFD of three; such content
// gets a buffer of its own, held against the budget.
func (s jsonString) bytes(fs *FS) ([]byte, error) {
	dst := s[:0]
	if !utf8.Valid(s) {
		if err := fs.Memory.Hold(3 * int64(len(s))); err != nil {
			return nil, err
		}
		dst = make([]byte, 0, 3*len(s))
	}
	// The decoder checked the value; the only error left is invalid UTF-8,
	// replaced with U+FFFD as the rest of a request's strings are.
	v, _ := jsontext.AppendUnquote(dst, s)
	return v, nil
}

// bytes returns the content; base64's decoding is held against the
// request's memory budget.
func (c *FileContent) bytes(fs *FS) ([]byte, error) {
	switch {
	case c == nil || (c.Text == nil) == (c.Base64 == nil):
		return nil, &BadRequest{Field: "file", Message: `needs exactly one of "text" and "base64"`}
	case c.Text != nil:
		return c.Text.bytes(fs)
	}
	encoded, err := c.Base64.bytes(fs)
	if err != nil {
		return nil, err
	}
	if err := fs.Memory.Hold(int64(base64.StdEncoding.DecodedLen(len(encoded)))); err != nil {
		return nil, err
	}
	b := make([]byte, base64.StdEncoding.DecodedLen(len(encoded)))
	n, err := base64.StdEncoding.Decode(b, encoded)
	if err != nil {
		return nil, &BadRequest{Field: "file.base64", Message: "is not valid base64"}
	}
	return b[:n], nil
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

// resolveForWrite resolves the path of a file to write, making its
// parents first if asked.
func resolveForWrite(fs *FS, p string, createParents bool) (string, error) {
	target, err := fs.Resolve(p)
	if err != nil {
		return "", err
	}
	if createParents {
		if err := fs.Files.MkdirAll(path.Dir(target)); err != nil {
			return "", serverFailure(err, fs.Rel(path.Dir(target)))
		}
		return target, nil
	}
	return target, fs.folderFor(target)
}

// folderFor refuses a write of target whose folder is missing, or a
// file, where folders are key prefixes (a key needs none, but a write
// asks for one as on a server); elsewhere the server refuses it.
func (fs *FS) folderFor(target string) error {
	if dir := path.Dir(target); dir != fs.Root && files.HasPrefixFolders(fs.Files) {
		return isFolder(fs, dir)
	}
	return nil
}

// appendTo appends what fill writes (at most size bytes; -1 for what fill
// says it sent) to target, making it if missing. An append that fails
// leaves the file at its length before: what reached it is cut off again,
// now, or by the next session when this one broke.
func appendTo(fs *FS, target string, mode *os.FileMode, size int64, fill filler) (any, error) {
	// Opening a FIFO to write blocks the server until a reader comes, as
	// openRead says: what is there is asked first.
	if fi, err := fs.Files.Stat(target); err == nil && !fi.IsDir() {
		if err := readable(fs, target, fi, nil); err != nil {
			return nil, err
		}
	}
	f, err := fs.Files.OpenFile(target, os.O_WRONLY|os.O_APPEND)
	if errors.Is(err, os.ErrNotExist) {
		// A new file is made as write makes one, so that one cut off
		// halfway is removed again; unless another client makes it first.
		n, writeErr := fs.writeFile(target, nil, mode, false, fill)
		var failure *Failure
		if !errors.As(writeErr, &failure) || failure.Code != "already_exists" {
			if writeErr != nil {
				return nil, notAFile(fs, writeErr, target)
			}
			return AppendResult{Path: fs.Rel(target), Size: n}, nil
		}
		f, err = fs.Files.OpenFile(target, os.O_WRONLY|os.O_APPEND)
	}
	if err != nil {
		return nil, notAFile(fs, err, target)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, serverFailure(err, fs.Rel(target))
	}
	start := fi.Size()
	n, err := fillFile(f, mode, fill)
	if err != nil {
		// Past most, others have appended since: theirs stays.
		fs.undo(cutBack(target, start, start+max(n, size)), err)
		return nil, serverFailure(err, fs.Rel(target))
	}
	if fi, err = fs.Files.Stat(target); err != nil {
		return nil, serverFailure(err, fs.Rel(target))
	}
	return AppendResult{Path: fs.Rel(target), Size: fi.Size()}, nil
}

// cutBack cuts the file at p back to size, when it is larger, and no
// larger than most: what a failed write added, and nothing since.
func cutBack(p string, size, most int64) Undo {
	return func(fs *FS) error {
		fi, err := fs.Files.Stat(p)
		if err != nil || fi.Size() <= size || fi.Size() > most {
			return files.IgnoreMissing(err)
		}
		return fs.Files.Truncate(p, size)
	}
}

// notAFile says so when a file operation met a directory: SFTP v3 servers
// answer it with a generic failure.
func notAFile(fs *FS, err error, target string) error {
	if failure := serverFailure(err, fs.Rel(target)); files.SessionFailed(failure) || refused(failure) {
		return failure
	}
	switch fi, statErr := fs.Files.Stat(target); {
	case files.SessionFailed(statErr):
		return statErr
	case statErr == nil && fi.IsDir():
		return fail("is_a_directory", files.FxFileIsADirectory, fs.Rel(target)+": is a directory")
	}
	return serverFailure(err, fs.Rel(target))
}

// writeContent runs write or append with the content in the JSON request.
func writeContent(fs *FS, req *writeRequest, appending bool) (any, error) {
	data, err := req.File.bytes(fs)
	if err != nil {
		return nil, err
	}
	return writeData(fs, req, appending, data)
}

// writeData runs write or append with data as the content.
func writeData(fs *FS, req *writeRequest, appending bool, data []byte) (any, error) {
	mode, err := parseMode(req.Mode)
	if err != nil {
		return nil, err
	}
	if appending || req.CreateParents {
		target, err := resolveForWrite(fs, req.Path, req.CreateParents)
		if err != nil {
			return nil, err
		}
		if appending {
			return appendTo(fs, target, mode, int64(len(data)), fs.bytesFiller(data))
		}
		return writeTo(fs, target, nil, mode, req, data)
	}
	// The check of where the path leads goes with the open.
	target, err := fs.lexical(req.Path)
	if err != nil {
		return nil, err
	}
	return writeTo(fs, target, func() error { return fs.checkReal(target, "") }, mode, req, data)
}

// writeTo writes data to target, which check (when set) confirms.
func writeTo(fs *FS, target string, check func() error, mode *os.FileMode, req *writeRequest, data []byte) (any, error) {
	n, err := fs.writeFile(target, check, mode, req.Overwrite == nil || *req.Overwrite, fs.bytesFiller(data))
	if err != nil {
		return nil, notAFile(fs, err, target)
	}
	return WriteResult{Path: fs.Rel(target), BytesWritten: n}, nil
}

func write(fs *FS, req *writeRequest) (any, error) { return writeContent(fs, req, false) }

func appendFile(fs *FS, req *writeRequest) (any, error) {
	if req.Overwrite != nil {
		return nil, &BadRequest{Field: "overwrite", Message: "does not apply to append"}
	}
	return writeContent(fs, req, true)
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

// ReadResult is the result of read. It writes its own JSON, encoding the
// content straight from what was read: a large file is held once, not
// again as a string and as its encoding.
type ReadResult struct {
	Path     string
	Size     int64
	Offset   int64
	Encoding string
	Content  []byte
	// pace paces the content's writing, as its reading was.
	pace *pacing.Stream
}

// WriteJSON writes the result as the API's JSON object.
func (r *ReadResult) WriteJSON(w io.Writer) error {
	head := struct {
		Path     string `json:"path"`
		Size     int64  `json:"size"`
		Offset   int64  `json:"offset"`
		Encoding string `json:"encoding"`
	}{r.Path, r.Size, r.Offset, r.Encoding}
	b, err := json.Marshal(head)
	if err != nil {
		return err
	}
	// The object without its closing brace, then the content.
	if _, err := w.Write(append(b[:len(b)-1], `,"content":"`...)); err != nil {
		return err
	}
	if len(r.Content) > budget.SmallHold {
		w = r.pace.Writer(w)
	}
	if r.Encoding == "base64" {
		enc := base64.NewEncoder(base64.StdEncoding, w)
		if _, err := enc.Write(r.Content); err != nil {
			return err
		}
		if err := enc.Close(); err != nil {
			return err
		}
	} else if err := writeEscaped(w, r.Content); err != nil {
		return err
	}
	_, err = io.WriteString(w, `"}`)
	return err
}

// escapeChunk is how much text writeEscaped escapes at once.
const escapeChunk = 32 << 10

// writeEscaped writes UTF-8 text as the inside of a JSON string, a chunk
// at a time, each cut at the start of a character.
func writeEscaped(w io.Writer, text []byte) error {
	buf := make([]byte, 0, escapeChunk+escapeChunk/4)
	for len(text) > 0 {
		end := min(escapeChunk, len(text))
		for end < len(text) && !utf8.RuneStart(text[end]) {
			end++
		}
		quoted, err := jsontext.AppendQuote(buf[:0], text[:end])
		if err != nil {
			return err
		}
		if _, err := w.Write(quoted[1 : len(quoted)-1]); err != nil {
			return err
		}
		buf, text = quoted, text[end:]
	}
	return nil
}

func read(fs *FS, req *readRequest) (any, error) {
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
	target, f, fi, err := openRead(fs, req.Path)
	if err != nil {
		return nil, err
	}
	// Closed beside the answer: its round trip would only delay it.
	defer func() { go func() { _ = f.Close() }() }()
	length := max(fi.Size()-req.Offset, 0)
	if req.Length != nil {
		length = min(length, *req.Length)
	} else if length > MaxReadLength {
		return nil, &BadRequest{Field: "length", Message: "the file is larger than " + strconv.Itoa(MaxReadLength) +
			" bytes: read it in parts with offset and length"}
	}
	if err := fs.Memory.Hold(length); err != nil {
		return nil, err
	}
	buf := make([]byte, length)
	n, err := readAt(fs, f, buf, req.Offset)
	if errors.Is(err, io.EOF) && int64(n) < length {
		err = ConfirmEnd(f, req.Offset+int64(n))
	} else if errors.Is(err, io.EOF) {
		err = nil
	}
	if err != nil {
		return nil, serverFailure(err, fs.Rel(target))
	}
	buf = buf[:n]
	if encoding == "text" && !utf8.Valid(buf) {
		return nil, fail("not_text", files.FxFailure, fs.Rel(target)+`: the content is not valid UTF-8 text; read it with "encoding": "base64"`)
	}
	return &ReadResult{Path: fs.Rel(target), Size: fi.Size(), Offset: req.Offset, Encoding: encoding, Content: buf, pace: fs.Pace}, nil
}

// readAt fills buf from f at off; a large buf a paced part at a time
// (each part still many SFTP reads in flight).
func readAt(fs *FS, f files.File, buf []byte, off int64) (int, error) {
	read := 0
	for {
		if len(buf) > budget.SmallHold {
			if err := fs.Pace.Next(); err != nil {
				return read, err
			}
		}
		n, err := f.ReadAt(buf[read:min(len(buf), read+filePart)], off+int64(read))
		read += n
		if err != nil || read == len(buf) {
			return read, err
		}
	}
}

func unlink(fs *FS, req *pathRequest) (any, error) {
	target, err := fs.ResolveParent(req.Path)
	if err != nil {
		return nil, err
	}
	fi, err := fs.Files.Lstat(target)
	if err == nil && fi.IsDir() {
		return nil, fail("is_a_directory", files.FxFileIsADirectory, fs.Rel(target)+": is a directory; use rmdir")
	}
	if err == nil {
		err = fs.Files.Remove(target)
	}
	if err != nil {
		return nil, serverFailure(err, fs.Rel(target))
	}
	return PathResult{Path: fs.Rel(target)}, nil
}
