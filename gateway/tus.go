package gateway

// Resumable uploads at {base}/<slug>/uploads/ (tus 1.0, package uploads):
// each request is let in as a write is (the caller's key or ServiceAccount,
// its rate and bounds, the write command's scope and paths), then served
// by the uploads endpoint on the connection's pool.

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sftpgate/sftpgate/gateway/answer"
	"github.com/sftpgate/sftpgate/gateway/commands"
	"github.com/sftpgate/sftpgate/gateway/uploads"
	"github.com/sftpgate/sftpgate/internal/uploadrecord"
)

// uploadsCommand names resumable uploads in metrics and logs.
const uploadsCommand = "uploads"

func (h *handler) serveUploads(w http.ResponseWriter, r *http.Request) {
	slug, id := chi.URLParam(r, "slug"), chi.URLParam(r, "id")
	x := exchangeOf(r)
	h.observe(x, w, slug, uploadsCommand)
	defer h.end(x, r)
	x.log.command = uploadsCommand
	ww := &x.w
	ww.Header().Set("Tus-Resumable", "1.0.0") // on every answer, as tus asks
	if r.Method == http.MethodOptions {
		h.uploads.Options(ww, r) // discovery needs no credentials
		return
	}
	h.begin(x, r)
	defer h.done(&x.req)
	if err := h.serveUpload(ww, r, &x.req, slug, id, &x.log); err != nil {
		x.log.result = answer.CodeOf(err)
		answer.Err(h.log, ww, r, err)
	}
}

// serveUpload lets one request of an upload in, and has it served.
func (h *handler) serveUpload(w http.ResponseWriter, r *http.Request, req *request, slug, id string, rec *requestLog) error {
	req.cmd, _ = commands.Lookup("write")
	var err error
	if req.conn, req.who, err = h.authenticate(r, slug, req.cmd, rec); err != nil {
		return err
	}
	rec.namespace, rec.connection, rec.bytes = req.conn.GetNamespace(), req.conn.ref(), max(r.ContentLength, 0)
	if id != "" {
		rec.object = "upload/" + id
	}
	if p := uploadrecord.RequestedPath(r); p != "" {
		rec.paths = []string{p}
	}
	if err := h.admit(req.conn, req.who); err != nil {
		return err
	}
	defer h.leave(req.who)
	if r.Method == http.MethodPatch || (r.Method == http.MethodPost && r.Header.Get("Content-Type") == "application/offset+octet-stream") {
		// A part streams, as a raw upload does.
		req.form = upload
		if err := req.memory.Hold(streamMemory); err != nil {
			return memoryError(err)
		}
	}
	req.ran = true
	p, err := h.pools.Get(context.WithoutCancel(r.Context()), req.conn.kind.dialer, req.conn.endpoint)
	if err != nil {
		return h.runError(err)
	}
	collection := strings.TrimSuffix(r.URL.Path, id)
	if !strings.HasSuffix(collection, "/") {
		collection += "/"
	}
	h.uploads.Serve(w, r, &uploads.Request{
		Conn: req.conn.endpoint, Kind: req.conn.recordKind(), Owner: req.who.uid, Pool: p, Env: req.env(p),
		OpTimeout:     opTimeout(req.conn),
		StreamTimeout: h.streamTimeout(),
		ReadAhead:     func(body io.Reader) (io.Reader, func(bool)) { return readAhead(w, r, body) },
		Collection:    collection,
	}, id)
	return nil
}

// uploadError answers an error of an upload: the endpoint's own, the SFTP
// server's refusal (with the status it means, since tus has no envelope),
// or as for a command.
func (h *handler) uploadError(err error) error {
	if answered, ok := errors.AsType[*answer.Error](err); ok {
		return answered
	}
	if answered := uploads.Answer(err); answered != nil {
		return answered
	}
	if failure, ok := errors.AsType[*commands.Failure](err); ok {
		return answer.Refused(failure)
	}
	if _, ok := errors.AsType[*uploadrecord.APIError](err); ok {
		return answer.RecordsUnavailable(err)
	}
	return h.runError(err)
}

// opTimeout is e's operation timeout.
func opTimeout(e endpoint) time.Duration {
	_, _, op := e.SessionLimits()
	return op
}
