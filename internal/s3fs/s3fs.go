// Package s3fs is the object store backend of the file layer
// (internal/files): a bucket's prefix, over S3's API, as a files.FS.
//
// Keys are paths: "/a/b.csv" is the object prefix+"a/b.csv", and a folder
// is a key prefix ending in "/" that holds objects (S3 has no folders: one
// exists while something is in it). Mkdir puts the folder's marker, the
// empty object "a/", which keeps an empty folder. A file's
// modification time is the object's "mtime" metadata where a writer set
// it (sftpgate and rclone do), else its Last-Modified; listings give
// Last-Modified, which is all S3 lists. What an object cannot do (change
// in place, permissions, links) is files.ErrUnsupported.
package s3fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/sftpgate/sftpgate/internal/files"
)

// Config is one bucket prefix's files.
type Config struct {
	Core   *minio.Core
	Bucket string
	// Prefix is the keys' common start: "" or ending in "/".
	Prefix string
	// PartSize is the size of an upload's parts, and PartsInFlight how
	// many are sent at once: an upload holds at most PartsInFlight parts
	// in memory.
	PartSize      int64
	PartsInFlight int
	// Timeout bounds each request but a download's stream.
	Timeout time.Duration
	// Memory, when set, is what the parts held in memory may take: an
	// upload waits for room for its parts in flight (fewer, if that many
	// could never fit), and one whose single part could never fit is
	// refused.
	Memory Memory
}

// Memory is a bound on bytes held, shared by uploads.
type Memory interface {
	// Acquire waits for n bytes of room, or until ctx ends.
	Acquire(ctx context.Context, n int64) error
	Release(n int64)
	// Size is the most that can ever be held.
	Size() int64
}

// Defaults of Config's bounds.
const (
	DefaultPartSize      = 8 << 20
	DefaultPartsInFlight = 4
	// MinPartSize is S3's least part but the last.
	MinPartSize = 5 << 20
	// maxParts is S3's most parts of one upload.
	maxParts = 10_000
)

// FS is a bucket prefix's files, for one user of them: Close ends every
// request it has running, as closing an SFTP session does.
type FS interface {
	files.FS
	files.Uploader
	Close() error
}

type fsys struct {
	c      Config
	ctx    context.Context
	cancel context.CancelFunc
}

// New is c's files until Close.
func New(c Config) FS {
	if c.PartSize < MinPartSize {
		c.PartSize = DefaultPartSize
	}
	if c.PartsInFlight <= 0 {
		c.PartsInFlight = DefaultPartsInFlight
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &fsys{c: c, ctx: ctx, cancel: cancel}
}

func (f *fsys) Close() error {
	f.cancel()
	return nil
}

// op is the context of one request.
func (f *fsys) op() (context.Context, context.CancelFunc) {
	return context.WithTimeout(f.ctx, f.c.Timeout)
}

// key is the object key of the path name; the root is the prefix itself.
func (f *fsys) key(name string) string {
	return f.c.Prefix + strings.TrimPrefix(path.Clean("/"+name), "/")
}

// dirKey is the key prefix of the folder name's entries.
func (f *fsys) dirKey(name string) string {
	k := f.key(name)
	if k == "" || strings.HasSuffix(k, "/") {
		return k
	}
	return k + "/"
}

func isRoot(name string) bool { return path.Clean("/"+name) == "/" }

// MetaModTime is the user metadata key of a file's modification time:
// Unix seconds with a fraction, as rclone writes it.
const MetaModTime = "Mtime"

func formatModTime(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixNano())/1e9, 'f', 9, 64)
}

func modTimeOf(o minio.ObjectInfo) time.Time {
	if s, ok := o.UserMetadata[MetaModTime]; ok {
		if secs, err := strconv.ParseFloat(s, 64); err == nil {
			whole := int64(secs)
			return time.Unix(whole, int64((secs-float64(whole))*1e9))
		}
	}
	return o.LastModified
}

func (f *fsys) Stat(name string) (fs.FileInfo, error) {
	if isRoot(name) {
		return dirInfo("/"), nil
	}
	ctx, cancel := f.op()
	defer cancel()
	o, err := f.c.Core.StatObject(ctx, f.c.Bucket, f.key(name), minio.StatObjectOptions{})
	if err == nil {
		return objectInfo(path.Base(name), o, modTimeOf(o)), nil
	}
	if !errors.Is(wrap(err), fs.ErrNotExist) {
		return nil, wrap(err)
	}
	// A folder is a prefix that holds something.
	switch held, err := f.holds(name); {
	case err != nil:
		return nil, err
	case !held:
		return nil, &files.StatusError{Code: files.FxNoSuchFile, Err: &storeError{is: fs.ErrNotExist, err: fmt.Errorf("%s: no such object or folder", name)}}
	}
	return dirInfo(path.Base(name)), nil
}

