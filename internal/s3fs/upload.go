package s3fs

import (
	"bytes"
	"crypto/md5" //nolint:gosec // S3's ETag of a part is its MD5: compared, not trusted for security
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/sftpgate/sftpgate/internal/files"
)

// ErrCorrupt is an upload whose store reported a SHA-256 other than that
// of what was sent.
var ErrCorrupt = errors.New("the object store's SHA-256 of the file differs from what was sent")

// upload writes one object whole: a file of one short part is put in one
// request at Complete; a larger one is a multipart upload, its parts sent
// with their SHA-256 (which the store checks), completed only at
// Complete.
type upload struct {
	f    *fsys
	name string
	key  string
	o    files.UploadOptions

	mu    sync.Mutex
	id    string
	parts []part
	// next is the number of the next part; held what the parts before it
	// hold.
	next   int
	held   int64
	single []byte
	err    error
	// ifMatch, when set, is the ETag the object must still have when the
	// upload completes (an append's, which read it first).
	ifMatch string

	verified bool
}

// part is a part the store holds.
type part struct {
	number int
	etag   string
	sum    []byte
}

// ErrTooLargeParts is an upload whose parts could never fit the memory
// its uploads may hold.
var ErrTooLargeParts = errors.New("the object store's parts do not fit the memory this worker gives a namespace's uploads")

