package transfer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/s3fs"
)

// upload copies j's file to a destination whose files appear whole (an
// object store): straight to the target's name, where nothing shows until
// the upload completes, which replaces the target in one step; a cut
// upload continues from the parts the store holds (j.Upload). The order
// is that of a copy under a temporary name: every part sent, the source
// found unchanged, the transfer still held, then the file put in place,
// verified, and with Move the source removed.
func (j *Job) upload(ctx context.Context, src, dst files.FS, up files.Uploader, replace bool, r Result) (Result, error) {
	progress := &counter{report: j.Progress}
	stop := j.watch(ctx, progress)
	defer stop()
	in, err := src.Open(j.Src)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return r, j.sourceGone()
	case err != nil:
		return r, fail(err, "opening the source file")
	}
	defer func() { _ = in.Close() }()
	progress.version.see(in)
	if own, ok := progress.version.ownTime(); ok {
		r.ModTime = own // the version read, not the time a listing gave
	}
	opts := files.UploadOptions{ModTime: time.Unix(r.ModTime, 0), Source: in, Exclusive: !replace}
	if j.Transform == nil {
		// A transformed copy starts over: its parts are not the source's,
		// nor its size.
		opts.Resume, opts.Size = j.Upload, r.Size
	}
	u, err := up.Upload(j.Dst, opts)
	if err != nil {
		return r, fail(err, "starting the upload")
	}
	r.From = u.Size()
	j.kept(r.From)
	if j.Verify == v1alpha1.VerifySHA256 && r.From == 0 && j.Transform == nil {
		progress.sum = sha256.New()
	}
	out := &told{Upload: u, tell: j.Uploading}
	size, srcSum := r.Size, []byte(nil)
	if j.Transform != nil {
		size, srcSum, err = j.through(in, out, noClose, &r, progress)
	} else {
		err = j.sendAll(in, out, &r, progress)
		if progress.sum != nil {
			srcSum = progress.sum.Sum(nil)
		}
	}
	if err == nil && j.Held != nil && !j.Held() {
		err = ErrNotHeld
	}
	if err == nil {
		err = u.Complete()
		switch {
		case errors.Is(err, s3fs.ErrCorrupt):
			err = &Error{Reason: v1alpha1.ReasonVerificationFailed, Err: err}
		case errors.Is(err, fs.ErrExist) && !replace:
			// Another writer made the target meanwhile: Never leaves it.
			_ = u.Abort()
			r.State = Skipped
			return r, nil
		case err != nil:
			err = fail(err, "completing the upload")
		}
	}
	if err != nil {
		var typed *Error
		if j.Transform != nil || errors.As(err, &typed) && typed.Permanent {
			// Never continued: its parts are of no use.
			_ = u.Abort()
		}
		return r, err
	}
	if err := j.verifyUploaded(src, dst, u, size, srcSum, r.From > 0); err != nil {
		return r, err
	}
	r.State = Done
	if j.Move {
		return r, removeSource(src, j.Src)
	}
	return r, nil
}

// sendAll sends the source from r.From on (a small file in one read, as
// Copy does), then checks it did not change.
func (j *Job) sendAll(in files.File, out sink, r *Result, progress *counter) error {
	var (
		now  os.FileInfo
		serr error
		err  error
	)
	if r.From == 0 && r.Size <= SmallFile {
		send := func(b []byte) error { _, err := out.ReadFromWithConcurrency(bytes.NewReader(b), 1); return err }
		err = j.copySmall(in, send, noClose, r, progress, func() { now, serr = in.Stat() })
		return j.ended(err, now, serr, r, progress)
	}
	if _, err := in.Seek(r.From, io.SeekStart); err != nil {
		return fail(err, "reading the source file")
	}
	err = j.copyStream(in, out, noClose, r, progress)
	if err == nil || errors.Is(err, errChanged) {
		now, serr = in.Stat()
	}
	return j.ended(err, now, serr, r, progress)
}

// verifyUploaded checks the object in place: its size, and with SHA256
// its digest; unless the store confirmed it holds what was sent (every
// part was checked against its SHA-256 as it came, and the whole against
// theirs) and what was sent is the source: its bytes counted as they were
// read, and with SHA256 every one of them (a resumed upload's earlier
// parts were not: the whole is read back).
func (j *Job) verifyUploaded(src, dst files.FS, u files.Upload, size int64, srcSum []byte, resumed bool) error {
	if u.Verified() && (j.Verify != v1alpha1.VerifySHA256 || !resumed) {
		return nil
	}
	_, err := j.verify(src, dst, j.Dst, size, srcSum)
	return err
}

func noClose() error { return nil }

// AbortUpload removes the parts of the upload id to name that a file
// which failed for good left, where dst keeps uploads.
func AbortUpload(dst files.FS, name, id string) error {
	up, ok := dst.(files.Uploader)
	if !ok || id == "" {
		return nil
	}
	u, err := up.Upload(name, files.UploadOptions{Resume: id})
	if err != nil {
		return err
	}
	return u.Abort()
}

// told is an upload that tells its id once it has one.
type told struct {
	files.Upload
	tell func(string)
	told bool
}

func (t *told) ReadFromWithConcurrency(r io.Reader, concurrency int) (int64, error) {
	if t.tell == nil || t.told {
		return t.Upload.ReadFromWithConcurrency(r, concurrency)
	}
	// The id exists once the first part is on its way: told as the
	// second part is read, or when the upload ends.
	n, err := t.Upload.ReadFromWithConcurrency(&telling{r: r, t: t}, concurrency)
	t.say()
	return n, err
}

func (t *told) say() {
	if id := t.ID(); id != "" && !t.told {
		t.told = true
		t.tell(id)
	}
}

type telling struct {
	r io.Reader
	t *told
}

func (r *telling) Read(p []byte) (int, error) {
	r.t.say()
	return r.r.Read(p)
}
