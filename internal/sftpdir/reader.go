// Package sftpdir reads directories a batch of entries at a time, on an
// SFTP channel of its own. pkg/sftp's ReadDir returns every entry at once,
// so a directory of millions of files would be held whole in memory; here
// a listing holds one batch (the server's, about a hundred entries) at a
// time. Only the SFTP version 3 requests a directory read needs are spoken:
// init, opendir, readdir and close. A server that allows one channel per
// connection (OpenSSH's MaxSessions 1) refuses that channel: there,
// directories are read whole with pkg/sftp, up to the Reader's Limits.
package sftpdir

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkg/sftp"

	"golang.org/x/crypto/ssh"

	"github.com/sftpgate/sftpgate/internal/files"
)

// SFTP version 3 packet types and status codes (draft-ietf-secsh-filexfer-02).
const (
	fxpInit     = 1
	fxpVersion  = 2
	fxpClose    = 4
	fxpOpendir  = 11
	fxpReaddir  = 12
	fxpStatus   = 101
	fxpHandle   = 102
	fxpName     = 104
	fxOK        = 0
	fxEOF       = 1
	fxNoSuch    = 2
	fxDenied    = 3
	maxPacket   = 1 << 20 // far above any answer to these requests
	attrSize    = 0x1
	attrUIDGID  = 0x2
	attrPerm    = 0x4
	attrTimes   = 0x8
	attrExtends = 0x80000000
)

// Reader reads directories on its own SFTP channel of an SSH connection,
// opened on first use. Listings on one Reader take turns.
type Reader struct {
	conn *ssh.Client
	// whole reads a directory at once, where the server refuses a channel;
	// received counts what it receives, and limits bound such a read.
	whole    *sftp.Client
	received *Counter
	limits   Limits

	mu sync.Mutex
	ch ssh.Channel
	in *bufio.Reader
	id uint32
	// wholeUntil: the server refused a channel; until then, read
	// directories whole rather than ask again for each listing.
	wholeUntil time.Time
}

// retryChannel is how long a Reader reads directories whole after the
// server refused it a channel: a refusal may pass (a server at its limit
// of sessions for a moment).
const retryChannel = time.Minute

// errRefused: the server would not give the Reader an SFTP channel.
var errRefused = errors.New("the server refused a second SFTP channel")

// New returns a Reader for conn, whose SFTP client is client, reading
// the server's answers through received; it opens nothing yet. Limits
// left zero take their defaults.
func New(conn *ssh.Client, client *sftp.Client, received *Counter, limits Limits) *Reader {
	limits.MaxEntries = cmp.Or(limits.MaxEntries, DefaultMaxEntries)
	limits.MaxBytes = cmp.Or(limits.MaxBytes, DefaultMaxBytes)
	return &Reader{conn: conn, whole: client, received: received, limits: limits}
}

// Limits bound a directory read whole: pkg/sftp holds every entry until
// the last, so a server could otherwise send entries without end.
type Limits struct {
	// MaxEntries is the most entries such a directory may have.
	MaxEntries int
	// MaxBytes is the most the SFTP client may receive while reading it.
	MaxBytes int64
}

// The default Limits.
const (
	DefaultMaxEntries = 100_000
	DefaultMaxBytes   = 32 << 20
)

// Counter counts the bytes read through it, an SFTP client's input, so
// that a Reader can stop a whole read as soon as it passes MaxBytes.
type Counter struct {
	r     io.Reader
	n     atomic.Int64
	watch atomic.Pointer[watch]
}

// watch cancels a whole read once the count passes limit.
type watch struct {
	limit  int64
	cancel context.CancelFunc
}

// Count returns a Counter reading from r.
func Count(r io.Reader) *Counter { return &Counter{r: r} }

func (c *Counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	total := c.n.Add(int64(n))
	if w := c.watch.Load(); w != nil && total > w.limit {
		w.cancel()
	}
	return n, err
}

// Each calls fn with every entry of dir but "." and "..", in the server's
// order, until fn returns an error (files.Stop ends without one). A directory
// the server refuses is an error as pkg/sftp returns it: fs.ErrNotExist,
// fs.ErrPermission, or an *sftp.StatusError. A directory read whole that
// passes the Reader's Limits is a *files.TooLargeError, before fn sees any of
// it; the session stays usable.
func (r *Reader) Each(dir string, fn func(fi os.FileInfo) error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.settle(); err != nil {
		return err
	}
	if r.readsWhole() {
		entries, err := r.readWhole(dir)
		if err != nil {
			return err
		}
		return eachEntry(entries, fn)
	}
	err := r.each(dir, fn)
	var (
		status   *statusError
		callback *callbackError
	)
	switch {
	case errors.As(err, &callback):
		return callback.err
	case err != nil && !errors.As(err, &status):
		// The channel is in an unknown state: the next listing opens a
		// new one.
		_ = r.ch.Close()
		r.ch = nil
	}
	return err
}

// ReadsWhole reports whether the Reader now reads directories whole (the
// server refused it a channel): callers that read a directory in parts
// should read it at once.
func (r *Reader) ReadsWhole() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.readsWhole()
}

