// Package ftpfs is the FTP and FTPS backend of the file layer
// (internal/files): a session of control connections to one server as a
// files.FS, each socket bounded and checked by the dial policy, and its
// errors turned into the file layer's. It and internal/ftpdial, which
// dials FtpConnections, are the only packages that speak FTP (a test in
// hack/manifests says so).
//
// FTP has one transfer at a time per control connection, and no
// operation while one runs: a session keeps up to Config.MaxConns of them,
// dialled as needed; an open stream holds one until it ends, and other
// operations wait their turn.
package ftpfs

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jlaffaye/ftp"

	"github.com/sftpgate/sftpgate/internal/files"
)

// TLS is how connections are encrypted.
type TLS int

// How connections are encrypted.
const (
	Explicit TLS = iota
	Implicit
	None
)

// Config is how to reach and log in to one server.
type Config struct {
	// Addr is the control connection's host:port.
	Addr string
	TLS  TLS
	// TLSConfig checks the server's certificate (unless TLS is None);
	// its session cache lets data connections resume the control
	// connection's session, as many servers ask.
	TLSConfig      *tls.Config
	User, Password string
	// Control checks each socket's address (the dial policy).
	Control func(ctx context.Context, network, address string, c syscall.RawConn) error
	// ConnectTimeout bounds a dial and login; OperationTimeout each read
	// or write on a socket.
	ConnectTimeout, OperationTimeout time.Duration
	// MaxConns bounds a session's control connections (0: 3);
	// operations beyond wait for one up to OperationTimeout.
	MaxConns int
	// MaxListing bounds the bytes of one directory's listing (0: 16 MiB).
	MaxListing int64
	// DisableEPSV asks for passive connections with PASV only.
	DisableEPSV bool
}

const (
	defaultMaxConns   = 3
	defaultMaxListing = 16 << 20
)

// FS is a session with one server: its files, through control
// connections dialled as needed, up to MaxConns.
type FS struct {
	cfg *Config
	// Certificate is the DER certificate the server presented (nil
	// without TLS).
	Certificate []byte
	// home is the login directory, which relative names start from.
	home string
	// coarse: the server lists with LIST, not MLSD.
	coarse bool

	mu     sync.Mutex
	idle   []*conn
	all    map[*conn]struct{}
	closed bool
	// freed is closed (and replaced) when a connection is given back or
	// dropped, for operations waiting for one.
	freed chan struct{}
}

var _ files.FS = (*FS)(nil)

// conn is one control connection.
type conn struct {
	c *ftp.ServerConn
	s *sockets
}

// Dial logs in to the server described by cfg, within ctx. Failures are
// *DialError values, which say the step.
func Dial(ctx context.Context, cfg *Config) (*FS, error) {
	f := &FS{cfg: cfg, all: map[*conn]struct{}{}, freed: make(chan struct{})}
	c, err := f.dial(ctx)
	if err != nil {
		return nil, err
	}
	f.coarse = !c.c.IsTimePreciseInList()
	f.home, err = c.c.CurrentDir()
	if err != nil {
		_ = c.c.Quit()
		return nil, &DialError{Step: StepLogin, Err: err}
	}
	f.mu.Lock()
	f.all[c] = struct{}{}
	f.idle = append(f.idle, c)
	f.mu.Unlock()
	return f, nil
}

// Steps of a dial, by which a failure is named.
const (
	StepConnect = "connect"
	StepGreet   = "greet"
	StepTLS     = "tls"
	StepLogin   = "login"
)

// DialError is a dial that failed at Step.
type DialError struct {
	Step string
	Err  error
}

func (e *DialError) Error() string { return e.Err.Error() }
func (e *DialError) Unwrap() error { return e.Err }

