package transfer

import (
	"io"
	"sync"
)

// bufferChunks and chunkSize make the buffer between a copy's reads and
// its writes: reads go on while the destination acknowledges writes, and
// writes while the source answers reads, rather than each waiting for the
// other at every chunk. A range's buffer holds rangeBufferChunks: an SSH
// channel's window (2 MiB in OpenSSH and x/crypto/ssh), so that over a
// long link the source's window of reads keeps arriving while the
// destination's window of writes waits for its acknowledgements.
const (
	bufferChunks      = 32
	rangeBufferChunks = 64
	chunkSize         = 32 << 10
)

var chunks = sync.Pool{New: func() any { b := make([]byte, chunkSize); return &b }}

// buffer is a pipe that holds up to a given number of chunks: the reading side
// of a copy writes into it, the writing side reads from it.
type buffer struct {
	ch   chan *[]byte
	done chan struct{}
	once sync.Once
	err  error // the writer's, once ch is closed
	cur  *[]byte
	off  int
}

func newBuffer(chunks int) *buffer {
	return &buffer{ch: make(chan *[]byte, chunks), done: make(chan struct{})}
}

// Write copies p into chunks; it fails once the reading side closed.
func (b *buffer) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		c := chunks.Get().(*[]byte)
		k := copy((*c)[:chunkSize], p)
		*c = (*c)[:k]
		select {
		case b.ch <- c:
		case <-b.done:
			return n, io.ErrClosedPipe
		}
		n, p = n+k, p[k:]
	}
	return n, nil
}

// CloseWithError ends the writing side: the reader gets err (io.EOF when
// nil) once it read what was written.
func (b *buffer) CloseWithError(err error) {
	if err == nil {
		err = io.EOF
	}
	b.err = err
	close(b.ch)
}

// Read reads what was written, then the writer's error.
func (b *buffer) Read(p []byte) (int, error) {
	if b.cur == nil {
		c, ok := <-b.ch
		if !ok {
			return 0, b.err
		}
		b.cur, b.off = c, 0
	}
	n := copy(p, (*b.cur)[b.off:])
	if b.off += n; b.off == len(*b.cur) {
		*b.cur = (*b.cur)[:chunkSize]
		chunks.Put(b.cur)
		b.cur = nil
	}
	return n, nil
}

// Close ends the reading side: a writer waiting for room stops.
func (b *buffer) Close() {
	b.once.Do(func() { close(b.done) })
}