func (r *Reader) readsWhole() bool { return time.Now().Before(r.wholeUntil) }

// Capped opens the Reader's channel if it has none yet, and then reports
// whether it reads directories whole, and so within its Limits: a caller
// can check before it changes anything that every directory it will read
// fits.
func (r *Reader) Capped() (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.settle(); err != nil {
		return false, err
	}
	return r.readsWhole(), nil
}

// settle opens the Reader's channel, unless it has one or reads whole for
// now; a refusal makes it read whole.
func (r *Reader) settle() error {
	if r.ch != nil || r.readsWhole() {
		return nil
	}
	err := r.open()
	if errors.Is(err, errRefused) {
		r.wholeUntil = time.Now().Add(retryChannel)
		return nil
	}
	return err
}

// readWhole reads dir at once with pkg/sftp, within the Reader's Limits.
// The byte count covers everything the session receives meanwhile: on a

// oneChannel is why a directory is read whole, and how it need not be.
const oneChannel = "from a server that allows one SFTP channel per connection; allow the account more sessions (OpenSSH: MaxSessions)"

// session shared with other commands, their answers count too.
func (r *Reader) readWhole(dir string) ([]os.FileInfo, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	limit := int64(math.MaxInt64)
	if start := r.received.n.Load(); start <= math.MaxInt64-r.limits.MaxBytes {
		limit = start + r.limits.MaxBytes
	}
	// pkg/sftp gives up on ctx while it waits for each readdir answer:
	// the read stops at the answer that passes the limit, not at the
	// directory's end.
	r.received.watch.Store(&watch{limit: limit, cancel: cancel})
	entries, err := r.whole.ReadDirContext(ctx, dir)
	r.received.watch.Store(nil)
	switch {
	case errors.Is(err, context.Canceled):
		return nil, &files.TooLargeError{Dir: dir, Bytes: true, Max: r.limits.MaxBytes, Why: oneChannel}
	case err != nil:
		return nil, err
	case len(entries) > r.limits.MaxEntries:
		return nil, &files.TooLargeError{Dir: dir, Max: int64(r.limits.MaxEntries), Why: oneChannel}
	}
	// pkg/sftp ends a listing at io.EOF, which is also what it reports
	// for a request it could not send on a session that broke: a listing
	// is whole only if the session still answers.
	if _, err := r.whole.Getwd(); err != nil {
		return nil, err
	}
	return entries, nil
}

// eachEntry calls fn with entries as Each does.
func eachEntry(entries []os.FileInfo, fn func(os.FileInfo) error) error {
	for _, fi := range entries {
		if !files.EntryName(fi.Name()) {
			continue
		}
		if err := fn(fi); errors.Is(err, files.Stop) {
			return nil
		} else if err != nil {
			return err
		}
	}
	return nil
}

// callbackError carries the callback's error, which leaves the channel
// sound, out of each.
type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }

func (r *Reader) each(dir string, fn func(os.FileInfo) error) (err error) {
	opened, err := r.call(fxpOpendir, str(dir), fxpHandle)
	if err != nil {
		return err
	}
	name, _, err := text(opened)
	if err != nil {
		return err
	}
	handle := str(name)
	defer func() {
		// Close the handle, unless the channel itself failed.
		var (
			status   *statusError
			callback *callbackError
		)
		if err == nil || errors.As(err, &status) || errors.As(err, &callback) {
			if _, closeErr := r.call(fxpClose, handle, fxpStatus); err == nil {
				err = closeErr
			}
		}
	}()
	for {
		names, err := r.call(fxpReaddir, handle, fxpName)
		var status *statusError
		if errors.As(err, &status) && status.code == fxEOF {
			return nil
		}
		if err != nil {
			return err
		}
		count, rest, err := u32(names)
		if err != nil {
			return err
		}
		for range count {
			var (
				name  string
				attrs *sftp.FileStat
			)
			if name, rest, err = text(rest); err != nil {
				return err
			}
			if _, rest, err = text(rest); err != nil { // the long name
				return err
			}
			if attrs, rest, err = decodeAttrs(rest); err != nil {
				return err
			}
			if !files.EntryName(name) {
				continue
			}
			if err := fn(fileInfo{name, attrs}); errors.Is(err, files.Stop) {
				return nil
			} else if err != nil {
				return &callbackError{err}
			}
		}
	}
}

// open starts the SFTP subsystem on a new channel and agrees on version 3.
func (r *Reader) open() error {
	ch, reqs, err := r.conn.OpenChannel("session", nil)
	var refused *ssh.OpenChannelError
	if errors.As(err, &refused) {
		return fmt.Errorf("%w: %w", errRefused, err)
	}
	if err != nil {
		return err
	}
	go ssh.DiscardRequests(reqs)
	ok, err := ch.SendRequest("subsystem", true, str("sftp"))
	if err == nil && !ok {
		err = errRefused
	}
	if err == nil {
		r.ch, r.in = ch, bufio.NewReader(ch)
		err = r.send(fxpInit, nil, binary.BigEndian.AppendUint32(nil, 3))
	}
	if err == nil {
		var typ byte
		typ, _, err = r.receive()
		if err == nil && typ != fxpVersion {
			err = fmt.Errorf("the server answered init with packet type %d", typ)
		}
	}
	if err != nil {
		_ = ch.Close()
		r.ch = nil
	}
	return err
}