// holds reports whether the folder name holds any object.
func (f *fsys) holds(name string) (bool, error) {
	ctx, cancel := f.op()
	defer cancel()
	// The listing's goroutine ends with ctx.
	o, ok := <-f.c.Core.Client.ListObjects(ctx, f.c.Bucket, minio.ListObjectsOptions{Prefix: f.dirKey(name), MaxKeys: 1})
	if ok && o.Err != nil {
		return false, wrap(o.Err)
	}
	return ok, nil
}

func (f *fsys) Lstat(name string) (fs.FileInfo, error) { return f.Stat(name) }

func (f *fsys) ReadLink(string) (string, error) {
	return "", unsupported("an object store has no links")
}

// RealPath is name cleaned: an object store has no links to follow.
func (f *fsys) RealPath(name string) (string, error) { return path.Clean("/" + name), nil }

// Each lists dir a page of 1000 keys at a time, folders as S3 groups them
// by "/". A prefix that holds nothing is an empty folder.
func (f *fsys) Each(dir string, fn func(fs.FileInfo) error) error {
	prefix := f.dirKey(dir)
	ctx, cancel := context.WithCancelCause(f.ctx)
	defer cancel(nil) // ends the listing fn stopped
	// A store that answers page after page with nothing in them (and a
	// token to go on) would list for ever: between entries, the listing
	// may take no longer than one request may.
	idle := time.AfterFunc(f.c.Timeout, func() { cancel(errListingStalled) })
	defer idle.Stop()
	for o := range f.c.Core.Client.ListObjects(ctx, f.c.Bucket, minio.ListObjectsOptions{Prefix: prefix}) {
		if o.Err != nil {
			if cause := context.Cause(ctx); errors.Is(cause, errListingStalled) {
				return &files.StatusError{Code: files.FxFailure, Err: fmt.Errorf("%s: %w", dir, cause)}
			}
			return wrap(o.Err)
		}
		name, isDir := strings.CutSuffix(strings.TrimPrefix(o.Key, prefix), "/")
		if !files.EntryName(name) {
			continue // the folder's own marker object (""), or a key such as "a/../b"
		}
		fi := fs.FileInfo(dirInfo(name))
		if !isDir {
			fi = objectInfo(name, o, o.LastModified)
		}
		idle.Stop() // fn's time is not the store's
		if err := fn(fi); err != nil {
			return stopped(err)
		}
		idle.Reset(f.c.Timeout)
	}
	return nil
}

// errListingStalled is a listing whose store sent no entry for a
// request's timeout.
var errListingStalled = errors.New("the object store's listing went on without entries for longer than a request may take")

func stopped(err error) error {
	if errors.Is(err, files.Stop) {
		return nil
	}
	return err
}

// ListsWriteTimes: a listing gives when an object was written; the file's
// own time is in its metadata, which a stat reads (files.ListsWriteTimes).
func (f *fsys) ListsWriteTimes() {}

// ListsWhole is false: listings are read a page at a time.
func (f *fsys) ListsWhole() bool { return false }

func (f *fsys) ListsCapped() (bool, error) { return false, nil }

func (f *fsys) Open(name string) (files.File, error) {
	fi, err := f.Stat(name)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return nil, &files.StatusError{Code: files.FxFileIsADirectory, Err: fmt.Errorf("%s is a folder", name)}
	}
	return &object{f: f, name: name, info: fi.(*info)}, nil
}

// OpenFile opens name for reading, or for writing it whole: an object is
// never changed in place, so a write makes it anew (O_TRUNC, or a new
// name), or appends to it (O_APPEND; or without O_TRUNC, once a Seek
// moved to its end), and ends in a complete object only when the file
// is closed.
func (f *fsys) OpenFile(name string, flag int) (files.File, error) {
	const writing = 0x1 | 0x2 // os.O_WRONLY | os.O_RDWR
	if flag&writing == 0 {
		return f.Open(name)
	}
	const create, trunc, excl, appendTo = 0x40, 0x200, 0x80, 0x400 // os.O_CREATE, O_TRUNC, O_EXCL, O_APPEND
	if flag&appendTo != 0 || flag&trunc == 0 || flag&excl != 0 {
		fi, err := f.Stat(name)
		switch {
		case err == nil && flag&excl != 0:
			return nil, &files.StatusError{Code: files.FxFileAlreadyExists, Err: &storeError{is: fs.ErrExist, err: fmt.Errorf("%s exists", name)}}
		case err == nil && fi.IsDir():
			return nil, &files.StatusError{Code: files.FxFileIsADirectory, Err: fmt.Errorf("%s is a folder", name)}
		case err == nil && flag&trunc == 0:
			off := int64(0)
			if flag&appendTo != 0 {
				off = fi.Size()
			}
			return f.appender(name, fi.(*info), off) //nolint:forcetypeassert // Stat's
		case err != nil && (flag&create == 0 || !errors.Is(err, fs.ErrNotExist)):
			return nil, err
		}
	}
	u, err := f.Upload(name, files.UploadOptions{ModTime: time.Now(), Exclusive: flag&excl != 0})
	if err != nil {
		return nil, err
	}
	return &writer{upload: u.(*upload), name: name}, nil //nolint:forcetypeassert // Upload's
}

