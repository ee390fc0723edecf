package files

import (
	"io"
	"time"
)

// Uploader is a backend whose new files appear whole or not at all (an
// object store's uploads): a copy writes straight to the target's name,
// nothing shows there before Complete, and a cut upload continues from
// the parts the store holds rather than from a partial file.
type Uploader interface {
	Upload(name string, o UploadOptions) (Upload, error)
}

// UploadOptions is how an upload starts.
type UploadOptions struct {
	// ModTime is the file's modification time once complete.
	ModTime time.Time
	// Size is the file's size as far as the caller knows it, or 0: a
	// small file is then held in a buffer of its size, not a part's.
	Size int64
	// Resume is an earlier try's Upload.ID to continue: the parts it holds
	// are kept as far as they match Source (the last one is compared), and
	// the upload is started anew when they do not or it is gone.
	Resume string
	Source io.ReaderAt
	// Exclusive refuses to replace a file already at the name
	// (fs.ErrExist from Complete), where the store can tell.
	Exclusive bool
}

// Upload is one file being written whole.
type Upload interface {
	// ID names the upload for a later try's UploadOptions.Resume; "" while
	// nothing is stored that a later try could continue.
	ID() string
	// Size is what the store holds already: the copy continues from there.
	Size() int64
	// ReadFromWithConcurrency sends what r gives, from Size on, with up to
	// concurrency parts in flight (0: the backend's default).
	ReadFromWithConcurrency(r io.Reader, concurrency int) (int64, error)
	// Complete puts the file at its name, replacing what was there in one
	// step; the store checked every part against its SHA-256 as it came,
	// and Verified reports whether it also confirmed the whole.
	Complete() error
	Verified() bool
	// Abort ends the upload and removes its parts.
	Abort() error
}
