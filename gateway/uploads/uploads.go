// Package uploads is the gateway's resumable uploads: tus 1.0 at
// {base}/<slug>/uploads/ (core, creation, creation-with-upload,
// termination, expiration, and checksum with sha256), served by tusd's
// handler with a store of its own. The bytes gather on the SFTP server, in
// a partial file beside the target; each upload's record is a ConfigMap in
// sftpgate's namespace (package uploadrecord). The gateway holds nothing
// between requests, so any replica continues an upload another began, and
// a paused upload holds no memory.
//
// The gateway lets a request in first (its key or ServiceAccount, the
// write command's scope) and hands it here with a Request; an upload is
// its caller's alone.
package uploads

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tus/tusd/v2/pkg/handler"
	"github.com/tus/tusd/v2/pkg/memorylocker"
	expslog "golang.org/x/exp/slog"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/gateway/answer"
	"github.com/sftpgate/sftpgate/gateway/commands"
	"github.com/sftpgate/sftpgate/internal/pool"
	"github.com/sftpgate/sftpgate/internal/ratelimit"
	"github.com/sftpgate/sftpgate/internal/storedbytes"
	"github.com/sftpgate/sftpgate/internal/uploadrecord"
)

// Limits bound resumable uploads.
type Limits struct {
	// Expiry is how long after its creation an upload may go on; then the
	// worker removes its bytes.
	Expiry time.Duration
	// MaxPerNamespace bounds the uploads of one namespace's connections
	// that are under way.
	MaxPerNamespace int
	// MaxSize is the largest upload (Upload-Length).
	MaxSize int64
	// WritesPerNamespace is how many requests per second that write
	// upload records (every method but HEAD and OPTIONS) one namespace's
	// uploads may send to one replica, with bursts of WritesBurst; 0 is no
	// limit.
	WritesPerNamespace float64
	WritesBurst        int
}

// Defaults of the limits.
const (
	DefaultExpiry             = 24 * time.Hour
	DefaultMaxPerNamespace    = 1000
	DefaultWritesPerNamespace = 50
	DefaultWritesBurst        = 100
)

// MaxMetadataBytes bounds an upload's metadata as its record stores it
// (escaped: a control byte takes six).
const MaxMetadataBytes = 4 << 10

// Request is what the gateway knows of a request it let in, for the
// upload it serves.
type Request struct {
	// Conn is the connection written to, of the kind Kind names: "" for
	// an SftpConnection, else v1alpha1.KindFtpConnection (as the
	// record keeps it).
	Conn client.Object
	Kind string
	// Owner is the caller's UID (its API key's or ServiceAccount's).
	Owner types.UID
	Pool  *pool.Pool
	Env   *commands.Env
	// OpTimeout bounds one SFTP operation; StreamTimeout a part's bytes.
	OpTimeout, StreamTimeout time.Duration
	// ReadAhead reads a part's body ahead while it is written; done ends
	// it (failed: the write stopped before the body's end).
	ReadAhead func(body io.Reader) (r io.Reader, done func(failed bool))
	// Collection is the path of the connection's uploads/, which
	// Location headers name an upload below.
	Collection string

	// Checksum is the sum the part sent must have (Upload-Checksum).
	Checksum *commands.Checksum
	// failed is why the request failed, for the answer.
	failed error
	// expires is the upload's expiry, for Upload-Expires.
	expires time.Time
	// record is the upload's, read when the request was let in.
	record *uploadrecord.Record
	// readOnly says the request changes nothing (HEAD): it takes the
	// upload's hold only through holdNow, once it must write.
	readOnly bool
	holdNow  func(context.Context) error
	// mayEnd says the answer to this request tells the client an upload
	// whose bytes are all there is done: a HEAD, or a PATCH at the
	// upload's end. Any other (a PATCH at an offset the client kept from
	// before a lost answer, which tusd answers 409) leaves the upload for
	// the HEAD that follows, so that its record is not removed unseen.
	mayEnd bool
}

// hold takes the upload's hold for a request that began without it; a
// request that has it already does nothing.
func (req *Request) hold(ctx context.Context) error {
	if req.holdNow == nil {
		return nil
	}
	take := req.holdNow
	req.holdNow = nil
	return take(ctx)
}

type requestKey struct{}

func requestOf(ctx context.Context) *Request { return ctx.Value(requestKey{}).(*Request) }