func (f *fsys) Truncate(string, int64) error {
	return unsupported("an object cannot be changed in place")
}

func (f *fsys) Chmod(string, fs.FileMode) error {
	return unsupported("an object store keeps no permissions")
}

// Chtimes sets the object's mtime metadata, copying it onto itself (as
// S3 changes metadata); atime is not kept.
func (f *fsys) Chtimes(name string, _, mtime time.Time) error {
	fi, err := f.Stat(name)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return nil // a folder has no time of its own
	}
	ctx, cancel := f.op()
	defer cancel()
	k := f.key(name)
	_, err = f.c.Core.Client.CopyObject(ctx,
		minio.CopyDestOptions{Bucket: f.c.Bucket, Object: k, ReplaceMetadata: true,
			UserMetadata: map[string]string{MetaModTime: formatModTime(mtime)}},
		minio.CopySrcOptions{Bucket: f.c.Bucket, Object: k, MatchETag: fi.(*info).etag})
	return wrap(err)
}

func (f *fsys) Symlink(string, string) error { return unsupported("an object store has no links") }

func (f *fsys) Remove(name string) error {
	fi, err := f.Stat(name)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return &files.StatusError{Code: files.FxFileIsADirectory, Err: fmt.Errorf("%s is a folder", name)}
	}
	ctx, cancel := f.op()
	defer cancel()
	return wrap(f.c.Core.RemoveObject(ctx, f.c.Bucket, f.key(name), minio.RemoveObjectOptions{}))
}

// Rename copies the object on the store, then removes the original: it
// refuses a to that exists, and folders (a prefix's every object).
func (f *fsys) Rename(from, to string) error {
	return f.rename(from, to, false)
}

