package transfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/tempname"
)

// RangedFile is the size from which a file is copied in ranges
// (Job.Ranges), and rangeAlign what a range's length is a multiple of.
const (
	RangedFile = 64 << 20
	rangeAlign = 1 << 20
)

// rangedTemp is the temporary name of j's copy in ranges: apart from a
// streamed copy's (a copy in ranges has holes until every range ends,
// which a streamed copy, resuming from the copy's size, would take for
// content), and of the source's size and modification time and the
// ranges' length, since a resumed copy trusts what it finds there as
// written in order, range by range, of this content.
func (j *Job) rangedTemp() string {
	_, length := rangeBounds(j.Size, j.Ranges)
	return tempname.For(path.Dir(j.Dst), fmt.Sprintf("%s\x00ranges\x00%d\x00%d\x00%d", j.Seed, j.Size, j.ModTime, length))
}

// rangeReportEvery is how often RangeDone is told the ranges' progress.
const rangeReportEvery = time.Second

// ranged reports whether j's file is copied in ranges (the destination
// is no files.Uploader: Copy uploads to those first).
func (j *Job) ranged() bool {
	return j.Transform == nil && j.Ranges > 1 && j.Sessions != nil && j.Size >= RangedFile
}

// rangeBounds splits size into at most n ranges of one length, a
// multiple of rangeAlign (the last may be shorter): how many, and the
// length.
func rangeBounds(size int64, n int) (count int, length int64) {
	length = (size + int64(n) - 1) / int64(n)
	length = (length + rangeAlign - 1) / rangeAlign * rangeAlign
	return int((size + length - 1) / length), length
}

// ErrNoSessions is what Job.Sessions answers when no sessions are free
// now: the ranges go on, fewer at once.
var ErrNoSessions = errors.New("no sessions free")

// copyRanges copies the source into tmp in ranges, each written at its
// offsets: on src and dst, and on as many more pairs of sessions as
// j.Sessions gives (up to one per range), each pair copying ranges until
// none is left. A range continues from what j.Done has of it when the
// bytes before that point match the source's. The first range that fails
// stops the others. The source's digest is never computed on the way
// (verify reads it, beside the copy).
func (j *Job) copyRanges(ctx context.Context, src, dst files.FS, tmp string, r *Result) error {
	n, length := rangeBounds(r.Size, j.Ranges)
	bounds := func(i int) (int64, int64) { return int64(i) * length, min(int64(i+1)*length, r.Size) }
	progress := &counter{report: j.Progress}
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A stall, from the first look at the copy on, stops every range:
	// each pair of sessions is closed when gctx ends.
	watched := *j
	watched.Abort = func() {
		cancel()
		if j.Abort != nil {
			j.Abort()
		}
	}
	stop := sync.OnceFunc(watched.watch(ctx, progress))
	defer stop()
	resumed, err := j.rangesDone(src, dst, tmp, n, bounds)
	if err != nil {
		return j.ended(err, nil, nil, r, progress)
	}
	// Each range's bytes read into its copy, and whether its copy ended
	// well (every write answered).
	done, whole := make([]atomic.Int64, n), make([]atomic.Bool, n)
	var pending []int
	for i, d := range resumed {
		done[i].Store(d)
		r.From += d
		if start, end := bounds(i); start+d < end {
			pending = append(pending, i)
		} else {
			whole[i].Store(true)
		}
	}
	if r.From == 0 {
		// Made anew once, before the ranges open it without truncating.
		if err := truncate(dst, tmp); err != nil {
			return err
		}
		if !j.Fresh {
			// A streamed try's copy, left under the other name.
			_ = dst.Remove(tempname.For(path.Dir(j.Dst), j.Seed))
		}
	} else {
		j.kept(r.From)
	}
	// Reports end once every range has returned, each failed one's
	// progress set back to what its copy holds (copyRange): not at the
	// first failure, with the others' reads still counted past it.
	reporting, endReports := context.WithCancel(ctx)
	defer endReports()
	reported := j.reportRanges(reporting, done, whole)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		next     atomic.Int64
		sent     atomic.Int64
	)
	failed := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
			cancel()
		}
	}
	copier := func(src, dst files.FS, abort func()) error {
		if abort != nil {
			defer context.AfterFunc(gctx, abort)()
		}
		for {
			k := int(next.Add(1)) - 1
			if k >= len(pending) {
				return nil
			}
			if err := gctx.Err(); err != nil {
				return err
			}
			i := pending[k]
			start, end := bounds(i)
			if err := j.copyRange(src, dst, tmp, start, end, &done[i], progress, &sent); err != nil {
				return err
			}
			whole[i].Store(true)
		}
	}
	wg.Go(func() {
		if err := copier(src, dst, j.Abort); err != nil {
			failed(err)
		}
	})
	for range len(pending) - 1 {
		wg.Go(func() {
			err := j.Sessions(gctx, copier)
			if err != nil && !errors.Is(err, ErrNoSessions) {
				failed(err)
			}
		})
	}
	wg.Wait()
	stop()
	cancel()
	endReports()
	<-reported
	r.Sent = sent.Load()
	err = firstErr
	var (
		now  os.FileInfo
		serr error
	)
	if err == nil || errors.Is(err, errChanged) {
		now, serr = src.Stat(j.Src)
	}
	err = j.ended(err, now, serr, r, progress)
	if errors.Is(err, ErrSourceChanged) {
		// The source changed: its next copy, of the new content, is
		// made under another name.
		_ = dst.Remove(tmp)
	}
	return err
}

