package uploads

import (
	"context"
	"errors"
	"io"
	"os"
	"time"

	"github.com/tus/tusd/v2/pkg/handler"

	"github.com/sftpgate/sftpgate/gateway/commands"
	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/pool"
	"github.com/sftpgate/sftpgate/internal/uploadrecord"
)

// store is tusd's data store: records in the Kubernetes API (package
// uploadrecord), bytes on the SFTP server (commands' resumable uploads).
// Each call finds the request it serves in its context.
type store struct {
	records *uploadrecord.Store
	limits  Limits
	now     func() time.Time
}

// The store's parts tusd uses: core, termination.
var (
	_ handler.DataStore           = (*store)(nil)
	_ handler.TerminaterDataStore = (*store)(nil)
)

// upload is one upload, for one request.
type upload struct {
	s   *store
	req *Request
	rec *uploadrecord.Record
	// fresh says the upload was just made: its offset is 0; finished,
	// that this request put its file in place.
	fresh, finished bool
}

func (u *upload) resumable() commands.Resumable {
	return commands.Resumable{Target: u.rec.Target, Partial: u.rec.Partial}
}

func (s *store) NewUpload(ctx context.Context, info handler.FileInfo) (handler.Upload, error) {
	req := requestOf(ctx)
	spec, err := commands.ParseResumable(info.MetaData)
	if err != nil {
		return nil, req.fail(err)
	}
	if uploadrecord.MetadataSize(info.MetaData) > MaxMetadataBytes {
		return nil, req.fail(errMetadataTooLarge)
	}
	if err := s.room(ctx, req, 0); err != nil {
		return nil, req.fail(err)
	}
	now := s.now()
	rec := &uploadrecord.Record{
		ID: uploadrecord.NewID(), Namespace: req.Conn.GetNamespace(), Kind: req.Kind, Connection: req.Conn.GetName(), ConnectionUID: req.Conn.GetUID(),
		Owner: req.Owner, Size: info.Size, Overwrite: spec.Overwrite, Metadata: info.MetaData, Root: req.Env.Root,
		Created: now.UTC().Truncate(time.Second), Expires: ceilSecond(now.Add(s.limits.Expiry)),
	}
	err = req.do(ctx, false, func(fs *commands.FS) error {
		_, err := fs.StartResumable(spec, seed(rec.ID), func(u commands.Resumable) error {
			rec.Target, rec.Partial = u.Target, u.Partial
			if err := s.records.Create(ctx, rec); err != nil {
				return err
			}
			// Others made at the same moment, on other replicas, count:
			// the last past the bound gives way.
			return s.room(ctx, req, 1)
		})
		return err
	})
	if err != nil {
		// Made, but the partial file was not: nothing to continue. Unless
		// the session broke, when it may have been made: the worker
		// removes it with its record, on expiry.
		if rec.Partial != "" && !files.SessionFailed(err) {
			_ = s.records.Delete(context.WithoutCancel(ctx), rec)
		}
		return nil, req.fail(err)
	}
	req.expires = rec.Expires
	return &upload{s: s, req: req, rec: rec, fresh: true}, nil
}

// ceilSecond is t rounded up to a whole second, as Upload-Expires says
// it: an upload never expires before it says.
func ceilSecond(t time.Time) time.Time {
	if down := t.UTC().Truncate(time.Second); down.Before(t) {
		return down.Add(time.Second)
	}
	return t.UTC()
}

// room refuses a new upload when the namespace's, counting mine of them,
// would pass the bound.
func (s *store) room(ctx context.Context, req *Request, mine int) error {
	n, err := s.records.Count(ctx, req.Conn.GetNamespace(), s.now())
	if err != nil {
		return err
	}
	if n-mine >= s.limits.MaxPerNamespace {
		return &TooManyError{Limit: s.limits.MaxPerNamespace}
	}
	return nil
}

// seed names an upload's partial file (tempname.For).
func seed(id string) string { return "upload/" + id }

func (s *store) GetUpload(ctx context.Context, id string) (handler.Upload, error) {
	req := requestOf(ctx)
	// What a record says never changes (holds are annotations), so the
	// one the request was let in with serves; its expiry is checked again.
	rec := req.record
	var err error
	if rec == nil || rec.ID != id {
		rec, err = s.records.Get(ctx, id)
	}
	if err == nil {
		err = s.check(req, rec)
	}
	if err != nil {
		return nil, req.fail(err)
	}
	return &upload{s: s, req: req, rec: rec}, nil
}

// find reads the record of the upload id for req's caller.
func (s *store) find(ctx context.Context, req *Request, id string) (*uploadrecord.Record, error) {
	rec, err := s.records.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return rec, s.check(req, rec)
}

// check says whether rec is an upload of req's caller: another caller's,
// one that expired or one begun under another root is none; one whose
// target the caller's key may no longer write is refused
// (commands.ErrPathNotAllowed). Every request of an upload is checked.
func (s *store) check(req *Request, rec *uploadrecord.Record) error {
	allowed := req.Env.Allows(rec.Target)
	switch {
	case rec.Owner != req.Owner || rec.ConnectionUID != req.Conn.GetUID():
		// Another caller's upload looks as none: its id says nothing.
		return uploadrecord.ErrNotFound
	case !s.now().Before(rec.Expires):
		return errExpired
	case (rec.Root != "" && rec.Root != req.Env.Root) || errors.Is(allowed, commands.ErrOutsideRoot):
		return errRootChanged
	case allowed != nil:
		return allowed
	}
	req.expires = rec.Expires
	return nil
}

