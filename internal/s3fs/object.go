package s3fs

import (
	"errors"
	"io"
	"io/fs"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/sftpgate/sftpgate/internal/files"
)

// info is an object's or a folder's fs.FileInfo.
type info struct {
	name    string
	size    int64
	modTime time.Time
	dir     bool
	etag    string
}

func objectInfo(name string, o minio.ObjectInfo, modTime time.Time) *info {
	return &info{name: name, size: o.Size, modTime: modTime, etag: o.ETag}
}

func dirInfo(name string) *info { return &info{name: name, dir: true} }

func (i *info) Name() string       { return i.name }
func (i *info) Size() int64        { return i.size }
func (i *info) ModTime() time.Time { return i.modTime }
func (i *info) IsDir() bool        { return i.dir }

// Sys is the object's ETag, which changes with its content.
func (i *info) Sys() any { return ETag(i.etag) }

func (i *info) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}

// ETag is an object's entity tag, its FileInfo's Sys.
type ETag string

// Tag makes ETag a files.Tagged.
func (e ETag) Tag() string { return string(e) }

// object is an object open for reading: each read is a ranged GET of the
// version opened (a changed object fails the read rather than mixing two
// versions), and a sequential read streams one GET.
type object struct {
	f    *fsys
	name string
	info *info
	off  int64
	body io.ReadCloser
}

var _ files.File = (*object)(nil)

// get streams the object from off on (to off+n-1 when n > 0), never
// more than that, whatever the store sends.
func (o *object) get(off, n int64) (io.ReadCloser, error) {
	opts := minio.GetObjectOptions{}
	// A store that named no ETag cannot have its version held: refused.
	if err := opts.SetMatchETag(o.info.etag); err != nil {
		return nil, wrap(err)
	}
	end := int64(0)
	if n > 0 {
		end = off + n - 1
	}
	if off > 0 || n > 0 {
		if err := opts.SetRange(off, end); err != nil {
			return nil, wrap(err)
		}
	}
	body, _, _, err := o.f.c.Core.GetObject(o.f.ctx, o.f.c.Bucket, o.f.key(o.name), opts)
	if err != nil {
		return nil, wrap(err)
	}
	if n <= 0 {
		n = o.info.size - off
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(body, n), body}, nil
}

func (o *object) Read(p []byte) (int, error) {
	if o.off >= o.info.size {
		return 0, io.EOF
	}
	if o.body == nil {
		body, err := o.get(o.off, 0)
		if err != nil {
			return 0, err
		}
		o.body = body
	}
	n, err := o.body.Read(p)
	o.off += int64(n)
	if err != nil && !errors.Is(err, io.EOF) {
		err = wrap(err)
	}
	return n, err
}

func (o *object) ReadAt(p []byte, off int64) (int, error) {
	if off >= o.info.size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), o.info.size-off)
	body, err := o.get(off, n)
	if err != nil {
		return 0, err
	}
	defer func() { _ = body.Close() }()
	got, err := io.ReadFull(body, p[:n])
	if err != nil {
		return got, wrap(err)
	}
	if got < len(p) {
		return got, io.EOF
	}
	return got, nil
}

// WriteTo streams the rest of the object in one GET.
func (o *object) WriteTo(w io.Writer) (int64, error) {
	if o.off >= o.info.size {
		return 0, nil
	}
	body, err := o.get(o.off, 0)
	if err != nil {
		return 0, err
	}
	defer func() { _ = body.Close() }()
	n, err := io.Copy(w, body)
	o.off += n
	if err == nil && o.off < o.info.size {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (o *object) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += o.off
	case io.SeekEnd:
		offset += o.info.size
	}
	if offset < 0 {
		return o.off, errors.New("seek before the start")
	}
	if offset != o.off && o.body != nil {
		_ = o.body.Close()
		o.body = nil
	}
	o.off = offset
	return o.off, nil
}

func (o *object) Close() error {
	if o.body != nil {
		return o.body.Close()
	}
	return nil
}

func (o *object) Name() string { return o.name }

// Stat is the object as it is now, not as it was opened: a copy checks
// with it that its source did not change.
func (o *object) Stat() (fs.FileInfo, error) { return o.f.Stat(o.name) }

// OpenedInfo is the object as it was opened: the version its reads are
// held to (files.Versioned).
func (o *object) OpenedInfo() fs.FileInfo { return o.info }

func (o *object) Write([]byte) (int, error) {
	return 0, unsupported("the object is open for reading")
}

func (o *object) Chmod(fs.FileMode) error {
	return unsupported("an object store keeps no permissions")
}

func (o *object) ReadFromWithConcurrency(io.Reader, int) (int64, error) {
	return 0, unsupported("the object is open for reading")
}