// fail keeps err as the request's answer and gives tusd an error to stop
// with; the answer is written from err (Endpoint.Serve).
func (req *Request) fail(err error) error {
	req.failed = err
	return handler.NewError("ERR_SFTPGATE", err.Error(), http.StatusInternalServerError)
}

// Endpoint serves the tus protocol.
type Endpoint struct {
	tus   *handler.UnroutedHandler
	store *store
	// writes bounds the rate of requests that write records, per
	// namespace.
	writes *ratelimit.Keyed[string]
	// answer turns an error of the store into the API error it answers.
	answer func(error) error
	// log has the causes of 5xx answers (answer.Err).
	log *slog.Logger
}

// New is the endpoint, keeping records with records. answerError turns
// the commands' errors into the gateway's API errors; log (nil: nowhere)
// has the causes of 5xx answers.
func New(records *uploadrecord.Store, limits Limits, answerError func(error) error, log *slog.Logger) (*Endpoint, error) {
	composer := handler.NewStoreComposer()
	s := &store{records: records, limits: limits, now: time.Now}
	composer.UseCore(s)
	composer.UseTerminater(s)
	composer.UseLocker(&locker{records: records, memory: memorylocker.New()})
	tus, err := handler.NewUnroutedHandler(handler.Config{
		StoreComposer:        composer,
		MaxSize:              limits.MaxSize,
		BasePath:             "/",
		DisableDownload:      true,
		DisableConcatenation: true,
		// Same origin only, as every command of the gateway.
		Cors: &handler.CorsConfig{Disable: true},
		// Its lines say nothing the gateway's do not (answer.Err logs
		// every 5xx with its cause).
		Logger: expslog.New(expslog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, err
	}
	writes := ratelimit.New[string](limits.WritesPerNamespace, limits.WritesBurst)
	return &Endpoint{tus: tus, store: s, writes: writes, answer: answerError, log: log}, nil
}

// Options answers OPTIONS, tus's discovery, which needs no credentials.
func (e *Endpoint) Options(w http.ResponseWriter, r *http.Request) {
	e.serve(w, r, &Request{}, "")
}

// Serve serves one request the gateway let in, for the upload id ("" for
// the collection: a new upload).
func (e *Endpoint) Serve(w http.ResponseWriter, r *http.Request, req *Request, id string) {
	req.readOnly = r.Method == http.MethodHead
	if r.Method == http.MethodPatch || r.Method == http.MethodPost {
		sum, err := commands.ParseChecksum(r.Header.Get("Upload-Checksum"))
		if err != nil {
			answer.Err(e.log, w, r, e.answer(err))
			return
		}
		req.Checksum = sum
	}
	if id != "" {
		// Whose it is, before tusd locks it: another caller's request
		// must not even ask the owner's to stop.
		rec, err := e.store.find(r.Context(), req, id)
		if err != nil {
			answer.Err(e.log, w, r, e.answer(err))
			return
		}
		req.record = rec
		req.mayEnd = r.Method == http.MethodHead ||
			r.Method == http.MethodPatch && r.Header.Get("Upload-Offset") == strconv.FormatInt(rec.Size, 10)
	}
	// Requests that write records, of uploads that are the caller's (or a
	// new one), take of the namespace's rate.
	if writes := id == "" && r.Method == http.MethodPost || id != "" && (r.Method == http.MethodPatch || r.Method == http.MethodDelete); writes {
		if ok, delay := e.writes.Allow(req.Conn.GetNamespace()); !ok {
			answer.Err(e.log, w, r, answer.UploadWritesLimited(delay))
			return
		}
	}
	e.serve(w, r, req, id)
}

func (e *Endpoint) serve(w http.ResponseWriter, r *http.Request, req *Request, id string) {
	r = r.WithContext(context.WithValue(r.Context(), requestKey{}, req))
	u := *r.URL
	u.Path, u.RawPath = "/"+id, "" // tusd reads the id from the whole path
	r.URL = &u
	tw := &writer{ResponseWriter: w, r: r, req: req}
	e.tus.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && id == "":
			e.tus.PostFile(w, r)
		case r.Method == http.MethodHead && id != "":
			e.tus.HeadFile(w, r)
		case r.Method == http.MethodPatch && id != "":
			e.tus.PatchFile(w, r)
		case r.Method == http.MethodDelete && id != "":
			e.tus.DelFile(w, r)
		default:
			req.failed = answer.UploadMethodNotAllowed(allowed(id))
			w.WriteHeader(http.StatusMethodNotAllowed)
		}
	})).ServeHTTP(tw, r)
	tw.finish(e)
}

