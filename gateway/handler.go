package gateway

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/klauspost/readahead"
	"github.com/pkg/sftp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/gateway/answer"
	"github.com/sftpgate/sftpgate/gateway/budget"
	"github.com/sftpgate/sftpgate/gateway/commands"
	"github.com/sftpgate/sftpgate/gateway/keyauth"
	"github.com/sftpgate/sftpgate/gateway/kubeauth"
	"github.com/sftpgate/sftpgate/gateway/lastuse"
	"github.com/sftpgate/sftpgate/gateway/metrics"
	"github.com/sftpgate/sftpgate/gateway/pacing"
	"github.com/sftpgate/sftpgate/gateway/pool"
	"github.com/sftpgate/sftpgate/internal/cacheindex"
	"github.com/sftpgate/sftpgate/internal/ratelimit"
	"github.com/sftpgate/sftpgate/internal/sftpdial"
)

// indexServedSlug is the gateway's cache index of SftpConnections by
// status.slug: only the connection that holds a slug is served under it.
const indexServedSlug = "sftpgate.dev/served-slug"

func servedSlug(conn *v1alpha1.SftpConnection) []string {
	if slug := conn.Status.Slug; slug != "" {
		return []string{slug}
	}
	return nil
}

// handler serves POST {base}/<slug>/<command>.
type handler struct {
	bySlug     *cacheindex.Index[*v1alpha1.SftpConnection]
	authorizer *keyauth.Authorizer
	pools      *pool.Pools
	limits     Limits
	limiter    *ratelimit.Keyed[types.UID]
	memory     *budget.Budget
	pacer      *pacing.Pacer
	// reviewer verifies ServiceAccount tokens; nil refuses them.
	reviewer *kubeauth.Reviewer
	// lastUse records when keys were last used; nil does not.
	lastUse *lastuse.Recorder
	metrics *metrics.Metrics
	// Requests in flight, per key and per namespace.
	perKey       *ratelimit.InFlight[types.UID]
	perNamespace *ratelimit.InFlight[string]
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	slug, name := chi.URLParam(r, "slug"), chi.URLParam(r, "command")
	rec := &requestLog{command: "unknown"} // metric labels stay bounded
	ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
	defer func() {
		end := time.Now()
		h.metrics.Requests.WithLabelValues(rec.command, strconv.Itoa(ww.Status())).Inc()
		h.metrics.Duration.WithLabelValues(rec.command).Observe(end.Sub(start).Seconds())
		// Straight to the handler: Logger.LogAttrs would also look up the
		// caller (runtime.Callers), which the line does not show.
		ctx, logHandler := r.Context(), slog.Default().Handler()
		if !logHandler.Enabled(ctx, slog.LevelInfo) {
			return
		}
		line := slog.NewRecord(end, slog.LevelInfo, "request", 0)
		line.AddAttrs(
			slog.String("requestID", middleware.GetReqID(ctx)),
			slog.String("keyID", rec.keyID),
			slog.String("slug", slug),
			slog.String("command", name),
			slog.Int("status", ww.Status()),
			slog.Int("bytes", ww.BytesWritten()),
			slog.Duration("duration", end.Sub(start)))
		if rec.serviceAccount != "" {
			line.AddAttrs(slog.String("serviceAccount", rec.serviceAccount))
		}
		_ = logHandler.Handle(ctx, line)
	}()
	// Released once the answer has been sent: what it held is garbage then.
	memory := h.memory.Ledger(r.Context())
	defer memory.Release()
	if err := h.serve(ww, r, slug, name, rec, &memory); err != nil {
		answer.Err(ww, r, err)
	}
}

// requestLog collects what the request's log line and metrics say beyond
// the request itself.
type requestLog struct {
	command string // a known command's name
	keyID   string
	// serviceAccount is the caller's ServiceAccount, namespace/name, when
	// it sent a ServiceAccount token rather than a key.
	serviceAccount string
}

// caller is who sent a request, for the bounds on requests: an API key,
// or a ServiceAccount.
type caller struct {
	uid       types.UID
	namespace string
	// whose names it in answers: "this API key's", "this ServiceAccount's".
	whose string
	// paths are where the caller may go below the connection's root (an
	// API key's spec.paths); none is anywhere.
	paths []string
}

// serve runs one command in named steps; each returns the error that
// answers the request when it cannot go on.
func (h *handler) serve(w http.ResponseWriter, r *http.Request, slug, name string, rec *requestLog, memory *budget.Ledger) error {
	cmd, err := lookup(r, name, rec)
	if err != nil {
		return err
	}
	conn, who, err := h.authenticate(r, slug, cmd, rec)
	if err != nil {
		return err
	}
	if err := h.admit(conn, who); err != nil {
		return err
	}
	defer h.leave(who)
	c, err := h.decode(w, r, cmd, memory)
	if err != nil {
		return err
	}
	c.paths = who.paths
	defer h.paced(c)
	result, streamed, err := h.run(w, r, conn, c)
	if streamed {
		// The answer is sent; a failure halfway shows as a short body.
		return nil
	}
	return h.answer(w, name, result, err)
}