// Upload starts writing name whole, or continues o.Resume.
func (f *fsys) Upload(name string, o files.UploadOptions) (files.Upload, error) {
	u := &upload{f: f, name: name, key: f.key(name), o: o, next: 1}
	if o.Resume != "" {
		if err := u.resume(); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// resume takes over the parts of o.Resume that are whole and in order,
// all but the last as they are; the last is kept only if it matches the
// source, else sent again. An upload the store no longer has starts anew.
func (u *upload) resume() error {
	ctx, cancel := u.f.op()
	defer cancel()
	var held []minio.ObjectPart
	marker := 0
	for {
		res, err := u.f.c.Core.ListObjectParts(ctx, u.f.c.Bucket, u.key, u.o.Resume, marker, 1000)
		if errors.Is(wrap(err), fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return wrap(err)
		}
		held = append(held, res.ObjectParts...)
		if !res.IsTruncated {
			break
		}
		marker = res.NextPartNumberMarker
	}
	slices.SortFunc(held, func(a, b minio.ObjectPart) int { return a.PartNumber - b.PartNumber })
	var kept []part
	for i, p := range held {
		if p.PartNumber != i+1 || p.Size != u.f.c.PartSize {
			break
		}
		sum, _ := base64.StdEncoding.DecodeString(p.ChecksumSHA256)
		kept = append(kept, part{number: p.PartNumber, etag: p.ETag, sum: sum})
	}
	if len(kept) > 0 {
		last := held[len(kept)-1]
		ok, err := u.matches(last, int64(len(kept)-1)*u.f.c.PartSize)
		if err != nil {
			return err
		}
		if !ok {
			kept = kept[:len(kept)-1] // sent again under its number
		}
	}
	u.id, u.parts, u.next, u.held = u.o.Resume, kept, len(kept)+1, int64(len(kept))*u.f.c.PartSize
	return nil
}

// matches reports whether part p holds the source's bytes from off: by
// its SHA-256 where the store kept one, else its ETag (the MD5 of an
// unencrypted part).
func (u *upload) matches(p minio.ObjectPart, off int64) (bool, error) {
	if u.o.Source == nil {
		return false, nil
	}
	buf := make([]byte, p.Size)
	if _, err := u.o.Source.ReadAt(buf, off); err != nil {
		return false, err
	}
	if p.ChecksumSHA256 != "" {
		sum := sha256.Sum256(buf)
		return base64.StdEncoding.EncodeToString(sum[:]) == p.ChecksumSHA256, nil
	}
	sum := md5.Sum(buf) //nolint:gosec // see the import
	return strings.Trim(p.ETag, `"`) == hex.EncodeToString(sum[:]), nil
}

func (u *upload) ID() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.id
}

func (u *upload) Size() int64 { return u.held }

func (u *upload) Verified() bool { return u.verified }

// ReadFromWithConcurrency sends r's content as parts, up to concurrency
// (at most the store's PartsInFlight) at once; the parts sent stay for a
// later try should r or a part fail. With Memory, the parts' buffers are
// reserved at once (as many as fit) before the first is read, so that
// uploads waiting for room never hold part of it.
func (u *upload) ReadFromWithConcurrency(r io.Reader, concurrency int) (int64, error) {
	inFlight := u.f.c.PartsInFlight
	if concurrency > 0 {
		inFlight = min(inFlight, concurrency)
	}
	if m := u.f.c.Memory; m != nil {
		inFlight = int(max(min(int64(inFlight), m.Size()/u.f.c.PartSize), 1))
	}
	res := &reservation{u: u, parts: int64(inFlight)}
	defer res.release()
	if !u.small() && !u.unsized() {
		if err := res.take(); err != nil {
			return 0, err
		}
	}
	free := make(chan []byte, inFlight)
	for range inFlight {
		free <- nil
	}
	var (
		sent  sync.WaitGroup
		total int64
	)
	defer func() {
		// Every part sent by now: their buffers go back for the next.
		for range inFlight {
			if buf := <-free; int64(len(buf)) == u.f.c.PartSize {
				parts.put(buf)
			}
		}
	}()
	for {
		buf, n, err := u.readPart(r, <-free, res)
		total += int64(n)
		// The source's own end, as io.ReadFull says it: a source's error
		// that wraps io.ErrUnexpectedEOF (a client's body cut off) is a
		// failure, never the file's end.
		short := err == io.EOF || err == io.ErrUnexpectedEOF //nolint:errorlint // ReadFull's own values, not a source's
		if err != nil && !short {
			free <- buf
			sent.Wait()
			return total, err
		}
		if n == 0 || u.failed() != nil {
			free <- buf
			break
		}
		if short && u.id == "" && u.next == 1 && n <= maxSingle {
			u.single = bytes.Clone(buf[:n])
			free <- buf
			break
		}
		number, err := u.begin()
		if err != nil {
			free <- buf
			sent.Wait()
			return total, err
		}
		sent.Go(func() {
			u.send(number, buf[:n])
			free <- buf
		})
		if short {
			break
		}
	}
	sent.Wait()
	return total, u.failed()
}

// small reports whether the file is told to be small enough to be put in
// one request, from a buffer of its own size.
func (u *upload) small() bool {
	return u.id == "" && u.next == 1 && u.o.Size > 0 && u.o.Size < min(u.f.c.PartSize, maxSingle)
}

// unsized reports whether the file's size was not told (a write through
// OpenFile): its start is read as a small file's, lest a file of a few
// bytes wait for a part's room.
func (u *upload) unsized() bool {
	return u.id == "" && u.next == 1 && u.o.Size == 0
}

// readPart reads the next part from r into buf, or into a buffer of the
// pool's (res taken first). A file told to be small, or not told its
// size, is read first into a buffer of its size or of maxSingle (and one
// byte more, to see that it ends), not a part's.
func (u *upload) readPart(r io.Reader, buf []byte, res *reservation) ([]byte, int, error) {
	size := u.f.c.PartSize
	if buf == nil && (u.small() || u.unsized()) {
		var small []byte
		if u.small() {
			small = make([]byte, u.o.Size+1)
		}
		n, err := readSmall(r, &small)
		if err != nil {
			return small, n, err
		}
		// Larger than told: parts after all.
		if err := res.take(); err != nil {
			return small, n, err
		}
		buf = parts.get(size)
		copy(buf, small)
		m, err := io.ReadFull(r, buf[n:])
		return buf, n + m, err
	}
	if int64(len(buf)) != size {
		if err := res.take(); err != nil {
			return buf, 0, err
		}
		buf = parts.get(size)
	}
	n, err := io.ReadFull(r, buf)
	return buf, n, err
}

// readSmall reads r into *buf, to its length, or when it has none up to
// maxSingle+1 bytes, growing it as they come.
func readSmall(r io.Reader, buf *[]byte) (int, error) {
	if len(*buf) > 0 {
		return io.ReadFull(r, *buf)
	}
	var b bytes.Buffer
	n, err := b.ReadFrom(io.LimitReader(r, maxSingle+1))
	*buf = b.Bytes()
	switch {
	case err != nil:
		return int(n), err
	case n <= maxSingle:
		return int(n), io.ErrUnexpectedEOF // it ended: short, as ReadFull says
	}
	return int(n), nil
}

// reservation is the Memory one ReadFromWithConcurrency holds for its
// parts' buffers, taken once.
type reservation struct {
	u     *upload
	parts int64
	taken bool
}

func (r *reservation) take() error {
	m := r.u.f.c.Memory
	if m == nil || r.taken {
		return nil
	}
	if size := r.u.f.c.PartSize; size > m.Size() {
		// A file of one short part never asks: only a larger one fails.
		return &files.StatusError{Code: files.FxFailure, Err: fmt.Errorf(
			"%w: a part of %d MiB, %d MiB given; lower the ObjectStore's limits.partSizeMiB", ErrTooLargeParts, size>>20, m.Size()>>20)}
	}
	if err := m.Acquire(r.u.f.ctx, r.parts*r.u.f.c.PartSize); err != nil {
		return err
	}
	r.taken = true
	return nil
}

func (r *reservation) release() {
	if r.taken {
		r.u.f.c.Memory.Release(r.parts * r.u.f.c.PartSize)
	}
}

// maxSingle is the largest file put in one request, held in a buffer of
// its own (outside the parts' memory); a larger one is a multipart upload,
// of one part if need be.
const maxSingle = 1 << 20

// parts keeps parts' buffers between uploads: a large file takes many,
// one at a time, and so do many files.
var parts partPool

type partPool struct{ pool sync.Pool }

func (p *partPool) get(size int64) []byte {
	if b, ok := p.pool.Get().(*[]byte); ok && int64(len(*b)) == size {
		return *b
	}
	return make([]byte, size)
}

func (p *partPool) put(b []byte) {
	if int64(len(b)) >= MinPartSize {
		p.pool.Put(&b)
	}
}

func (u *upload) failed() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.err
}