func (f *fsys) rename(from, to string, replace bool) error {
	fi, err := f.Stat(from)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return unsupported("an object store renames objects, not folders")
	}
	if !replace {
		if _, err := f.Stat(to); err == nil {
			return &files.StatusError{Code: files.FxFileAlreadyExists, Err: &storeError{is: fs.ErrExist, err: fmt.Errorf("%s exists", to)}}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	// Large objects are copied a part at a time on the store, which a
	// single request's timeout does not bound.
	ctx := f.ctx
	if fi.Size() <= 1<<30 {
		var cancel context.CancelFunc
		ctx, cancel = f.op()
		defer cancel()
	}
	src := minio.CopySrcOptions{Bucket: f.c.Bucket, Object: f.key(from), MatchETag: fi.(*info).etag}
	dst := minio.CopyDestOptions{Bucket: f.c.Bucket, Object: f.key(to)}
	if _, err := f.c.Core.ComposeObject(ctx, dst, src); err != nil {
		return wrap(err)
	}
	rctx, cancel := f.op()
	defer cancel()
	return wrap(f.c.Core.RemoveObject(rctx, f.c.Bucket, f.key(from), minio.RemoveObjectOptions{}))
}

// PosixRename replaces to: on an object store a copy replaces its target
// in one step.
func (f *fsys) PosixRename(from, to string) error { return f.rename(from, to, true) }

func (f *fsys) HasPosixRename() bool { return true }

// Mkdir makes a folder's marker object (name + "/", empty, as S3 consoles
// and rclone make them), so that an empty folder shows: in a folder that
// exists, where nothing has the name.
func (f *fsys) Mkdir(name string) error {
	if isRoot(name) {
		return &files.StatusError{Code: files.FxFileAlreadyExists, Err: &storeError{is: fs.ErrExist, err: errors.New("/ exists")}}
	}
	if _, err := f.Stat(name); err == nil {
		return &files.StatusError{Code: files.FxFileAlreadyExists, Err: &storeError{is: fs.ErrExist, err: fmt.Errorf("%s exists", name)}}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if dir := path.Dir(path.Clean("/" + name)); dir != "/" {
		switch fi, err := f.Stat(dir); {
		case err != nil:
			return err
		case !fi.IsDir():
			return notADirectory(dir)
		}
	}
	return f.mark(name)
}

// MkdirAll makes name's marker unless it is a folder already; no folder
// on the way may be an object.
func (f *fsys) MkdirAll(name string) error {
	if isRoot(name) {
		return nil
	}
	name = path.Clean("/" + name)
	for dir := name; dir != "/"; dir = path.Dir(dir) {
		ctx, cancel := f.op()
		_, err := f.c.Core.StatObject(ctx, f.c.Bucket, f.key(dir), minio.StatObjectOptions{})
		cancel()
		if err == nil {
			return notADirectory(dir)
		} else if !errors.Is(wrap(err), fs.ErrNotExist) {
			return wrap(err)
		}
	}
	if held, err := f.holds(name); err != nil || held {
		return err
	}
	return f.mark(name)
}

// mark puts the marker object of the folder name.
func (f *fsys) mark(name string) error {
	ctx, cancel := f.op()
	defer cancel()
	_, err := f.c.Core.PutObject(ctx, f.c.Bucket, f.dirKey(name), bytes.NewReader(nil), 0, "", "", minio.PutObjectOptions{DisableContentSha256: true})
	return wrap(err)
}

func notADirectory(name string) error {
	return &files.StatusError{Code: files.FxNotADirectory, Err: fmt.Errorf("%s is an object, not a folder", name)}
}

// RemoveDirectory removes an empty folder: its marker, if it has one.
func (f *fsys) RemoveDirectory(name string) error {
	err := f.Each(name, func(fs.FileInfo) error {
		return &files.StatusError{Code: files.FxDirNotEmpty, Err: fmt.Errorf("%s is not empty", name)}
	})
	if err != nil || isRoot(name) {
		return err
	}
	ctx, cancel := f.op()
	defer cancel()
	if err := files.IgnoreMissing(wrap(f.c.Core.RemoveObject(ctx, f.c.Bucket, f.dirKey(name), minio.RemoveObjectOptions{}))); err != nil {
		return err
	}
	// Keys a listing leaves out (a//b, a/../b) keep the folder.
	switch held, err := f.holds(name); {
	case err != nil:
		return err
	case held:
		return &files.StatusError{Code: files.FxDirNotEmpty, Err: fmt.Errorf("%s holds keys that are no file names (a//b, ..)", name)}
	}
	return nil
}

// PrefixFolders marks folders as key prefixes (files.PrefixFolders).
func (f *fsys) PrefixFolders() {}

// Modeless marks the FS as keeping no modes: an object has none.
func (f *fsys) Modeless() {}

func (f *fsys) Space(string) (files.Space, error) { return files.Space{}, files.ErrUnsupported }

func unsupported(why string) error {
	return &files.StatusError{Code: files.FxOpUnsupported, Err: fmt.Errorf("%w: %s", errors.ErrUnsupported, why)}
}

// storeError is the store's error that means one of io/fs's.
type storeError struct{ is, err error }

func (e *storeError) Error() string        { return e.err.Error() }
func (e *storeError) Unwrap() error        { return e.err }
func (e *storeError) Is(target error) bool { return target == e.is }

// wrap turns the store's answer into the file layer's errors: a request
// that got no answer is a lost connection.
func wrap(err error) error {
	if err == nil {
		return nil
	}
	var st *files.StatusError
	if errors.As(err, &st) {
		return err
	}
	resp := minio.ToErrorResponse(err)
	switch {
	case resp.Code == "NoSuchKey" || resp.Code == "NoSuchBucket" || resp.Code == "NoSuchUpload" || resp.StatusCode == http.StatusNotFound:
		return &files.StatusError{Code: files.FxNoSuchFile, Err: &storeError{is: fs.ErrNotExist, err: err}}
	case resp.Code == "AccessDenied" || resp.StatusCode == http.StatusForbidden:
		return &files.StatusError{Code: files.FxPermissionDenied, Err: &storeError{is: fs.ErrPermission, err: err}}
	case resp.StatusCode == http.StatusPreconditionFailed:
		return &files.StatusError{Code: files.FxFileAlreadyExists, Err: &storeError{is: fs.ErrExist, err: err}}
	case resp.Code == "EntityTooLarge" || resp.Code == "QuotaExceeded" || resp.StatusCode == http.StatusInsufficientStorage:
		return &files.StatusError{Code: files.FxNoSpace, Err: err}
	case resp.StatusCode == 0:
		return &files.StatusError{Code: files.FxConnectionLost, Err: err}
	}
	return &files.StatusError{Code: files.FxFailure, Err: err}
}
