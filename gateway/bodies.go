package gateway

// What a request sends: its JSON body, or a file's bytes, read within the
// limits and held against the memory budget.

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/readahead"

	"github.com/sftpgate/sftpgate/gateway/answer"
	"github.com/sftpgate/sftpgate/gateway/budget"
	"github.com/sftpgate/sftpgate/gateway/pacing"
)

// pooledUpload is the largest raw upload read whole before it runs, to
// share the pool's sessions as a JSON write does; larger or unsized ones
// stream on a session of their own.
const pooledUpload = 1 << 20

// streamMemory is what a stream holds of the budget: the buffers of its
// read-ahead and of the SFTP requests it keeps in flight.
const streamMemory = 5 << 19

// decode reads what the request sends in the form it sends it, within
// the limits, holding what it reads against the memory budget.
func (h *handler) decode(w http.ResponseWriter, r *http.Request, req *request) error {
	contentType := r.Header.Get("Content-Type")
	mt := mediaType(contentType) // "" when it does not parse
	switch {
	case req.cmd.Upload != nil && mt == octetStream:
		req.form = upload
	case req.cmd.Download != nil && strings.Contains(r.Header.Get("Accept"), octetStream):
		req.form = download
	}
	var err error
	switch {
	case req.form == upload && r.ContentLength > h.limits.MaxUploadBytes:
		// Refused before the file is opened (and truncated).
		return answer.BodyTooLarge("upload", h.limits.MaxUploadBytes)
	case req.form == upload && r.ContentLength >= 0 && r.ContentLength <= pooledUpload:
		req.form = smallUpload
		req.body, err = readBody(w, r, pooledUpload, &req.memory, &req.pace)
	case req.form == upload:
	case contentType != "" && mt != "application/json":
		return answer.UnsupportedMediaType()
	default:
		req.body, err = readBody(w, r, h.limits.MaxBodyBytes, &req.memory, &req.pace)
	}
	if err == nil && (req.form == upload || req.form == download || req.cmd.Streams) {
		err = req.memory.Hold(streamMemory)
	}
	return memoryError(err)
}

const octetStream = "application/octet-stream"

// Read-ahead of uploads: this many buffers of one SFTP write each.
const (
	readAheadBuffers = 8
	readAheadSize    = 32 << 10
)

// readAhead reads a large upload's body in the background while the parts
// before go to the server, so that reading the client's socket and sending
// over SSH overlap: pkg/sftp reads and sends in one goroutine, which left
// uploads well behind a direct client (docs/benchmarks.md). done ends the
// read-ahead; failed says the upload stopped before the body ended, so
// that a read waiting on the client is cut short.
func readAhead(w http.ResponseWriter, r *http.Request, body io.Reader) (io.Reader, func(failed bool)) {
	if r.ContentLength >= 0 && r.ContentLength <= readAheadSize {
		return body, func(bool) {}
	}
	ahead, err := readahead.NewReaderSize(body, readAheadBuffers, readAheadSize)
	if err != nil { // only for sizes out of range
		return body, func(bool) {}
	}
	return ahead, func(failed bool) {
		if failed {
			// A read cut by a deadline cancels the context of the HTTP
			// connection in net/http, and so of every later request on it
			// (golang/go#70834): the connection closes after this answer.
			w.Header().Set("Connection", "close")
			_ = http.NewResponseController(w).SetReadDeadline(time.Now())
		}
		_ = ahead.Close() // waits for the background read to end
	}
}

func mediaType(contentType string) string {
	if contentType == "application/json" {
		return contentType // as most requests send it, without a parse's map
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt
}

// presizeBody is the most readBody allocates before a body of unknown
// length arrives.
const presizeBody = 64 << 10

// readBody reads a request body within limit, holding it against the
// memory budget before it is read: all of it for a body of known length,
// and as the buffer grows for one of unknown length. A JSON write's content
// is unquoted in the body itself, so it needs no more. A large body is
// read paced.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, memory *budget.Ledger, pace *pacing.Stream) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, answer.BodyTooLarge("request body", limit)
	}
	// A body of known length is read to its end and no further, within
	// the limit; a small one is not paced.
	var body io.Reader = r.Body
	if r.ContentLength < 0 || r.ContentLength > budget.SmallHold {
		body = pace.Reader(http.MaxBytesReader(w, r.Body, limit), budget.SmallHold)
	}
	var buf []byte
	var err error
	if r.ContentLength >= 0 {
		if err := memory.Hold(r.ContentLength); err != nil {
			return nil, err
		}
		buf = make([]byte, r.ContentLength)
		_, err = io.ReadFull(body, buf)
	} else {
		buf, err = readGrowing(body, memory)
	}
	if err == nil {
		return buf, nil
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, answer.BodyTooLarge("request body", limit)
	case errors.Is(err, budget.ErrBusy), errors.Is(err, context.Canceled):
		return nil, err
	}
	return nil, answer.InvalidRequest("cannot read the request body", "body")
}

// readGrowing reads a body of unknown length, holding each growth of its
// buffer before it is made.
func readGrowing(body io.Reader, memory *budget.Ledger) ([]byte, error) {
	buf := make([]byte, 0, presizeBody)
	if err := memory.Hold(presizeBody); err != nil {
		return nil, err
	}
	for {
		if len(buf) == cap(buf) {
			more := cap(buf)
			if err := memory.Hold(int64(more)); err != nil {
				return nil, err
			}
			buf = slices.Grow(buf, more)
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// memoryError answers an error of the memory budget's; it passes others.
func memoryError(err error) error {
	if err == nil {
		return nil
	}
	var tooLarge *budget.TooLargeError
	switch {
	case errors.As(err, &tooLarge):
		return answer.BodyTooLarge("request body, with what the gateway makes of it,", tooLarge.Budget)
	case err != nil:
		if answered := waitError(err); answered != nil {
			return answered
		}
	}
	return err
}