func (f *FS) dial(ctx context.Context) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.ConnectTimeout)
	defer cancel()
	s := &sockets{cfg: f.cfg, ctx: ctx}
	opts := []ftp.DialOption{
		ftp.DialWithDialFunc(s.dial), ftp.DialWithWritingMDTM(true), ftp.DialWithDisabledEPSV(f.cfg.DisableEPSV),
		// Listings are whole, and bounded by their bytes; MLSD where the
		// server offers it, which gives times to the second.
	}
	switch f.cfg.TLS {
	case Explicit:
		opts = append(opts, ftp.DialWithExplicitTLS(f.cfg.TLSConfig))
	case Implicit:
		opts = append(opts, ftp.DialWithTLS(f.cfg.TLSConfig))
	}
	// Dial and login have no context of their own: cancelling ctx closes
	// the socket.
	stop := context.AfterFunc(ctx, func() {
		if s.control != nil {
			_ = s.control.Close()
		}
	})
	defer stop()
	c, err := ftp.Dial(f.cfg.Addr, opts...)
	if err != nil && ctx.Err() != nil {
		// The socket was closed for the dial's time: say so.
		err = errors.Join(ctx.Err(), err)
	}
	if err != nil {
		step := StepGreet
		switch {
		case s.control == nil:
			step = StepConnect
		case f.cfg.TLS != None && (isTLS(err) || s.commanded.Load()):
			// The only command before a login is AUTH TLS.
			step = StepTLS
		}
		return nil, &DialError{Step: step, Err: err}
	}
	if err := c.Login(f.cfg.User, f.cfg.Password); err != nil {
		_ = c.Quit()
		if ctx.Err() != nil {
			err = errors.Join(ctx.Err(), err)
		}
		step := StepLogin
		if f.cfg.TLS != None && isTLS(err) {
			step = StepTLS
		}
		return nil, &DialError{Step: step, Err: err}
	}
	if ctx.Err() != nil {
		_ = c.Quit()
		return nil, &DialError{Step: StepLogin, Err: ctx.Err()}
	}
	s.bounds.timeout = f.cfg.OperationTimeout
	return &conn{c: c, s: s}, nil
}

// take is an idle control connection, or a new one while the session has
// fewer than MaxConns; else it waits for one, up to OperationTimeout.
func (f *FS) take() (*conn, error) {
	deadline := time.Now().Add(f.cfg.OperationTimeout)
	for {
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			return nil, &files.StatusError{Code: files.FxNoConnection, Err: errors.New("the FTP session is closed")}
		}
		if n := len(f.idle); n > 0 {
			c := f.idle[n-1]
			f.idle = f.idle[:n-1]
			f.mu.Unlock()
			return c, nil
		}
		if len(f.all) < f.maxConns() {
			break // f.mu held
		}
		freed := f.freed
		f.mu.Unlock()
		wait := time.Until(deadline)
		if wait <= 0 {
			return nil, &files.StatusError{Code: files.FxFailure, Err: fmt.Errorf(
				"all %d FTP connections of the session stayed busy for %s", f.maxConns(), f.cfg.OperationTimeout)}
		}
		timer := time.NewTimer(wait)
		select {
		case <-freed:
		case <-timer.C:
		}
		timer.Stop()
	}
	placeholder := &conn{}
	f.all[placeholder] = struct{}{}
	f.mu.Unlock()
	c, err := f.dial(context.Background())
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.all, placeholder)
	if err != nil {
		f.wake()
		return nil, &files.StatusError{Code: files.FxNoConnection, Err: err}
	}
	if f.closed {
		_ = c.c.Quit()
		return nil, &files.StatusError{Code: files.FxNoConnection, Err: errors.New("the FTP session is closed")}
	}
	f.all[c] = struct{}{}
	return c, nil
}

func (f *FS) maxConns() int {
	if f.cfg.MaxConns > 0 {
		return f.cfg.MaxConns
	}
	return defaultMaxConns
}

// wake tells the operations waiting for a connection; f.mu is held.
func (f *FS) wake() {
	close(f.freed)
	f.freed = make(chan struct{})
}

// give returns c after an operation that ended with err: a connection
// in no known state is closed.
func (f *FS) give(c *conn, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.wake()
	if f.closed || files.SessionFailed(err) {
		delete(f.all, c)
		go func() { _ = c.c.Quit() }()
		return
	}
	f.idle = append(f.idle, c)
}

// do runs fn on a control connection; its error is the file layer's.
func (f *FS) do(fn func(c *conn) error) error {
	c, err := f.take()
	if err != nil {
		return err
	}
	err = wrap(fn(c))
	f.give(c, err)
	return err
}

// Close ends every control connection, cutting off what runs on them.
func (f *FS) Close() error {
	f.mu.Lock()
	f.closed = true
	all := f.all
	f.all, f.idle = map[*conn]struct{}{}, nil
	f.wake()
	f.mu.Unlock()
	for c := range all {
		if c.c != nil {
			_ = c.s.control.Close()
		}
	}
	return nil
}

// FS is the session's files: itself (files.Session).
func (f *FS) FS() files.FS { return f }

// Version names the protocol: an FTP server's greeting is its own words.
func (f *FS) Version() string {
	if f.cfg.TLS == None {
		return "FTP"
	}
	return "FTPS"
}

