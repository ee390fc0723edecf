package commands

// Resumable uploads (tus, package gateway/uploads): a file's bytes gather
// in a partial file beside its target, written at the offsets the client
// sends, over as many requests and gateway replicas as it takes, and are
// renamed over the target once the last byte is there, under the rules
// of a raw upload. The partial file's size is how far the upload got.

import (
	"bytes"
	"crypto/sha1" //nolint:gosec // see Checksum
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"net/url"
	"os"
	"path"
	"strings"

	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/tempname"
)

// Resumable is where a resumable upload's bytes go: both are server
// paths.
type Resumable struct {
	// Target is the file the client named, resolved inside the scope.
	Target string
	// Partial is the partial file, a temporary name beside where Target
	// leads, derived from the upload's id (tempname.For).
	Partial string
}

// ResumableSpec is what a resumable upload makes, from its metadata.
type ResumableSpec struct {
	Path          string
	Mode          *os.FileMode
	CreateParents bool
	// Overwrite replaces an existing file; it is true unless the metadata
	// says "false", as for a raw upload.
	Overwrite bool
}

// ParseResumable reads a resumable upload's parameters from its metadata
// (tus's Upload-Metadata): path, and optionally mode, createParents and
// overwrite, as a raw upload's query has them. Other keys (a client's
// filename or filetype) are not read.
func ParseResumable(meta map[string]string) (ResumableSpec, error) {
	query := url.Values{}
	for _, name := range []string{"path", "mode", "createParents", "overwrite"} {
		if v, ok := meta[name]; ok {
			query.Set(name, v)
		}
	}
	req, err := rawRequest(query, false)
	if err != nil {
		return ResumableSpec{}, err
	}
	if req.Path == "" {
		return ResumableSpec{}, &BadRequest{Field: "path", Message: "is required in Upload-Metadata: the file to write"}
	}
	mode, err := parseMode(req.Mode)
	if err != nil {
		return ResumableSpec{}, err
	}
	return ResumableSpec{Path: req.Path, Mode: mode, CreateParents: req.CreateParents, Overwrite: req.Overwrite == nil || *req.Overwrite}, nil
}

