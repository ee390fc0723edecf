package gateway

// A raw read's answer: the file's bytes.

import (
	"io"
	"net/http"
	"os"
	"strconv"

	"github.com/sftpgate/sftpgate/gateway/commands"
	"github.com/sftpgate/sftpgate/internal/files"
)

// serveFile answers a raw read with the bytes of the file open opens,
// honouring Range and conditional headers; it reports whether it sent the
// answer.
func serveFile(w http.ResponseWriter, r *http.Request, fs *commands.FS,
	open func(*commands.FS, []byte) (files.File, os.FileInfo, error), body []byte) (bool, error) {
	f, fi, err := open(fs, body)
	if err != nil {
		return false, err
	}
	defer func() { _ = f.Close() }()
	w.Header().Set("Content-Type", octetStream)
	if conditional(r) {
		src := &recordingFile{File: f}
		http.ServeContent(w, r, "", fi.ModTime(), src)
		return true, src.err
	}
	// The whole file: File.WriteTo reads ahead with many requests in
	// flight, where ServeContent would read 32 KiB at a time.
	w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	w.Header().Set("Last-Modified", fi.ModTime().UTC().Format(http.TimeFormat))
	w.Header().Set("Accept-Ranges", "bytes")
	w.WriteHeader(http.StatusOK)
	n, err := f.WriteTo(fs.Pace.Writer(w))
	// The answer has gone out; an error of the session still takes the
	// session out of the pool (one of the client's is not the session's),
	// and so does one that ended the file early: the client sees a body
	// shorter than its Content-Length.
	if err == nil && n < fi.Size() {
		err = commands.ConfirmEnd(f, n)
	}
	if files.SessionFailed(err) {
		return true, err
	}
	return true, nil
}

// recordingFile keeps the first error of the session while
// http.ServeContent, which swallows it, reads the file.
type recordingFile struct {
	files.File
	err error
}

func (f *recordingFile) Read(b []byte) (int, error) {
	n, err := f.File.Read(b)
	if f.err == nil && files.SessionFailed(err) && err != io.EOF { //nolint:errorlint // io.EOF as returned by Read
		f.err = err
	}
	return n, err
}

func (f *recordingFile) Seek(offset int64, whence int) (int64, error) {
	n, err := f.File.Seek(offset, whence)
	if f.err == nil && files.SessionFailed(err) {
		f.err = err
	}
	return n, err
}

// conditional reports whether a request asks for a part of a file or
// depends on its state, which http.ServeContent answers.
func conditional(r *http.Request) bool {
	for _, h := range []string{"Range", "If-Range", "If-Modified-Since", "If-Unmodified-Since", "If-Match", "If-None-Match"} {
		if r.Header.Get(h) != "" {
			return true
		}
	}
	return false
}