// Keepalive sends a NOOP on an idle control connection, which fails when
// the session is broken.
func (f *FS) Keepalive() error {
	return f.do(func(c *conn) error { return c.c.NoOp() })
}

// Abs is name as the server's absolute path: relative to the login
// directory unless absolute.
func (f *FS) Abs(name string) string { return f.abs(name) }

func (f *FS) abs(name string) string {
	if path.IsAbs(name) {
		return path.Clean(name)
	}
	return path.Join(f.home, name)
}

// Stat asks with MLST where the server offers it; else with SIZE and MDTM
// for a file, CWD for a directory (whose time FTP does not give).
func (f *FS) Stat(name string) (fs.FileInfo, error) {
	name = f.abs(name)
	var fi fs.FileInfo
	err := f.do(func(c *conn) error {
		var err error
		fi, err = stat(c.c, name)
		return err
	})
	return fi, err
}

func stat(c *ftp.ServerConn, name string) (fs.FileInfo, error) {
	if e, err := c.GetEntry(name); err == nil {
		return entryInfo(e, path.Base(name)), nil
	} else if !unsupportedReply(err) {
		return nil, err
	}
	size, err := c.FileSize(name)
	if err == nil {
		fi := &info{name: path.Base(name), size: size, mode: 0o644}
		if c.IsGetTimeSupported() {
			if fi.mtime, err = c.GetTime(name); err != nil {
				return nil, err
			}
		}
		return fi, nil
	}
	if !fileUnavailable(err) {
		return nil, err
	}
	if err := c.ChangeDir(name); err != nil {
		if fileUnavailable(err) {
			return nil, notFound(name)
		}
		return nil, err
	}
	return &info{name: path.Base(name), mode: fs.ModeDir | 0o755}, nil
}

func unsupportedReply(err error) bool {
	code, _ := files.Status(wrap(err))
	return code == files.FxOpUnsupported
}

func fileUnavailable(err error) bool {
	code, _ := files.Status(wrap(err))
	return code == files.FxNoSuchFile
}

// Lstat is Stat, but for a link, which only its directory's listing
// shows as one.
func (f *FS) Lstat(name string) (fs.FileInfo, error) {
	name = f.abs(name)
	var fi fs.FileInfo
	err := f.do(func(c *conn) error {
		e, err := f.entryIn(c, path.Dir(name), path.Base(name))
		switch {
		case err != nil:
			return err
		case e != nil && e.Type == ftp.EntryTypeLink:
			fi = entryInfo(e, e.Name)
			return nil
		}
		fi, err = stat(c.c, name)
		return err
	})
	return fi, err
}

// ReadLink is where the link at name leads, as its directory's listing
// says ("name -> target").
func (f *FS) ReadLink(name string) (string, error) {
	name = f.abs(name)
	var target string
	err := f.do(func(c *conn) error {
		e, err := f.entryIn(c, path.Dir(name), path.Base(name))
		switch {
		case err != nil:
			return err
		case e == nil:
			return notFound(name)
		case e.Type != ftp.EntryTypeLink:
			return &files.StatusError{Code: files.FxFailure, Err: fmt.Errorf("%s is not a link", name)}
		case e.Target == "":
			return unsupported("reading a link the server lists without its target")
		}
		target = e.Target
		return nil
	})
	return target, err
}

// maxLinks bounds the links RealPath follows.
const maxLinks = 16

// RealPath is name with every link resolved, as the server has them: a
// directory is where the server says it is once changed into (PWD), a
// link is where its directory's listing says it leads.
func (f *FS) RealPath(name string) (string, error) {
	name = f.abs(name)
	var real string
	err := f.do(func(c *conn) error {
		var err error
		real, err = f.realPath(c, name, 0)
		return err
	})
	return real, err
}