// StartResumable begins a resumable upload: it checks that the request
// may write its path (its scope, not a directory, not an existing file
// without overwrite), makes its parents if asked, has record keep where
// the bytes will go, and then makes the empty partial file, named after
// seed, with the spec's mode (or the permissions of the file it will
// replace) before any byte arrives. A partial file therefore never exists
// without its record.
func (fs *FS) StartResumable(spec ResumableSpec, seed string, record func(Resumable) error) (Resumable, error) {
	target, err := resolveForWrite(fs, spec.Path, spec.CreateParents)
	if err != nil {
		return Resumable{}, err
	}
	existing, err := fs.Files.Lstat(target)
	switch {
	case files.SessionFailed(err):
		return Resumable{}, err
	case err != nil:
		existing = nil
	}
	dest, mode, err := fs.destination(target, existing, spec.Mode, spec.Overwrite)
	if err != nil {
		return Resumable{}, err
	}
	u := Resumable{Target: target, Partial: tempname.For(path.Dir(dest), seed)}
	if err := record(u); err != nil {
		return Resumable{}, err
	}
	f, err := fs.Files.OpenFile(u.Partial, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if files.SessionFailed(err) {
		// The server may have made it before the answer was lost.
		fs.undo(removeNew(u.Partial, 0), err)
	}
	if err != nil {
		return Resumable{}, serverFailure(err, fs.Rel(target))
	}
	if _, err := fillFile(f, mode, func(files.File) (int64, error) { return 0, nil }); err != nil {
		fs.undo(removeTemporary(u.Partial), err)
		return Resumable{}, serverFailure(err, fs.Rel(target))
	}
	return u, nil
}

// ResumableOffset is how far a resumable upload got: its partial file's
// size. A partial file that is gone is os.ErrNotExist; then done says
// whether its target has the upload's size (the rename went through but
// its answer was lost).
func (fs *FS) ResumableOffset(u Resumable, size int64) (offset int64, done bool, err error) {
	fi, err := fs.Files.Lstat(u.Partial)
	if errors.Is(err, os.ErrNotExist) {
		target, statErr := fs.Files.Stat(u.Target)
		return 0, statErr == nil && target.Mode().IsRegular() && target.Size() == size, err
	}
	if err != nil {
		return 0, false, serverFailure(err, fs.Rel(u.Target))
	}
	return fi.Size(), false, nil
}

// ErrOffsetMoved is a write at an offset that is no longer the partial
// file's end: another request wrote to the upload meanwhile.
var ErrOffsetMoved = errors.New("the upload's offset moved while this request ran; ask for it again (HEAD)")

// Checksum is the sum a part must have: sha256 or sha1.
type Checksum struct {
	Algorithm string
	Sum       []byte
}

// ParseChecksum reads Upload-Checksum: "sha256 <base64 of the sum>", or
// sha1 (which tus asks every server to take). None is nil.
func ParseChecksum(header string) (*Checksum, error) {
	if header == "" {
		return nil, nil
	}
	algorithm, value, _ := strings.Cut(header, " ")
	c := &Checksum{Algorithm: strings.ToLower(algorithm)}
	size := map[string]int{"sha256": sha256.Size, "sha1": sha1.Size}[c.Algorithm]
	if size == 0 {
		return nil, &BadRequest{Field: "Upload-Checksum", Message: fmt.Sprintf("the algorithm %q is not supported; send sha256 (or sha1)", algorithm)}
	}
	var err error
	c.Sum, err = base64.StdEncoding.DecodeString(strings.TrimSpace(value))
	if err != nil || len(c.Sum) != size {
		return nil, &BadRequest{Field: "Upload-Checksum", Message: fmt.Sprintf("must be %s and the base64 of the part's %d-byte sum", c.Algorithm, size)}
	}
	return c, nil
}

func (c *Checksum) hash() hash.Hash {
	if c.Algorithm == "sha1" {
		return sha1.New() //nolint:gosec // tus's checksum extension requires it; it detects corruption, not forgery
	}
	return sha256.New()
}

// ChecksumMismatch is a part whose bytes do not have the checksum the
// client sent; none of them was kept.
type ChecksumMismatch struct{}

func (ChecksumMismatch) Error() string {
	return "the part's checksum is not the Upload-Checksum sent; nothing of it was kept"
}

// WriteResumable writes body to the partial file at offset, its end, and
// returns how many bytes it kept. Without checksum, every byte that
// reached the server is kept, also when the body was cut off; with one (a
// SHA-256), the part is kept only when it arrived whole with that sum,
// and otherwise cut off again. Bytes a broken session may have written
// past what is kept are cut off by its next session.
func (fs *FS) WriteResumable(u Resumable, offset int64, body io.Reader, checksum *Checksum) (int64, error) {
	f, err := fs.Files.OpenFile(u.Partial, os.O_WRONLY)
	if err != nil {
		return 0, serverFailure(err, fs.Rel(u.Target))
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
		_ = f.Close()
		return 0, serverFailure(err, fs.Rel(u.Target))
	case fi.Size() != offset:
		_ = f.Close()
		return 0, ErrOffsetMoved
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		_ = f.Close()
		return 0, serverFailure(err, fs.Rel(u.Target))
	}
	var sum hash.Hash
	if checksum != nil {
		sum = checksum.hash()
		body = io.TeeReader(body, sum)
	}
	client := &clientBody{r: fs.Pace.Reader(body, 0)}
	_, err = f.ReadFromWithConcurrency(client, 0)
	// What reached the server in order: past a failed write, or a body cut
	// off, pkg/sftp leaves the file's offset at the first byte not kept.
	end, seekErr := f.Seek(0, io.SeekCurrent)
	keep := end - offset
	if seekErr != nil {
		keep = 0
	}
	discarded := false
	if checksum != nil && (err != nil || !bytes.Equal(sum.Sum(nil), checksum.Sum)) {
		keep = 0
		if err == nil {
			err = ChecksumMismatch{}
		}
		discarded = discard(f)
	}
	if !discarded {
		closeErr := f.Close()
		if _, atClose := f.(interface{ Abort() error }); atClose && closeErr != nil {
			keep = 0 // a write that completes at Close (a store's) kept nothing
		}
		if err == nil {
			err = closeErr
		}
	}
	if err != nil && !discarded {
		fs.undo(cutBack(u.Partial, offset+keep, math.MaxInt64), err)
	}
	if client.err != nil {
		return keep, &BodyError{Err: client.err}
	}
	if err != nil && !errors.As(err, new(ChecksumMismatch)) {
		err = serverFailure(err, fs.Rel(u.Target))
	}
	return keep, err
}

// FinishResumable renames a complete upload's partial file over its
// target, checked again now (the request's scope; without overwrite, a
// file made there meanwhile is kept and the upload refused).
func (fs *FS) FinishResumable(u Resumable, overwrite bool) error {
	if _, err := fs.Resolve(fs.Rel(u.Target)); err != nil {
		return err
	}
	existing, err := fs.Files.Lstat(u.Target)
	switch {
	case files.SessionFailed(err):
		return err
	case err != nil:
		existing = nil
	}
	dest, _, err := fs.destination(u.Target, existing, nil, overwrite)
	if err != nil {
		return err
	}
	return serverFailure(fs.settle(u.Partial, dest, u.Target, overwrite), fs.Rel(u.Target))
}

// AbandonResumable removes an upload's partial file; one already gone is
// no error.
func (fs *FS) AbandonResumable(u Resumable) (removed int64, err error) {
	fi, err := fs.Files.Lstat(u.Partial)
	if err != nil {
		return 0, serverFailure(files.IgnoreMissing(err), fs.Rel(u.Target))
	}
	if !fi.Mode().IsRegular() {
		return 0, nil
	}
	return fi.Size(), serverFailure(files.IgnoreMissing(fs.Files.Remove(u.Partial)), fs.Rel(u.Target))
}
