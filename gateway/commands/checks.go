package commands

// Questions about the server and its files: ping, statvfs, hash.

import (
	"context"
	"crypto/md5"  //nolint:gosec // asked for by name, to compare with checksums users have
	"crypto/sha1" //nolint:gosec // likewise
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"time"

	"github.com/sftpgate/sftpgate/internal/files"
)

type pingRequest struct{}

// PingResult is the result of ping.
type PingResult struct {
	OK            bool    `json:"ok"`
	RoundTripMs   float64 `json:"roundTripMs"`
	ServerVersion string  `json:"serverVersion"`
}

func ping(fs *FS, _ *pingRequest) (any, error) {
	start := time.Now()
	if _, err := fs.Files.Stat(fs.Root); err != nil {
		return nil, serverFailure(err, "/")
	}
	return PingResult{
		OK:            true,
		RoundTripMs:   float64(time.Since(start).Microseconds()) / 1000,
		ServerVersion: fs.ServerVersion,
	}, nil
}

// StatvfsResult is the result of statvfs: the file system's space.
type StatvfsResult struct {
	Path           string `json:"path"`
	BlockSize      uint64 `json:"blockSize"`
	TotalBytes     uint64 `json:"totalBytes"`
	FreeBytes      uint64 `json:"freeBytes"`
	AvailableBytes uint64 `json:"availableBytes"`
	Files          uint64 `json:"files"`
	FreeFiles      uint64 `json:"freeFiles"`
}

func statvfs(fs *FS, req *pathRequest) (any, error) {
	if req.Path == "" {
		req.Path = "/"
	}
	target, err := fs.Resolve(req.Path)
	if err != nil {
		return nil, err
	}
	v, err := fs.Files.Space(target)
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return nil, fail("unsupported", files.FxOpUnsupported, "the server does not report file system space (SFTP: the statvfs@openssh.com extension)")
	case err != nil:
		return nil, serverFailure(err, fs.Rel(target))
	}
	return StatvfsResult{
		Path: fs.Rel(target), BlockSize: v.BlockSize,
		TotalBytes: v.Blocks * v.BlockSize, FreeBytes: v.BlocksFree * v.BlockSize, AvailableBytes: v.BlocksAvail * v.BlockSize,
		Files: v.Files, FreeFiles: v.FilesFree,
	}, nil
}

type hashRequest struct {
	Path      string `json:"path"`
	Algorithm string `json:"algorithm,omitempty"`
}

// HashResult is the result of hash.
type HashResult struct {
	Path      string `json:"path"`
	Algorithm string `json:"algorithm"`
	Hash      string `json:"hash"`
	Size      int64  `json:"size"`
}

var hashes = map[string]func() hash.Hash{"sha256": sha256.New, "sha1": sha1.New, "md5": md5.New}

// hashFile streams a file through a hash, in the gateway.
func hashFile(ctx context.Context, fs *FS, req *hashRequest) (any, error) {
	algorithm := req.Algorithm
	if algorithm == "" {
		algorithm = "sha256"
	}
	newHash, ok := hashes[algorithm]
	if !ok {
		return nil, &BadRequest{Field: "algorithm", Message: `must be "sha256", "sha1" or "md5"`}
	}
	_, f, fi, err := openRead(fs, req.Path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	h := newHash()
	n, err := f.WriteTo(bulk{ctx.Err, fs, h})
	if stop := ctx.Err(); stop != nil {
		return nil, stop
	}
	if err == nil && n < fi.Size() {
		err = ConfirmEnd(f, n) // a hash of a part is not the file's
	}
	if err != nil {
		return nil, serverFailure(err, fs.Rel(f.Name()))
	}
	return HashResult{Path: fs.Rel(f.Name()), Algorithm: algorithm, Hash: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}