// truncate makes name anew, empty.
func truncate(dst files.FS, name string) error {
	f, err := dst.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		return fail(err, "creating the temporary copy")
	}
	return nil
}

// rangesDone is where each range continues: from what j.Done has of it,
// when the copy holds that much and its last bytes before that point (up
// to tailCheck) match the source's, else from 0; and further, as far as
// the copy shows it was written (written), since the plan is saved only
// every few seconds and a replica that died did not save its last.
func (j *Job) rangesDone(src, dst files.FS, tmp string, n int, bounds func(int) (int64, int64)) ([]int64, error) {
	done := make([]int64, n)
	if j.Fresh {
		return done, nil
	}
	pfi, err := dst.Stat(tmp)
	if err != nil || pfi.Size() > j.Size {
		return done, nil
	}
	in, err := src.Open(j.Src)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, j.sourceGone()
	case err != nil:
		return nil, fail(err, "reading the source file")
	}
	defer func() { _ = in.Close() }()
	out, err := dst.Open(tmp)
	if err != nil {
		return done, nil
	}
	defer func() { _ = out.Close() }()
	var (
		ranges   sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for i := range n {
		ranges.Go(func() {
			start, end := bounds(i)
			planned := int64(0)
			if len(j.Done) == n {
				planned = j.Done[i]
			}
			d, err := rangeDone(in, out, planned, start, min(end, pfi.Size()))
			mu.Lock()
			defer mu.Unlock()
			done[i] = d
			if err != nil && firstErr == nil {
				firstErr = fail(err, "comparing the copy with the source")
			}
		})
	}
	ranges.Wait()
	return done, firstErr
}

// rangeDone is how much of a range, from start, the copy surely holds, up
// to held (the copy's size, or the range's end), planned by the plan's
// record. Its requests to both servers are sent together, a round trip
// each step.
func rangeDone(in, out files.File, planned, start, held int64) (int64, error) {
	if held <= start {
		return 0, nil
	}
	// read reads n bytes at off of the source and of the copy (as much
	// as it holds).
	read := func(off, n int64) (source, copied []byte, err error) {
		source, copied = make([]byte, n), make([]byte, n)
		var (
			both    sync.WaitGroup
			readErr error
		)
		both.Go(func() { _, readErr = in.ReadAt(source, off) })
		k, err := out.ReadAt(copied, off)
		both.Wait()
		if err != nil && !errors.Is(err, io.EOF) {
			// Not the copy's content, the session's failure: the next
			// try looks again.
			return nil, nil, err
		}
		return source, copied[:k], readErr
	}
	d := min(max(planned, 0), held-start)
	if k := min(d, tailCheck); k > 0 {
		source, copied, err := read(start+d-k, k)
		if err != nil || !bytes.Equal(source, copied) {
			// Not the bytes the plan says: nothing there is trusted.
			return 0, err
		}
	}
	return written(read, start, d, held)
}

// written looks past d for how far the copy of a range (from start, up
// to held) was written: each try writes its range in order, but for the
// last requests in flight, which may land in any order; so below the
// furthest chunk that holds the source's bytes, less what may have been
// in flight, all is written, and from there to the end of the first
// chunk found unwritten the copy holds what it has in common with the
// source. A chunk of zeros says nothing (a hole
// reads as zeros): taken as not written. Halving the span a chunk at a
// time, it asks a few dozen chunks at most, then reads the span that may
// have been in flight once.
func written(read func(off, n int64) (source, copied []byte, err error), start, d, held int64) (int64, error) {
	lo, hi, furthest := start+d, held, int64(-1)
	for hi-lo > chunkSize {
		mid := lo + (hi-lo)/2
		source, copied, err := read(mid, min(chunkSize, hi-mid))
		if err != nil {
			return 0, err
		}
		if bytes.Equal(source, copied) && slices.ContainsFunc(source, func(c byte) bool { return c != 0 }) {
			lo, furthest = mid+int64(len(source)), mid+int64(len(source))
		} else {
			hi = mid
		}
	}
	if furthest < 0 {
		return d, nil
	}
	// The chunk at hi differs, but may have been written in part.
	from, to := max(start+d, furthest-inFlight-2*chunkSize), min(hi+chunkSize, held)
	source, copied, err := read(from, to-from)
	if err != nil {
		return 0, err
	}
	common := 0
	for common < len(copied) && source[common] == copied[common] {
		common++
	}
	return from + int64(common) - start, nil
}