// paced ends the call's pacing once its answer has been sent: a large
// transfer's last chunk is charged; a small request's end is noted, for
// large transfers to yield to.
func (h *handler) paced(c call) {
	c.pace.End()
	if !c.large() {
		h.pacer.SmallDone()
	}
}

// lookup finds the command a request names.
func lookup(r *http.Request, name string, rec *requestLog) (commands.Command, error) {
	cmd, known := commands.Lookup(name)
	if known {
		rec.command = name
	}
	switch {
	case r.Method != http.MethodPost:
		return cmd, answer.MethodNotAllowed()
	case !known:
		return cmd, answer.UnknownCommand(name)
	}
	return cmd, nil
}

// authenticate finds the connection serving slug and the caller that may
// run cmd on it: the API key of the token, or, for a token that is no
// key's and has a JWT's shape, the ServiceAccount it is for, as RBAC
// allows it. A key's token is never sent for review.
func (h *handler) authenticate(r *http.Request, slug string, cmd commands.Command, rec *requestLog) (*v1alpha1.SftpConnection, caller, error) {
	token, ok := bearerToken(r)
	if !ok {
		return nil, caller{}, answer.Unauthorized("send an API key or a ServiceAccount token: Authorization: Bearer <token>")
	}
	conns, err := h.bySlug.Get(slug)
	if err != nil {
		return nil, caller{}, err
	}
	var conn *v1alpha1.SftpConnection
	if len(conns) == 1 {
		conn = conns[0]
	}
	key, err := h.authorizer.Authorize(token, conn, cmd.Name)
	if errors.Is(err, keyauth.ErrUnknownToken) && h.reviewer != nil && kubeauth.IsJWT(token) {
		return h.authenticateServiceAccount(r, token, slug, conns, cmd, rec)
	}
	if key != nil {
		rec.keyID = key.Status.KeyID
	}
	if errors.Is(err, keyauth.ErrNoSuchConnection) && len(conns) > 1 {
		// Two connections claim the slug for a moment while one hands it
		// to another.
		return nil, caller{}, slugHandover()
	}
	if err != nil {
		return nil, caller{}, authError(err)
	}
	h.lastUse.Used(key)
	return conn, caller{uid: key.UID, namespace: key.Namespace, whose: "this API key's", paths: key.Spec.Paths}, nil
}

// slugHandover answers a slug that no connection serves for a moment,
// while one hands it to another.
func slugHandover() error {
	return answer.ConnectionNotReady("the slug is being handed from one connection to another; retry", nil)
}

// authenticateServiceAccount verifies a ServiceAccount token and asks
// RBAC whether its ServiceAccount may run cmd on the connection that
// conns, those claiming slug, agree on. As for keys, a connection of
// another namespace that it may not use looks the same as none: by the
// answer, and by its cost, since a slug no connection serves costs the
// same review, of the slug's name in the ServiceAccount's own namespace.
func (h *handler) authenticateServiceAccount(r *http.Request, token, slug string, conns []*v1alpha1.SftpConnection,
	cmd commands.Command, rec *requestLog) (*v1alpha1.SftpConnection, caller, error) {
	address := clientAddress(r)
	id, err := h.reviewer.Authenticate(r.Context(), token, address)
	if err != nil {
		return nil, caller{}, reviewError(err)
	}
	rec.serviceAccount = id.String()
	var conn *v1alpha1.SftpConnection
	target := kubeauth.Target{Namespace: id.Namespace, Name: slug}
	switch {
	case len(conns) == 1:
		conn = conns[0]
		target = kubeauth.Target{Namespace: conn.Namespace, Name: conn.Name}
	case slices.ContainsFunc(conns, func(c *v1alpha1.SftpConnection) bool { return c.Namespace == id.Namespace }):
		return nil, caller{}, slugHandover()
	}
	err = h.reviewer.Authorize(r.Context(), id, target, cmd.Name, address)
	switch {
	case conn == nil && (err == nil || errors.Is(err, kubeauth.ErrDenied)),
		errors.Is(err, kubeauth.ErrDenied) && id.Namespace != conn.Namespace:
		return nil, caller{}, answer.ConnectionNotFound()
	case err != nil:
		return nil, caller{}, reviewError(err)
	}
	return conn, caller{uid: id.UID, namespace: id.Namespace, whose: "this ServiceAccount's"}, nil
}