// begin starts the multipart upload if need be, and numbers the next part.
func (u *upload) begin() (int, error) {
	if u.next > maxParts {
		return 0, &files.StatusError{Code: files.FxNoSpace, Err: fmt.Errorf(
			"%s: more than %d parts of %d bytes, an object's most", u.name, maxParts, u.f.c.PartSize)}
	}
	if u.id == "" {
		ctx, cancel := u.f.op()
		defer cancel()
		opts := u.options()
		opts.UserMetadata["x-amz-checksum-algorithm"] = "SHA256"
		id, err := u.f.c.Core.NewMultipartUpload(ctx, u.f.c.Bucket, u.key, opts)
		if err != nil {
			return 0, wrap(err)
		}
		u.mu.Lock()
		u.id = id
		u.mu.Unlock()
	}
	u.next++
	return u.next - 1, nil
}

// options are a write's: the SHA-256 it is signed with is the one
// computed of the part, not minio-go's chunked signing, which would hash
// and sign it again on both sides.
func (u *upload) options() minio.PutObjectOptions {
	opts := minio.PutObjectOptions{UserMetadata: map[string]string{}, DisableContentSha256: true}
	if !u.o.ModTime.IsZero() {
		opts.UserMetadata[MetaModTime] = formatModTime(u.o.ModTime)
	}
	return opts
}