// call sends a request and returns the payload after the id of an answer
// of type want; a status answer (other than OK to a close) is an error.
func (r *Reader) call(typ byte, payload []byte, want byte) ([]byte, error) {
	r.id++
	id := r.id
	if err := r.send(typ, binary.BigEndian.AppendUint32(nil, id), payload); err != nil {
		return nil, err
	}
	got, body, err := r.receive()
	if err != nil {
		return nil, err
	}
	answer, body, err := u32(body)
	if err != nil {
		return nil, err
	}
	if answer != id {
		return nil, fmt.Errorf("the server answered request %d with %d", id, answer)
	}
	if got == fxpStatus {
		code, body, err := u32(body)
		if err != nil {
			return nil, err
		}
		if code == fxOK && want == fxpStatus {
			return nil, nil
		}
		message, _, _ := text(body)
		return nil, &statusError{code: code, message: message}
	}
	if got != want {
		return nil, fmt.Errorf("the server answered with packet type %d, not %d", got, want)
	}
	return body, nil
}

func (r *Reader) send(typ byte, head, payload []byte) error {
	size := uint32(1 + len(head) + len(payload)) //nolint:gosec // a path, bounded by the request body limit far below 4 GiB
	packet := binary.BigEndian.AppendUint32(nil, size)
	packet = append(append(append(packet, typ), head...), payload...)
	_, err := r.ch.Write(packet)
	return err
}

func (r *Reader) receive() (byte, []byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r.in, size[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n == 0 || n > maxPacket {
		return 0, nil, fmt.Errorf("the server sent a packet of %d bytes", n)
	}
	packet := make([]byte, n)
	if _, err := io.ReadFull(r.in, packet); err != nil {
		return 0, nil, err
	}
	return packet[0], packet[1:], nil
}

// fileInfo is an entry as Each reports it.
type fileInfo struct {
	name  string
	attrs *sftp.FileStat
}

func (fi fileInfo) Name() string       { return fi.name }
func (fi fileInfo) Size() int64        { return int64(fi.attrs.Size) } //nolint:gosec // sizes fit
func (fi fileInfo) Mode() os.FileMode  { return fi.attrs.FileMode() }
func (fi fileInfo) ModTime() time.Time { return fi.attrs.ModTime() }
func (fi fileInfo) IsDir() bool        { return fi.Mode().IsDir() }
func (fi fileInfo) Sys() any           { return fi.attrs }

// statusError is a status the server answered a request with.
type statusError struct {
	code    uint32
	message string
}

func (e *statusError) Error() string { return fmt.Sprintf("sftp status %d: %s", e.code, e.message) }

// Unwrap gives the error pkg/sftp would have returned for the status, so
// that callers handle both alike.
func (e *statusError) Unwrap() error {
	switch e.code {
	case fxNoSuch:
		return fs.ErrNotExist
	case fxDenied:
		return fs.ErrPermission
	}
	return &sftp.StatusError{Code: e.code}
}

func decodeAttrs(b []byte) (*sftp.FileStat, []byte, error) {
	flags, b, err := u32(b)
	if err != nil {
		return nil, nil, err
	}
	var st sftp.FileStat
	if flags&attrSize != 0 {
		if len(b) < 8 {
			return nil, nil, errShort
		}
		st.Size, b = binary.BigEndian.Uint64(b), b[8:]
	}
	fields := []struct {
		flag uint32
		dst  []*uint32
	}{
		{attrUIDGID, []*uint32{&st.UID, &st.GID}},
		{attrPerm, []*uint32{&st.Mode}},
		{attrTimes, []*uint32{&st.Atime, &st.Mtime}},
	}
	for _, f := range fields {
		if flags&f.flag == 0 {
			continue
		}
		for _, dst := range f.dst {
			if *dst, b, err = u32(b); err != nil {
				return nil, nil, err
			}
		}
	}
	if flags&attrExtends != 0 {
		var count uint32
		if count, b, err = u32(b); err != nil {
			return nil, nil, err
		}
		for range 2 * count {
			if _, b, err = text(b); err != nil {
				return nil, nil, err
			}
		}
	}
	return &st, b, nil
}

var errShort = errors.New("the server sent a truncated packet")

func u32(b []byte) (uint32, []byte, error) {
	if len(b) < 4 {
		return 0, nil, errShort
	}
	return binary.BigEndian.Uint32(b), b[4:], nil
}

func text(b []byte) (string, []byte, error) {
	n, b, err := u32(b)
	if err != nil || int(n) > len(b) {
		return "", nil, errShort
	}
	return string(b[:n]), b[n:], nil
}

func str(s string) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(s))), s...) //nolint:gosec // as in send
}
