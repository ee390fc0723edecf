package gw

import (
	"io"
	"net/http"
	"time"
)

// The UI's server bounds a whole request to a minute (Run), which a large
// file's download or an upload's part on a slow link outlasts. A stream
// may take as long as it keeps moving: each read of the request's body and
// each write of the answer moves the connection's deadlines on by
// streamIdle.
const streamIdle = time.Minute

// movingReader extends the read and write deadlines at each read.
type movingReader struct {
	io.ReadCloser
	rc *http.ResponseController
}

func (m movingReader) Read(p []byte) (int, error) {
	_ = m.rc.SetReadDeadline(time.Now().Add(streamIdle))
	_ = m.rc.SetWriteDeadline(time.Now().Add(2 * streamIdle))
	return m.ReadCloser.Read(p)
}

// movingWriter extends the write deadline at each write, and the read
// deadline too: net/http's background read of an idle request's
// connection would end the request at the read deadline.
type movingWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
}

func (m movingWriter) Write(p []byte) (int, error) {
	_ = m.rc.SetWriteDeadline(time.Now().Add(streamIdle))
	_ = m.rc.SetReadDeadline(time.Now().Add(streamIdle))
	return m.ResponseWriter.Write(p)
}

// streaming makes w and r's body move the deadlines on as they are used.
func streaming(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request) {
	rc := http.NewResponseController(w)
	r.Body = movingReader{ReadCloser: r.Body, rc: rc}
	return movingWriter{ResponseWriter: w, rc: rc}, r
}

// Unwrap lets http.ResponseController reach the connection (a proxy's
// flushes).
func (m movingWriter) Unwrap() http.ResponseWriter { return m.ResponseWriter }