func (f *FS) realPath(c *conn, name string, links int) (string, error) {
	if links > maxLinks {
		return "", &files.StatusError{Code: files.FxFailure, Err: fmt.Errorf("%s: more than %d links in a row", name, maxLinks)}
	}
	if err := c.c.ChangeDir(name); err == nil {
		wd, err := c.c.CurrentDir()
		if err != nil {
			return "", err
		}
		if !path.IsAbs(wd) {
			return "", &files.StatusError{Code: files.FxFailure, Err: fmt.Errorf("the server named its directory %q, not an absolute path", wd)}
		}
		return path.Clean(wd), nil
	}
	if name == "/" {
		return "/", nil
	}
	dir, err := f.realPath(c, path.Dir(name), links)
	if err != nil {
		return "", err
	}
	base := path.Base(name)
	e, err := f.entryIn(c, dir, base)
	switch {
	case err != nil:
		return "", err
	case e != nil && e.Type == ftp.EntryTypeLink && e.Target == "":
		return "", &files.StatusError{Code: files.FxFailure, Err: fmt.Errorf("%s is a link the server lists without its target", name)}
	case e != nil && e.Type == ftp.EntryTypeLink:
		target := e.Target
		if !path.IsAbs(target) {
			target = path.Join(dir, target)
		}
		return f.realPath(c, path.Clean(target), links+1)
	}
	return path.Join(dir, base), nil
}

// entryIn is base's own entry in the listing of dir (a link as a link),
// or nil when it has none. FTP has no lstat: the whole directory is
// listed.
func (f *FS) entryIn(c *conn, dir, base string) (*ftp.Entry, error) {
	entries, err := f.list(c, dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.Name == base {
			return e, nil
		}
	}
	return nil, nil
}

// list is dir's listing, within MaxListing bytes. It changes into dir
// first, so that a name is never read as LIST's options.
func (f *FS) list(c *conn, dir string) ([]*ftp.Entry, error) {
	if err := c.c.ChangeDir(dir); err != nil {
		return nil, err
	}
	c.s.listing.Store(cmp.Or(f.cfg.MaxListing, defaultMaxListing))
	defer c.s.listing.Store(0)
	return c.c.List("")
}

// Each lists dir whole (FTP reads no part of a listing), within
// MaxListing bytes.
func (f *FS) Each(dir string, fn func(fs.FileInfo) error) error {
	dir = f.abs(dir)
	var entries []*ftp.Entry
	limit := cmp.Or(f.cfg.MaxListing, defaultMaxListing)
	err := f.do(func(c *conn) error {
		var err error
		entries, err = f.list(c, dir)
		return err
	})
	if errors.Is(err, ErrTooLarge) {
		return &files.TooLargeError{Dir: dir, Bytes: true, Max: limit, Why: "FTP servers send a listing whole"}
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !files.EntryName(e.Name) {
			continue
		}
		if err := fn(entryInfo(e, e.Name)); err != nil {
			if errors.Is(err, files.Stop) {
				return nil
			}
			return err
		}
	}
	return nil
}

// ListsCoarseTimes is true where the server lists with LIST, which gives
// times to the minute (or the day, for older files); MLSD gives seconds.
func (f *FS) ListsCoarseTimes() bool { return f.coarse }

// ListsWhole is true: FTP sends a listing whole.
func (f *FS) ListsWhole() bool { return true }

// ListsCapped is true: a listing stops at MaxListing bytes.
func (f *FS) ListsCapped() (bool, error) { return true, nil }

// Truncate shrinks name to size by copying what is kept to a file beside
// it and renaming that over it: FTP has no truncate. Growing a file is
// unsupported.
func (f *FS) Truncate(name string, size int64) error {
	name = f.abs(name)
	fi, err := f.Stat(name)
	switch {
	case err != nil:
		return err
	case fi.IsDir():
		return &files.StatusError{Code: files.FxFileIsADirectory, Err: fmt.Errorf("%s is a directory", name)}
	case size == fi.Size():
		return nil
	case size > fi.Size():
		return unsupported("growing a file")
	}
	kept := name + ".sftpgate-truncating"
	src, err := f.Open(name)
	if err != nil {
		return err
	}
	defer func() { _ = src.Close() }()
	dst, err := f.OpenFile(kept, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return err
	}
	if _, err := io.Copy(struct{ io.Writer }{dst}, io.LimitReader(src, size)); err != nil {
		_ = dst.Close()
		_ = f.Remove(kept)
		return err
	}
	if err := dst.Close(); err != nil {
		_ = f.Remove(kept)
		return err
	}
	_ = src.Close()
	// Servers on POSIX file systems replace name in one step; others
	// refuse, and it is removed first.
	return f.do(func(c *conn) error {
		if c.c.Rename(kept, name) == nil {
			return nil
		}
		if err := c.c.Delete(name); err != nil {
			return err
		}
		return c.c.Rename(kept, name)
	})
}

// Modeless marks the FS as keeping no modes: FTP has no standard command
// for them.
func (f *FS) Modeless() {}