// send uploads one part with its SHA-256, which the store checks.
func (u *upload) send(number int, data []byte) {
	sum := sha256.Sum256(data)
	p, err := u.f.c.Core.PutObjectPart(u.f.ctx, u.f.c.Bucket, u.key, u.id, number, bytes.NewReader(data), int64(len(data)),
		minio.PutObjectPartOptions{Sha256Hex: hex.EncodeToString(sum[:]), DisableContentSha256: true,
			CustomHeader: map[string][]string{"X-Amz-Checksum-Sha256": {base64.StdEncoding.EncodeToString(sum[:])}}})
	u.mu.Lock()
	defer u.mu.Unlock()
	if err != nil {
		u.err = cmpErr(u.err, wrap(err))
		return
	}
	u.parts = append(u.parts, part{number: number, etag: p.ETag, sum: sum[:]})
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// Complete puts the object in place: the one short part in one request,
// or the multipart upload completed; then compares the SHA-256 the store
// reports, where it reports one, with what was sent.
func (u *upload) Complete() error {
	if err := u.failed(); err != nil {
		return err
	}
	ctx, cancel := u.f.op()
	defer cancel()
	opts := u.options()
	switch {
	case u.o.Exclusive:
		opts.SetMatchETagExcept("*")
	case u.ifMatch != "":
		opts.SetMatchETag(u.ifMatch)
	}
	var (
		want string
		info minio.UploadInfo
		err  error
	)
	if u.id == "" {
		sum := sha256.Sum256(u.single)
		want = base64.StdEncoding.EncodeToString(sum[:])
		opts.UserMetadata["x-amz-checksum-sha256"] = want
		info, err = u.f.c.Core.PutObject(ctx, u.f.c.Bucket, u.key, bytes.NewReader(u.single), int64(len(u.single)),
			"", hex.EncodeToString(sum[:]), opts)
	} else {
		slices.SortFunc(u.parts, func(a, b part) int { return a.number - b.number })
		complete := make([]minio.CompletePart, len(u.parts))
		all := sha256.New()
		for i, p := range u.parts {
			complete[i] = minio.CompletePart{PartNumber: p.number, ETag: p.etag, ChecksumSHA256: base64.StdEncoding.EncodeToString(p.sum)}
			all.Write(p.sum)
		}
		want = fmt.Sprintf("%s-%d", base64.StdEncoding.EncodeToString(all.Sum(nil)), len(u.parts))
		info, err = u.f.c.Core.CompleteMultipartUpload(ctx, u.f.c.Bucket, u.key, u.id, complete, opts)
	}
	if err != nil {
		return wrap(err)
	}
	switch got := info.ChecksumSHA256; {
	case got == "":
	case got == want || got == strings.TrimSuffix(want, fmt.Sprintf("-%d", len(u.parts))):
		u.verified = true
	default:
		return fmt.Errorf("%s: %w", u.name, ErrCorrupt)
	}
	return nil
}

// Abort removes the parts sent; a file of one part sent none.
func (u *upload) Abort() error {
	if u.id == "" {
		return nil
	}
	ctx, cancel := u.f.op()
	defer cancel()
	return files.IgnoreMissing(wrap(u.f.c.Core.AbortMultipartUpload(ctx, u.f.c.Bucket, u.key, u.id)))
}

// writer is an object open for writing whole (OpenFile): what is written
// goes to the upload as it comes, and Close completes it, only if every
// write went through.
type writer struct {
	upload *upload
	name   string
	// base is the object appended to: its bytes go first.
	base *info
	// off is where the next byte goes; written says that bytes went.
	off     int64
	written bool
	pipe    *io.PipeWriter
	done    chan error
	// failed is the first write that failed: nothing is kept then.
	failed error
}

var _ files.File = (*writer)(nil)

// appender appends to the object name, described by fi, from off (its
// end, or 0 until a Seek moves it there): an object cannot change in
// place, so it is written again, its bytes read from the store (the
// version fi describes) ahead of what is added.
func (f *fsys) appender(name string, fi *info, off int64) (files.File, error) {
	u, err := f.Upload(name, files.UploadOptions{ModTime: time.Now()})
	if err != nil {
		return nil, err
	}
	up := u.(*upload) //nolint:forcetypeassert // Upload's
	up.ifMatch = fi.etag
	return &writer{upload: up, name: name, base: fi, off: off}, nil
}

// errChanged is an object that changed while it was appended to: the
// append keeps nothing, and the other write stays.
var errChanged = &files.StatusError{Code: files.FxFailure, Err: errors.New("the object changed while it was appended to; nothing was appended")}

// start checks, before the first byte, that it goes at the end.
func (w *writer) start() error {
	if w.written {
		return nil
	}
	if w.off != w.end() {
		return unsupported("an object is written from its start to its end, and appended to at its end")
	}
	w.written = true
	return nil
}

// send sends r, after base's bytes the first time.
func (w *writer) send(r io.Reader, concurrency int, first bool) (int64, error) {
	var prefix int64
	if first && w.base != nil && w.base.size > 0 {
		body, err := (&object{f: w.upload.f, name: w.name, info: w.base}).get(0, 0)
		if errors.Is(err, fs.ErrExist) { // 412: no longer the ETag read
			return 0, errChanged
		}
		if err != nil {
			return 0, err
		}
		defer func() { _ = body.Close() }()
		prefix = w.base.size
		r = io.MultiReader(exactly(body, prefix), r)
	}
	n, err := w.upload.ReadFromWithConcurrency(r, concurrency)
	return max(n-prefix, 0), err
}

// exactly is r, which must give n bytes: fewer is errBaseShort, never an
// end an upload would take for the file's.
func exactly(r io.Reader, n int64) io.Reader { return &exact{r: io.LimitReader(r, n), left: n} }

// errBaseShort is an object appended to whose bytes ended early.
var errBaseShort = errors.New("the object appended to ended before its size")

type exact struct {
	r    io.Reader
	left int64
}

func (e *exact) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if errors.Is(err, io.EOF) && e.left > 0 {
		err = errBaseShort
	}
	return n, err
}

