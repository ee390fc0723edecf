package ftpfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sync"

	"github.com/jlaffaye/ftp"

	"github.com/sftpgate/sftpgate/internal/files"
)

// A file's reads are RETR streams from an offset (REST); its writes are
// one STOR stream, of a new file or from the size it has (resume). What
// is neither (a write in the middle, reading and writing one file) is
// unsupported. A stream holds a control connection of its own until it
// ends.

// Open opens name for reading, after checking that it is there.
func (f *FS) Open(name string) (files.File, error) {
	return f.OpenFile(name, os.O_RDONLY)
}

// OpenFile opens name to read (O_RDONLY), or to write (O_WRONLY) from
// its start with O_TRUNC, from its end with O_APPEND, or from where a
// Seek puts the offset, which must be its size. O_RDWR is unsupported.
func (f *FS) OpenFile(name string, flag int) (files.File, error) {
	name = f.abs(name)
	file := &file{fs: f, name: name, flag: flag}
	switch {
	case flag&os.O_RDWR != 0:
		return nil, unsupported("opening a file to read and write")
	case flag&os.O_WRONLY == 0:
		fi, err := f.Stat(name)
		if err != nil {
			return nil, err
		}
		file.size = fi.Size()
		return file, nil
	}
	fi, err := f.Stat(name)
	switch {
	case err == nil && flag&os.O_EXCL != 0:
		return nil, exists(name)
	case err == nil && fi.IsDir():
		return nil, &files.StatusError{Code: files.FxFileIsADirectory, Err: &fs.PathError{Op: "open", Path: name, Err: errors.New("is a directory")}}
	case err == nil:
		file.size = fi.Size()
	case !errors.Is(err, fs.ErrNotExist) || flag&os.O_CREATE == 0:
		return nil, err
	}
	switch {
	case flag&os.O_TRUNC != 0 || err != nil:
		file.size = 0
		return file, file.store(0)
	case flag&os.O_APPEND != 0:
		file.off = file.size
	}
	return file, nil
}

type file struct {
	fs   *FS
	name string
	flag int
	// size is the file's size when opened (a read's end; where a write
	// may begin).
	size int64
	off  int64

	mu sync.Mutex
	// rd is the read stream, on rdConn, at rdOff.
	rd     *ftp.Response
	rdConn *conn
	rdOff  int64
	// w is the write stream's pipe; stored ends with the STOR's error.
	w      *io.PipeWriter
	stored chan error
	wOff   int64
	wErr   error
}

func (f *file) Name() string { return f.name }

func (f *file) Stat() (fs.FileInfo, error) { return f.fs.Stat(f.name) }

func (f *file) Chmod(fs.FileMode) error { return unsupported("changing a file's mode") }

func (f *file) Seek(offset int64, whence int) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch whence {
	case io.SeekCurrent:
		offset += f.off
	case io.SeekEnd:
		offset += f.size
	}
	if offset < 0 {
		return f.off, &files.StatusError{Code: files.FxFailure, Err: errors.New("seek before the start of the file")}
	}
	f.off = offset
	return offset, nil
}

// Read reads from the stream at the offset, opening one there if there is
// none.
func (f *file) Read(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rd == nil || f.rdOff != f.off {
		_ = f.endRead() // a stream given up: what it read was good
		if f.off >= f.size {
			return 0, io.EOF
		}
		c, err := f.fs.take()
		if err != nil {
			return 0, err
		}
		rd, err := c.c.RetrFrom(f.name, uint64(f.off)) //nolint:gosec // an offset is never negative
		if err != nil {
			err = wrap(err)
			f.fs.give(c, err)
			return 0, err
		}
		f.rd, f.rdConn, f.rdOff = rd, c, f.off
	}
	n, err := f.rd.Read(p)
	f.off += int64(n)
	f.rdOff = f.off
	if errors.Is(err, io.EOF) {
		// The server's 226 says the file was sent whole.
		if cerr := f.endRead(); cerr != nil {
			return n, cerr
		}
		return n, io.EOF
	}
	if err != nil {
		f.abortRead()
		return n, wrap(err)
	}
	return n, nil
}

// endRead ends the read stream; one ended before its end is an abort,
// which servers answer in their own ways: the connection is checked
// with a NOOP before it is used again.
func (f *file) endRead() error {
	if f.rd == nil {
		return nil
	}
	whole := f.rdOff >= f.size
	err := f.rd.Close()
	c := f.rdConn
	f.rd, f.rdConn = nil, nil
	if !whole {
		err = c.c.NoOp()
	}
	err = wrap(err)
	f.fs.give(c, err)
	return err
}

func (f *file) abortRead() {
	if f.rd != nil {
		_ = f.rdConn.s.control.Close()
		f.fs.give(f.rdConn, &files.StatusError{Code: files.FxConnectionLost, Err: errors.New("read cut off")})
		f.rd, f.rdConn = nil, nil
	}
}