func allowed(id string) string {
	if id == "" {
		return "OPTIONS, POST"
	}
	return "OPTIONS, HEAD, PATCH, DELETE"
}

// writer adds what tusd's handler does not say (the checksum and
// expiration extensions, a Location that is a path) and answers every
// error as the gateway answers them: {"error": {...}}.
type writer struct {
	http.ResponseWriter
	r   *http.Request
	req *Request
	// status is an error's status, held back with its body for finish.
	status int
	body   bytes.Buffer
}

// Unwrap lets tusd's http.ResponseController reach the connection (its
// read deadlines).
func (w *writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *writer) WriteHeader(status int) {
	h := w.Header()
	if loc := h.Get("Location"); loc != "" {
		// A path, which a client resolves against the URL it sent. Also
		// on an error: an upload made whose first part failed goes on.
		if u, err := url.Parse(loc); err == nil {
			h.Set("Location", w.req.Collection+strings.TrimPrefix(u.Path, "/"))
		}
	}
	if status >= http.StatusBadRequest {
		w.status = status
		return
	}
	if w.r.Method == http.MethodOptions {
		h.Set("Tus-Extension", h.Get("Tus-Extension")+",expiration,checksum")
		h.Set("Tus-Checksum-Algorithm", "sha256,sha1")
	}
	if !w.req.expires.IsZero() {
		h.Set("Upload-Expires", w.req.expires.Format(http.TimeFormat))
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *writer) Write(b []byte) (int, error) {
	if w.status != 0 {
		if w.body.Len() < 4<<10 {
			w.body.Write(b)
		}
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// finish answers the error held back, if any: the store's, as the
// gateway says it, or tusd's own, in the same envelope.
func (w *writer) finish(e *Endpoint) {
	if w.status == 0 {
		return
	}
	err := w.req.failed
	if err != nil {
		err = e.answer(err)
	} else {
		err = tusError(w.status, w.body.String())
	}
	answer.Err(e.log, w.ResponseWriter, w.r, err)
}

// tusError is an error tusd answered (status, "ERR_CODE: message") in
// the gateway's words.
func tusError(status int, body string) error {
	code, message, ok := strings.Cut(strings.TrimSpace(body), ": ")
	if !ok {
		code, message = "", http.StatusText(status)
	}
	code = strings.ToLower(strings.TrimPrefix(code, "ERR_"))
	switch code {
	case "":
		code = strings.ToLower(strings.ReplaceAll(http.StatusText(status), " ", "_"))
	case "read_timeout", "connection_reset", "unexpected_eof", "upload_interrupted", "upload_stopped":
		// The client's body: what reached the server is kept.
		return answer.Protocol(http.StatusBadRequest, code, message)
	case "internal_server_error":
		return answer.Internal(errors.New(message))
	}
	return answer.Protocol(status, code, message)
}

// TooManyError is a new upload over the namespace's bound.
type TooManyError struct{ Limit int }

func (e *TooManyError) Error() string {
	return fmt.Sprintf("this namespace's connections have %d uploads under way, the most they may; finish or end some (DELETE), or wait for them to expire", e.Limit)
}

var errMetadataTooLarge = &commands.BadRequest{Field: "Upload-Metadata", Message: fmt.Sprintf("is larger than %d bytes", MaxMetadataBytes)}

// Answer is the API error of an error of the store's own making; others
// (nil) are the commands' and the gateway's to say.
func Answer(err error) *answer.Error {
	var tooMany *TooManyError
	switch {
	case errors.Is(err, uploadrecord.ErrNotFound):
		return answer.UploadNotFound()
	case errors.Is(err, errExpired):
		return answer.UploadExpired()
	case errors.Is(err, errRootChanged):
		return answer.UploadRootChanged()
	case errors.As(err, &tooMany):
		return answer.TooManyUploads(tooMany.Error())
	case errors.As(err, new(*storedbytes.ExceededError)):
		return answer.StateBudgetExceeded(err.Error())
	case errors.As(err, new(commands.ChecksumMismatch)):
		return answer.ChecksumMismatch(err.Error())
	case errors.Is(err, errBusy):
		return answer.UploadBusy()
	case errors.Is(err, commands.ErrOffsetMoved):
		return answer.MismatchedOffset(err.Error())
	}
	return nil
}
