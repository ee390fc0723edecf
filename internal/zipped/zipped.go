// Package zipped gzips what sftpgate stores (a watch's state, a
// transfer's plan) with writers, readers and buffers kept for the next
// use: a gzip writer holds most of a megabyte of window and tables, and
// making one per save was most of the worker's garbage at thousands of
// watches.
package zipped

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"sync"
)

// Level is what Zip compresses at. gzip's default level stores the same
// bytes as its best, within a few parts in ten thousand either way (the
// states of 1 to 100,000 files of worker/watch's BenchmarkState), in a
// quarter of the time; BestSpeed would store up to 16% more, which would
// count against the tenants' budgets.
const Level = gzip.DefaultCompression

// keepAtMost bounds the buffers kept for reuse: a rare large state's is
// left to the garbage collector rather than held.
const keepAtMost = 1 << 20

type zipper struct {
	out bytes.Buffer
	zw  *gzip.Writer
	// bw gathers the encoders' small writes before the compressor.
	bw *bufio.Writer
}

var zippers = sync.Pool{New: func() any {
	z := &zipper{}
	z.zw, _ = gzip.NewWriterLevel(&z.out, Level) // a valid level
	z.bw = bufio.NewWriter(z.zw)
	return z
}}

// Zip is what write writes, gzipped: a gzip stream as any gzip reader
// reads, whatever the level it was written at.
func Zip(write func(w *bufio.Writer) error) ([]byte, error) {
	z := zippers.Get().(*zipper)
	defer func() {
		if z.out.Cap() <= keepAtMost {
			z.out.Reset()
			zippers.Put(z)
		}
	}()
	z.zw.Reset(&z.out)
	z.bw.Reset(z.zw)
	if err := write(z.bw); err != nil {
		return nil, err
	}
	if err := z.bw.Flush(); err != nil {
		return nil, err
	}
	if err := z.zw.Close(); err != nil {
		return nil, err
	}
	return bytes.Clone(z.out.Bytes()), nil
}

type unzipper struct {
	in  bytes.Reader
	zr  *gzip.Reader // nil until the first use: making one reads a header
	raw bytes.Buffer
}

var unzippers = sync.Pool{New: func() any { return &unzipper{} }}

// Unzip unzips b and hands what it holds to read, which must not keep it
// (it is reused): copy out what is kept. More than limit bytes unzipped
// is an error, so that a corrupt or hostile blob cannot take the memory.
func Unzip(b []byte, limit int64, read func(raw []byte) error) error {
	u := unzippers.Get().(*unzipper)
	defer func() {
		if u.raw.Cap() <= keepAtMost {
			u.raw.Reset()
			u.in.Reset(nil)
			unzippers.Put(u)
		}
	}()
	u.in.Reset(b)
	var err error
	if u.zr == nil {
		u.zr, err = gzip.NewReader(&u.in)
	} else {
		err = u.zr.Reset(&u.in)
	}
	if err != nil {
		return err
	}
	if _, err := u.raw.ReadFrom(io.LimitReader(u.zr, limit+1)); err != nil {
		return err
	}
	if int64(u.raw.Len()) > limit {
		return fmt.Errorf("unzips to more than %d bytes", limit)
	}
	return read(u.raw.Bytes())
}