// WritesInOrder says a file is written at its end, one STOR or APPE
// stream (files.WritesInOrder).
func (f *FS) WritesInOrder() {}

// Chmod is unsupported (SITE CHMOD is no standard, nor offered alike).
func (f *FS) Chmod(string, fs.FileMode) error { return unsupported("changing a file's mode") }

// Symlink is unsupported: FTP has no command for it.
func (f *FS) Symlink(string, string) error { return unsupported("making a link") }

// Chtimes sets the modification time (MFMT, or vsftpd's MDTM with a
// time); FTP keeps no access time.
func (f *FS) Chtimes(name string, _, mtime time.Time) error {
	name = f.abs(name)
	return f.do(func(c *conn) error {
		if !c.c.IsSetTimeSupported() {
			return unsupported("setting a file's time")
		}
		return c.c.SetTime(name, mtime.Truncate(time.Second))
	})
}

// Remove removes a file (DELE), never a directory.
func (f *FS) Remove(name string) error {
	name = f.abs(name)
	return f.do(func(c *conn) error { return c.c.Delete(name) })
}

// Rename refuses a to that exists (FTP servers replace it), asking first:
// a file put there in between is replaced.
func (f *FS) Rename(from, to string) error {
	from, to = f.abs(from), f.abs(to)
	return f.do(func(c *conn) error {
		if _, err := stat(c.c, to); err == nil {
			return exists(to)
		} else if !errors.Is(wrap(err), fs.ErrNotExist) {
			return err
		}
		return c.c.Rename(from, to)
	})
}

// PosixRename is unsupported: FTP does not promise that RNTO replaces in
// one step.
func (f *FS) PosixRename(string, string) error { return files.ErrUnsupported }

// HasPosixRename is false, as PosixRename is unsupported.
func (f *FS) HasPosixRename() bool { return false }

// Mkdir makes a directory (MKD); one already there is fs.ErrExist.
func (f *FS) Mkdir(name string) error {
	name = f.abs(name)
	return f.do(func(c *conn) error {
		err := c.c.MakeDir(name)
		if err != nil {
			if _, serr := stat(c.c, name); serr == nil {
				return exists(name)
			}
		}
		return err
	})
}

// MkdirAll makes name and its missing parents.
func (f *FS) MkdirAll(name string) error {
	name = f.abs(name)
	return f.do(func(c *conn) error { return mkdirAll(c.c, name) })
}

func mkdirAll(c *ftp.ServerConn, name string) error {
	fi, err := stat(c, name)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return &files.StatusError{Code: files.FxNotADirectory, Err: fmt.Errorf("%s is a file", name)}
	case !errors.Is(wrap(err), fs.ErrNotExist):
		return err
	}
	if parent := path.Dir(name); parent != name {
		if err := mkdirAll(c, parent); err != nil {
			return err
		}
	}
	return c.MakeDir(name)
}

// RemoveDirectory removes an empty directory (RMD).
func (f *FS) RemoveDirectory(name string) error {
	name = f.abs(name)
	return f.do(func(c *conn) error { return c.c.RemoveDir(name) })
}

// Space is unsupported: FTP has no command for it.
func (f *FS) Space(string) (files.Space, error) {
	return files.Space{}, unsupported("a file system's room")
}

// info is what FTP tells of a file.
type info struct {
	name  string
	size  int64
	mode  fs.FileMode
	mtime time.Time
}

func (i *info) Name() string       { return i.name }
func (i *info) Size() int64        { return i.size }
func (i *info) Mode() fs.FileMode  { return i.mode }
func (i *info) ModTime() time.Time { return i.mtime }
func (i *info) IsDir() bool        { return i.mode.IsDir() }
func (i *info) Sys() any           { return nil }

func entryInfo(e *ftp.Entry, name string) fs.FileInfo {
	i := &info{name: name, size: int64(min(e.Size, math.MaxInt64)), mode: 0o644, mtime: e.Time}
	switch e.Type {
	case ftp.EntryTypeFolder:
		i.mode, i.size = fs.ModeDir|0o755, 0
	case ftp.EntryTypeLink:
		i.mode = fs.ModeSymlink | 0o777
	}
	return i
}

// isTLS reports whether err came from TLS (a handshake, a record).
func isTLS(err error) bool {
	var (
		record tls.RecordHeaderError
		alert  tls.AlertError
		verify *tls.CertificateVerificationError
	)
	return errors.As(err, &record) || errors.As(err, &alert) || errors.As(err, &verify) ||
		strings.Contains(err.Error(), "tls:")
}