// reportRanges tells j.RangeDone each range's progress, less what may be
// in flight until its copy ended well, every rangeReportEvery until ctx
// ends, and once at the end; the channel is closed then.
func (j *Job) reportRanges(ctx context.Context, done []atomic.Int64, whole []atomic.Bool) <-chan struct{} {
	ended := make(chan struct{})
	if j.RangeDone == nil {
		close(ended)
		return ended
	}
	report := func() {
		sure := make([]int64, len(done))
		for i := range done {
			d := done[i].Load()
			if !whole[i].Load() {
				// The last writes may land in any order, or not at all
				// (pkg/sftp holds one chunk more than it has in flight).
				d = max(d-inFlight-2*chunkSize, 0)
			}
			sure[i] = d
		}
		j.RangeDone(sure)
	}
	go func() {
		defer close(ended)
		t := time.NewTicker(rangeReportEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				report()
				return
			case <-t.C:
				report()
			}
		}
	}()
	return ended
}

// copyRange copies the source's bytes [start+done, end) into tmp at the
// same offsets, counting into done.
func (j *Job) copyRange(src, dst files.FS, tmp string, start, end int64, done *atomic.Int64, progress *counter, sent *atomic.Int64) error {
	from := start + done.Load()
	if from >= end {
		return nil
	}
	in, out, err := j.open(src, dst, tmp, false, &Result{Size: j.Size, ModTime: j.ModTime}, progress)
	if in != nil {
		defer func() { _ = in.Close() }()
	}
	if out != nil {
		defer func() { _ = out.Close() }()
	}
	if err != nil {
		return err
	}
	if _, err := in.Seek(from, io.SeekStart); err != nil {
		return fail(err, "reading the source file")
	}
	if _, err := out.Seek(from, io.SeekStart); err != nil {
		return fail(err, "writing the copy")
	}
	buf := newBuffer(rangeBufferChunks)
	readErr := make(chan error, 1)
	go func() {
		// WriteTo reads on to the file's end, with many reads in
		// flight: the range's end stops it, what it read past dropped.
		_, err := in.WriteTo(&limitWriter{w: buf, n: end - from})
		if errors.Is(err, errRangeFull) {
			err = nil
		}
		buf.CloseWithError(err)
		readErr <- err
	}()
	n, err := out.ReadFromWithConcurrency(io.TeeReader(buf, rangeCounter{progress, done}), copyConcurrency)
	if err != nil {
		// Reads go on for a moment after a write failed, counted but
		// never written: the range's progress is where the first failed
		// write began, the file's offset then, or the plan would record
		// bytes the copy lacks (and the next try start the range over).
		if at, serr := out.Seek(0, io.SeekCurrent); serr == nil && at-start < done.Load() {
			done.Store(max(at-start, 0))
		}
	}
	buf.Close()
	rerr := <-readErr
	sent.Add(n)
	switch {
	case rerr != nil && !errors.Is(rerr, io.ErrClosedPipe):
		return fail(rerr, "reading the source file")
	case err != nil:
		return fail(err, "writing the copy")
	}
	if err := out.Close(); err != nil {
		return fail(err, "writing the copy")
	}
	if from+n != end {
		return errChanged
	}
	return nil
}

// errRangeFull stops a range's read at its end.
var errRangeFull = errors.New("the range is read")

// limitWriter passes on the first n bytes written, then fails with
// errRangeFull.
type limitWriter struct {
	w io.Writer
	n int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errRangeFull
	}
	full := int64(len(p)) > l.n
	if full {
		p = p[:l.n]
	}
	k, err := l.w.Write(p)
	l.n -= int64(k)
	if err == nil && full {
		err = errRangeFull
	}
	return k, err
}

// rangeCounter counts a range's bytes into its done and the copy's
// counter.
type rangeCounter struct {
	c    *counter
	done *atomic.Int64
}

func (r rangeCounter) Write(p []byte) (int, error) {
	r.done.Add(int64(len(p)))
	return r.c.Write(p)
}