func (w *writer) Write(p []byte) (int, error) {
	if w.failed != nil {
		return 0, w.failed
	}
	if w.pipe == nil {
		first := !w.written
		if err := w.start(); err != nil {
			return 0, err
		}
		r, pw := io.Pipe()
		w.pipe, w.done = pw, make(chan error, 1)
		go func() {
			_, err := w.send(r, 0, first)
			_ = r.CloseWithError(err)
			w.done <- err
		}()
	}
	n, err := w.pipe.Write(p)
	w.off += int64(n)
	if err != nil {
		w.failed = err
	}
	return n, err
}

func (w *writer) ReadFromWithConcurrency(r io.Reader, concurrency int) (int64, error) {
	if w.failed != nil {
		return 0, w.failed
	}
	if w.pipe != nil {
		n, err := io.Copy(w.pipe, r)
		w.off += n
		if err != nil {
			w.failed = err
		}
		return n, err
	}
	first := !w.written
	if err := w.start(); err != nil {
		return 0, err
	}
	n, err := w.send(r, concurrency, first)
	w.off += n
	if err != nil {
		w.failed = err
	}
	return n, err
}

// Close completes the object; one whose writes failed is aborted, and
// stays as it was, as does one appended nothing to.
func (w *writer) Close() error {
	if w.base != nil && !w.written {
		return w.upload.Abort()
	}
	err := w.failed
	if w.pipe != nil {
		_ = w.pipe.Close()
		err = cmpErr(err, <-w.done)
		w.pipe = nil
	}
	if err == nil {
		err = w.upload.Complete()
		if w.base != nil && errors.Is(err, fs.ErrExist) { // 412 at If-Match
			err = errChanged
		}
	}
	if err != nil {
		_ = w.upload.Abort()
	}
	return err
}

// Abort ends the object's writing without completing it: it stays as it
// was.
func (w *writer) Abort() error {
	if w.pipe != nil {
		_ = w.pipe.CloseWithError(errAborted)
		w.failed = cmpErr(w.failed, <-w.done)
		w.pipe = nil
	}
	return w.upload.Abort()
}

var errAborted = errors.New("the write was aborted")

// Seek moves where the next byte goes, before the first: to the
// object's end (appending), or its start. Once bytes went, it only says
// where the next goes; a write that failed keeps nothing, so it is then
// where the object ended before.
func (w *writer) Seek(offset int64, whence int) (int64, error) {
	end := w.end()
	at := w.off
	if w.failed != nil {
		at = end
	}
	switch whence {
	case io.SeekCurrent:
		offset += at
	case io.SeekEnd:
		offset += end
	}
	switch {
	case offset == at:
	case w.written || offset < 0:
		return at, unsupported("an object is written from its start to its end")
	default:
		w.off = offset
	}
	return w.off, nil
}

func (w *writer) Name() string { return w.name }

// Stat is the object as it will be: its size before a byte is written
// (the object appended to's), then what is written added.
func (w *writer) Stat() (fs.FileInfo, error) {
	size := w.off
	if !w.written {
		size = w.end()
	}
	return &info{name: w.name, size: size, modTime: w.upload.o.ModTime}, nil
}

// end is where the object ends before this writer's bytes.
func (w *writer) end() int64 {
	if w.base != nil {
		return w.base.size
	}
	return 0
}

func (w *writer) Read([]byte) (int, error) { return 0, unsupported("the object is open for writing") }

func (w *writer) ReadAt([]byte, int64) (int, error) {
	return 0, unsupported("the object is open for writing")
}

func (w *writer) WriteTo(io.Writer) (int64, error) {
	return 0, unsupported("the object is open for writing")
}

func (w *writer) Chmod(fs.FileMode) error { return unsupported("an object store keeps no permissions") }