// ReadAt reads with a stream of its own from off.
func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if off >= f.size {
		return 0, io.EOF
	}
	var n int
	err := f.fs.do(func(c *conn) error {
		rd, err := c.c.RetrFrom(f.name, uint64(off)) //nolint:gosec // off < f.size
		if err != nil {
			return err
		}
		n, err = io.ReadFull(rd, p)
		whole := off+int64(n) >= f.size
		cerr := rd.Close()
		if !whole {
			cerr = c.c.NoOp()
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			err = nil
		}
		return errors.Join(err, cerr)
	})
	if err == nil && n < len(p) {
		err = io.EOF
	}
	return n, err
}

// WriteTo copies the rest of the file to w in one stream.
func (f *file) WriteTo(w io.Writer) (int64, error) {
	var total int64
	buf := make([]byte, 128<<10)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			m, werr := w.Write(buf[:n])
			total += int64(m)
			if werr != nil {
				return total, werr
			}
		}
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// store starts the write stream from off (0: a new file).
func (f *file) store(off int64) error {
	c, err := f.fs.take()
	if err != nil {
		return err
	}
	r, w := io.Pipe()
	started := make(chan struct{})
	f.stored = make(chan error, 1)
	f.w, f.wOff = w, off
	go func() {
		err := c.c.StorFrom(f.name, &startReader{r: r, started: started}, uint64(off)) //nolint:gosec // a size
		err = wrap(err)
		f.fs.give(c, err)
		_ = r.CloseWithError(errors.Join(err, io.ErrClosedPipe))
		f.stored <- err
	}()
	// The server accepted the STOR once the stream reads; a refusal
	// (a missing folder, no right to write) ends the goroutine first.
	select {
	case <-started:
		return nil
	case err := <-f.stored:
		f.w = nil
		if err == nil {
			err = &files.StatusError{Code: files.FxFailure, Err: errors.New("the server ended the upload before it began")}
		}
		// Servers refuse a file in a missing folder as any other (553):
		// the folder says which it was.
		if fi, serr := f.fs.Stat(path.Dir(f.name)); errors.Is(serr, fs.ErrNotExist) {
			return notFound(path.Dir(f.name))
		} else if serr == nil && !fi.IsDir() {
			return &files.StatusError{Code: files.FxNotADirectory, Err: fmt.Errorf("%s is a file", path.Dir(f.name))}
		}
		return err
	}
}

type startReader struct {
	r       io.Reader
	started chan struct{}
	once    sync.Once
}

func (s *startReader) Read(p []byte) (int, error) {
	s.once.Do(func() { close(s.started) })
	return s.r.Read(p)
}

// storeBuffer is the size of the writes an upload's stream makes: io.Copy's
// 32 KiB made twice the hand-offs and deadlines, and the transfer slower
// than rclone's over the same server.
const storeBuffer = 256 << 10

// WriteTo sends the stream to w (the data connection) in writes of
// storeBuffer.
func (s *startReader) WriteTo(w io.Writer) (int64, error) {
	s.once.Do(func() { close(s.started) })
	return io.CopyBuffer(w, struct{ io.Reader }{s.r}, make([]byte, storeBuffer))
}

// Write writes at the offset, which must be where the stream is, or the
// file's size to start one (resuming a cut-off write).
func (f *file) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.flag&os.O_WRONLY == 0 {
		return 0, &files.StatusError{Code: files.FxPermissionDenied, Err: errors.New("the file is open to read")}
	}
	if f.wErr != nil {
		return 0, f.wErr
	}
	if f.w == nil || f.wOff != f.off {
		if f.w != nil || f.off != f.size {
			return 0, unsupported("writing other than at a file's end")
		}
		if err := f.store(f.off); err != nil {
			f.wErr = err
			return 0, err
		}
	}
	n, err := f.w.Write(p)
	f.off += int64(n)
	f.wOff = f.off
	if err != nil {
		f.wErr = f.finish()
		if f.wErr == nil {
			f.wErr = wrap(err)
		}
		return n, f.wErr
	}
	return n, nil
}

// ReadFromWithConcurrency writes what r gives in the one stream FTP has.
// After a failure, where the server's file ends is where to resume.
func (f *file) ReadFromWithConcurrency(r io.Reader, _ int) (int64, error) {
	return io.Copy(struct{ io.Writer }{f}, r)
}

// finish ends the write stream and waits for the server's word.
func (f *file) finish() error {
	if f.w == nil {
		return nil
	}
	_ = f.w.Close()
	err := <-f.stored
	f.w = nil
	return err
}

func (f *file) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	rerr := f.endRead()
	werr := f.finish()
	if f.wErr != nil {
		return f.wErr
	}
	if rerr != nil && f.flag&os.O_WRONLY == 0 {
		// A read ended early: what was read is good.
		rerr = nil
	}
	return errors.Join(rerr, werr)
}