// clientAddress is the address a request came from, without its port:
// where ServiceAccount reviews are charged.
func clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// admit lets the request in if the connection is ready and its caller is
// within its rate and, with its namespace, within the bounds on requests
// in flight. Once admitted, leave counts it out.
func (h *handler) admit(conn *v1alpha1.SftpConnection, who caller) error {
	if ok, delay := h.limiter.Allow(who.uid); !ok {
		return answer.RateLimited(delay)
	}
	if err := ready(conn); err != nil {
		return err
	}
	if !h.perKey.Enter(who.uid) {
		return answer.TooManyInFlight(who.whose, h.perKey.Limit())
	}
	if !h.perNamespace.Enter(who.namespace) {
		h.perKey.Leave(who.uid)
		return answer.TooManyInFlight("this namespace's", h.perNamespace.Limit())
	}
	return nil
}

func (h *handler) leave(who caller) {
	h.perNamespace.Leave(who.namespace)
	h.perKey.Leave(who.uid)
}

// call is a command as the client sent it: a JSON body, a raw upload
// (read as the command runs, or a small one read before, rawBody), or a
// raw download.
type call struct {
	cmd      commands.Command
	upload   bool
	rawBody  bool
	download bool
	body     []byte
	memory   *budget.Ledger
	pace     *pacing.Stream
	paths    []string // the caller's, from caller
}

// large says the call moves more than a small request: a stream, or what
// holds more than a small hold of the memory budget.
func (c call) large() bool {
	return c.upload || c.download || c.cmd.Streams || c.memory.Held() > budget.SmallHold
}

// pooledUpload is the largest raw upload read whole before it runs, to
// share the pool's sessions as a JSON write does; larger or unsized ones
// stream on a session of their own.
const pooledUpload = 1 << 20

// streamMemory is what a stream holds of the budget: the buffers of its
// read-ahead and of the SFTP requests it keeps in flight.
const streamMemory = 5 << 19

// decode reads what the request asks for, within the limits, holding
// what it reads against the memory budget.
func (h *handler) decode(w http.ResponseWriter, r *http.Request, cmd commands.Command, memory *budget.Ledger) (call, error) {
	contentType := r.Header.Get("Content-Type")
	mt := mediaType(contentType) // "" when it does not parse
	writes := cmd.Name == v1alpha1.CommandWrite || cmd.Name == v1alpha1.CommandAppend
	pace := h.pacer.Stream(r.Context())
	c := call{
		cmd:      cmd,
		upload:   writes && mt == octetStream,
		download: cmd.Name == v1alpha1.CommandRead && strings.Contains(r.Header.Get("Accept"), octetStream),
		memory:   memory,
		pace:     &pace,
	}
	var err error
	switch {
	case c.upload && r.ContentLength > h.limits.MaxUploadBytes:
		// Refused before the file is opened (and truncated).
		return c, answer.BodyTooLarge("upload", h.limits.MaxUploadBytes)
	case c.upload && r.ContentLength >= 0 && r.ContentLength <= pooledUpload:
		c.upload, c.rawBody = false, true
		c.body, err = readBody(w, r, pooledUpload, memory, c.pace)
	case c.upload:
	case contentType != "" && mt != "application/json":
		return c, answer.UnsupportedMediaType()
	default:
		c.body, err = readBody(w, r, h.limits.MaxBodyBytes, memory, c.pace)
	}
	if err == nil && (c.upload || c.download || cmd.Streams) {
		err = memory.Hold(streamMemory)
	}
	return c, memoryError(err)
}

// run runs the call on a session of conn's pool. It reports whether it
// sent the answer itself (a download).
func (h *handler) run(w http.ResponseWriter, r *http.Request, conn *v1alpha1.SftpConnection, c call) (result any, streamed bool, err error) {
	// A client that goes away does not cut the pool's building short (the
	// requests waiting for the same pool would get its failure), nor an
	// operation: the session it runs on is shared, and closing it would
	// fail the others.
	p, err := h.pools.Get(context.WithoutCancel(r.Context()), conn)
	if err != nil {
		return nil, false, err
	}
	// A stream may take as long as the request may, and a minute more, so
	// that a slow client's own timeout (which fails only its request) ends
	// it first: this one closes the session, for a server that hangs.
	stream := c.upload || c.download || c.cmd.Streams
	timeout := conn.Spec.Limits.OperationTimeoutOrDefault()
	if stream {
		timeout = h.limits.RequestTimeout + time.Minute
	}
	op := pool.Op{Idempotent: c.cmd.Idempotent && !c.upload && !c.download, Stream: stream, Timeout: timeout}
	// The request's context ends a wait for a session when the client goes
	// away, and the commands that read or copy whole files or directories
	// at their next chunk; another operation, once started, runs to its end.
	err = p.Do(r.Context(), op, func(s *sftpdial.Session) error {
		fs := commands.NewFS(s, conn.Status.RootPath)
		fs.Scope = commands.Scope(conn.Status.RootPath, c.paths)
		fs.Leftovers = p
		fs.Memory = c.memory
		fs.Ctx = r.Context()
		fs.Pace = c.pace
		var runErr error
		switch {
		case c.rawBody:
			result, runErr = commands.WriteBytes(fs, c.cmd.Name == v1alpha1.CommandAppend, r.URL.Query(), c.body)
		case c.upload:
			body, done := readAhead(w, r, http.MaxBytesReader(w, r.Body, h.limits.MaxUploadBytes))
			result, runErr = commands.WriteStream(fs, c.cmd.Name == v1alpha1.CommandAppend, r.URL.Query(), body, r.ContentLength)
			done(runErr != nil)
		case c.download:
			streamed, runErr = serveFile(w, r, fs, c.body)
		default:
			result, runErr = c.cmd.Run(fs, c.body)
		}
		return brokenIfSo(runErr)
	})
	return result, streamed, err
}

