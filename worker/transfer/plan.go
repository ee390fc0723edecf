// Package transfer copies the files of one Transfer: it lists the source
// into a Plan, which the worker stores in the Kubernetes API so that any
// replica resumes it, and copies each file (Copy) under a temporary name
// that the same file of the same transfer always gets, verified before it
// is renamed over its target.
package transfer

import (
	"bufio"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/sftpgate/sftpgate/internal/zipped"
)

// FileState is where a file of a plan stands.
type FileState uint8

// Where a file stands: still to copy, or how it ended.
const (
	Waiting FileState = iota
	Done
	Skipped
	Failed
)

// File is one file of a plan.
type File struct {
	// Path is the file's source path below the connection's root.
	Path string `json:"p"`
	// Size and ModTime (Unix seconds) are as the listing saw them.
	Size    int64     `json:"s"`
	ModTime int64     `json:"m"`
	State   FileState `json:"st,omitempty"`
	// Tries counts the failed tries.
	Tries int32 `json:"t,omitempty"`
	// Reason and Message say why the last try failed.
	Reason  string `json:"r,omitempty"`
	Message string `json:"e,omitempty"`
	// Upload is the object store's id of the file's upload a try left
	// incomplete, which the next try continues.
	Upload string `json:"u,omitempty"`
	// Ranges is, for a file copied in ranges (Job.Ranges), the bytes of
	// each range its tries copied, which the next try continues.
	Ranges []int64 `json:"rg,omitempty"`
}

// Plan is a transfer's files and where each stands: what a replica
// stores, and another resumes from.
type Plan struct {
	// Base is the source folder whose files keep their paths below it at
	// the destination; "" puts each file under its own name.
	Base  string `json:"base,omitempty"`
	Files []File `json:"files"`
	// Outcome is set once every file ended: the Ready reason to report,
	// with its message. The event is sent, and the status written, after.
	Outcome string `json:"outcome,omitempty"`
	Message string `json:"message,omitempty"`
	// EventAttempts counts the failed tries of the finishing event.
	EventAttempts int32 `json:"eventAttempts,omitempty"`
}

// Target is f's path at the destination, below its folder.
func (p *Plan) Target(f *File) string {
	if p.Base == "" {
		return path.Base(f.Path)
	}
	if rel, ok := strings.CutPrefix(f.Path, strings.TrimSuffix(p.Base, "/")+"/"); ok && rel != "" {
		return rel
	}
	return path.Base(f.Path)
}

// Counts are a plan's files and bytes by where they stand.
type Counts struct {
	Total, Done, Skipped, Failed int32
	Bytes, BytesDone             int64
}

// Count counts p's files and bytes (done and skipped files' bytes as done).
func (p *Plan) Count() Counts {
	var c Counts
	for i := range p.Files {
		f := &p.Files[i]
		c.Total++
		c.Bytes += f.Size
		switch f.State {
		case Done:
			c.Done++
			c.BytesDone += f.Size
		case Skipped:
			c.Skipped++
			c.BytesDone += f.Size
		case Failed:
			c.Failed++
		}
	}
	return c
}

// Finished reports whether every file ended.
func (p *Plan) Finished() bool {
	c := p.Count()
	return c.Done+c.Skipped+c.Failed == c.Total
}

// Encode is p as stored: JSON, gzipped.
func (p *Plan) Encode() ([]byte, error) {
	return zipped.Zip(func(w *bufio.Writer) error { return json.NewEncoder(w).Encode(p) })
}

// maxDecoded bounds what a stored plan may expand to.
const maxDecoded = 64 << 20

// DecodePlan reads a plan Encode wrote.
func DecodePlan(b []byte) (*Plan, error) {
	var p Plan
	if err := zipped.Unzip(b, maxDecoded, func(raw []byte) error { return json.Unmarshal(raw, &p) }); err != nil {
		return nil, fmt.Errorf("a stored transfer plan: %w", err)
	}
	return &p, nil
}

// Backoff is the wait before a file's next try after tries failed ones:
// first doubling each time, up to ten minutes.
func Backoff(first time.Duration, tries int32) time.Duration {
	d := first
	for i := int32(1); i < tries && d < 10*time.Minute; i++ {
		d *= 2
	}
	return min(d, 10*time.Minute)
}