// errExpired is an upload past its expiry, which the worker is to remove;
// errRootChanged one begun under another root of its connection.
var (
	errExpired     = errors.New("the upload expired")
	errRootChanged = errors.New("the upload was begun under another root")
)

func (s *store) AsTerminatableUpload(u handler.Upload) handler.TerminatableUpload { return u.(*upload) }

// GetInfo says how far the upload got: the size of its partial file. One
// whose bytes are all there but whose file was not yet put in place (the
// request that sent the last byte failed to) is finished now.
func (u *upload) GetInfo(ctx context.Context) (handler.FileInfo, error) {
	info := handler.FileInfo{ID: u.rec.ID, Size: u.rec.Size, MetaData: u.rec.Metadata}
	if u.fresh {
		return info, nil
	}
	offset, done, err := u.offset(ctx)
	if err == nil && !done && offset == u.rec.Size && u.req.holdNow != nil {
		// Putting the file in place is a write: a HEAD holds the upload
		// for it, and looks again once it does (a request of another
		// replica may have put it there meanwhile).
		holdCtx, cancel := context.WithTimeout(ctx, holdWait)
		err = u.req.hold(holdCtx)
		cancel()
		if err != nil {
			return info, err
		}
		offset, done, err = u.offset(ctx)
	}
	info.Offset = offset
	switch {
	case done && !u.req.mayEnd:
		// This answer (a 409) would not say so; the HEAD after it will.
		info.Offset = u.rec.Size
		return info, nil
	case done:
		// Put in place by a request whose answer, or record's removal,
		// was lost: this answer says so, once.
		info.Offset = u.rec.Size
		u.finished = true
		err = u.s.records.Delete(context.WithoutCancel(ctx), u.rec)
	case errors.Is(err, os.ErrNotExist):
		err = uploadrecord.ErrNotFound // removed on the server: gone
	}
	if err != nil {
		return info, u.req.fail(err)
	}
	if info.Offset == u.rec.Size && !u.finished && u.req.mayEnd {
		if err := u.FinishUpload(ctx); err != nil {
			return info, err
		}
	}
	return info, nil
}

// offset is how far the upload got on the server, and whether its file
// is in place already.
func (u *upload) offset(ctx context.Context) (offset int64, done bool, err error) {
	err = u.req.do(ctx, false, func(fs *commands.FS) error {
		var err error
		offset, done, err = fs.ResumableOffset(u.resumable(), u.rec.Size)
		return err
	})
	return offset, done, err
}

// WriteChunk streams the request's body into the partial file at offset.
func (u *upload) WriteChunk(ctx context.Context, offset int64, src io.Reader) (int64, error) {
	var n int64
	err := u.req.do(ctx, true, func(fs *commands.FS) error {
		body, done := u.req.ReadAhead(src)
		var err error
		n, err = fs.WriteResumable(u.resumable(), offset, body, u.req.Checksum)
		done(err != nil)
		return err
	})
	u.fresh = false
	if err != nil {
		return n, u.req.fail(err)
	}
	return n, nil
}

// FinishUpload puts the complete file in place and removes the record:
// the upload is done, and no longer counts. (Should the removal fail, the
// next request for it finds the file in place and removes it then.)
// Refused because a file is now where overwrite said none may be, the
// upload ends there: its bytes are removed with its record.
func (u *upload) FinishUpload(ctx context.Context) error {
	if u.finished {
		return nil
	}
	err := u.req.do(ctx, false, func(fs *commands.FS) error {
		return fs.FinishResumable(u.resumable(), u.rec.Overwrite)
	})
	if failure, ok := errors.AsType[*commands.Failure](err); ok && failure.Code == "already_exists" {
		_ = u.Terminate(context.WithoutCancel(ctx))
	}
	if err != nil {
		return u.req.fail(err)
	}
	u.finished = true
	_ = u.s.records.Delete(context.WithoutCancel(ctx), u.rec)
	return nil
}

// Terminate removes the partial file and the record (DELETE).
func (u *upload) Terminate(ctx context.Context) error {
	err := u.req.do(ctx, false, func(fs *commands.FS) error {
		_, err := fs.AbandonResumable(u.resumable())
		return err
	})
	if err == nil {
		err = u.s.records.Delete(ctx, u.rec)
	}
	if err != nil {
		return u.req.fail(err)
	}
	return nil
}

// GetReader is for tusd's GET, which the gateway does not route: a file
// is read with read.
func (u *upload) GetReader(context.Context) (io.ReadCloser, error) {
	return nil, handler.ErrNotImplemented
}

// do runs fn on a session of the request's connection: a stream (a
// session of its own, the request's time) or one operation.
func (req *Request) do(ctx context.Context, stream bool, fn func(fs *commands.FS) error) error {
	op := pool.Op{Timeout: req.OpTimeout}
	if stream {
		op = pool.Op{Stream: true, Timeout: req.StreamTimeout}
	}
	return req.Pool.Do(ctx, op, func(s files.Session) error {
		return fn(req.Env.FS(s))
	})
}