// answer sends the command's envelope: its result, or the failure the
// SFTP server answered; any other error answers the request instead.
func (h *handler) answer(w http.ResponseWriter, name string, result any, err error) error {
	var failure *commands.Failure
	switch {
	case err == nil:
		answer.Command(w, name, result, nil)
	case errors.As(err, &failure):
		answer.Command(w, name, nil, failure)
	default:
		return h.runError(err)
	}
	return nil
}

// brokenIfSo marks an error that says the session broke for the pool.
func brokenIfSo(err error) error {
	if commands.SessionFailed(err) {
		return &pool.BrokenError{Err: err}
	}
	return err
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
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt
}

// serveFile answers a raw read with the file's bytes, honouring Range and
// conditional headers; it reports whether it sent the answer.
func serveFile(w http.ResponseWriter, r *http.Request, fs *commands.FS, body []byte) (bool, error) {
	p, err := commands.ReadStreamPath(body)
	if err != nil {
		return false, err
	}
	f, fi, err := commands.OpenRead(fs, p)
	if err != nil {
		return false, err
	}
	defer func() { _ = f.Close() }()
	w.Header().Set("Content-Type", octetStream)
	if conditional(r) {
		src := &recordingFile{File: f}
		http.ServeContent(w, r, "", fi.ModTime(), src)
		return true, src.err
	}
	// The whole file: File.WriteTo reads ahead with many requests in
	// flight, where ServeContent would read 32 KiB at a time.
	w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	w.Header().Set("Last-Modified", fi.ModTime().UTC().Format(http.TimeFormat))
	w.Header().Set("Accept-Ranges", "bytes")
	w.WriteHeader(http.StatusOK)
	n, err := f.WriteTo(fs.Pace.Writer(w))
	// The answer has gone out; an error of the session still takes the
	// session out of the pool (one of the client's is not the session's),
	// and so does one that ended the file early: the client sees a body
	// shorter than its Content-Length.
	if err == nil && n < fi.Size() {
		err = commands.ConfirmEnd(f, n)
	}
	if commands.SessionFailed(err) {
		return true, err
	}
	return true, nil
}

// recordingFile keeps the first error of the session while
// http.ServeContent, which swallows it, reads the file.
type recordingFile struct {
	*sftp.File
	err error
}

func (f *recordingFile) Read(b []byte) (int, error) {
	n, err := f.File.Read(b)
	if f.err == nil && commands.SessionFailed(err) && err != io.EOF { //nolint:errorlint // io.EOF as returned by Read
		f.err = err
	}
	return n, err
}

func (f *recordingFile) Seek(offset int64, whence int) (int64, error) {
	n, err := f.File.Seek(offset, whence)
	if f.err == nil && commands.SessionFailed(err) {
		f.err = err
	}
	return n, err
}

// conditional reports whether a request asks for a part of a file or
// depends on its state, which http.ServeContent answers.
func conditional(r *http.Request) bool {
	for _, h := range []string{"Range", "If-Range", "If-Modified-Since", "If-Unmodified-Since", "If-Match", "If-None-Match"} {
		if r.Header.Get(h) != "" {
			return true
		}
	}
	return false
}

func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
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
	body := pace.Reader(http.MaxBytesReader(w, r.Body, limit), budget.SmallHold)
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
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, answer.BodyTooLarge("request body", limit)
	case errors.Is(err, budget.ErrBusy), errors.Is(err, context.Canceled):
		return nil, err
	case err != nil:
		return nil, answer.InvalidRequest("cannot read the request body", "body")
	}
	return buf, nil
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
