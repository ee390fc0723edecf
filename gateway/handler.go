package gateway

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/go-json-experiment/json/jsontext"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sftpgate/sftpgate/gateway/answer"
	"github.com/sftpgate/sftpgate/gateway/budget"
	"github.com/sftpgate/sftpgate/gateway/commands"
	"github.com/sftpgate/sftpgate/gateway/keyauth"
	"github.com/sftpgate/sftpgate/gateway/kubeauth"
	"github.com/sftpgate/sftpgate/gateway/lastuse"
	"github.com/sftpgate/sftpgate/gateway/metrics"
	"github.com/sftpgate/sftpgate/gateway/pacing"
	"github.com/sftpgate/sftpgate/gateway/uploads"
	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/pool"
	"github.com/sftpgate/sftpgate/internal/ratelimit"
	"github.com/sftpgate/sftpgate/internal/tracing"
)

// handler serves POST {base}/<slug>/<command>.
type handler struct {
	endpoints  endpoints
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
	// requestMetrics are each command's children of the request metrics
	// (and "unknown"'s and uploads'), resolved once.
	requestMetrics map[string]*metrics.Request
	// Requests in flight, per key and per namespace.
	perKey       *ratelimit.InFlight[types.UID]
	perNamespace *ratelimit.InFlight[string]
	// uploads serves resumable uploads.
	uploads *uploads.Endpoint
	// log has a line per request, and the causes of 5xx answers.
	log *slog.Logger
	// audit records the requests that reached a connection.
	audit *audit.Trail

	// without is the layers the layer benchmark leaves out
	// (BenchmarkWriteLayers); a gateway leaves out none. With the key
	// lookup left out, requests go to bench's connection as its caller,
	// and with the routing, to its slug and command.
	without layer
	bench   benchTarget
	// tracer makes the requests' spans and their operations'; nil makes
	// none (tracing off).
	tracer trace.Tracer
}

// layer is one of the gateway's own layers around a command's SFTP steps
// (decode, run on a pooled session, answer), in the order the layer
// benchmark adds them.
type layer uint16

const (
	// layerRequestID: the request's id, in its context.
	layerRequestID layer = 1 << iota
	// layerRouting: the route to the command, the refusal of a method
	// override, and the recovery of panics.
	layerRouting
	// layerKeys: the caller's key, and the connection its slug names.
	layerKeys
	// layerLimits: the rate and requests in flight of the caller and its
	// namespace, the connection's readiness, the memory budget, pacing.
	layerLimits
	layerMetrics
	layerAudit
	layerLogLine
)

// benchTarget is where the layer benchmark's requests go without the
// layers that would find it.
type benchTarget struct {
	slug, command string
	conn          *served
	who           caller
}

// exchange is one request's state from the gateway's front on, made in
// one allocation: its context, which carries its id; the writer that
// counts what it answered; what its log line, metrics and audit record
// say; and, for a command or an upload, its scope. Each of these was an
// allocation of its own, and the id a context of its own, on every
// request (docs/benchmarks.md, "The gateway's own layers").
type exchange struct {
	// Context is the request's own, which the exchange extends with the
	// id (under chi's middleware.RequestIDKey) and itself.
	context.Context
	id    string
	w     answerWriter
	start time.Time
	// slug and name are what the request's path names: the connection's
	// slug, and the command.
	slug, name string
	log        requestLog
	req        request
}

type exchangeKey struct{}

// Value is the request id (for middleware.GetReqID), the exchange itself
// (exchangeOf), or what the request's context holds.
func (x *exchange) Value(key any) any {
	switch key {
	case exchangeKey{}:
		return x
	case middleware.RequestIDKey:
		return x.id
	}
	return x.Context.Value(key)
}

// exchangeOf is the exchange of r, which the front made; one made here
// for a request that came another way keeps its id.
func exchangeOf(r *http.Request) *exchange {
	if x, ok := r.Context().Value(exchangeKey{}).(*exchange); ok {
		return x
	}
	return &exchange{Context: r.Context(), id: middleware.GetReqID(r.Context())}
}

// answerWriter passes a request's answer on, noting its status and the
// bytes of its body, as chi's middleware.WrapResponseWriter does, for the
// log line, metrics and audit record.
type answerWriter struct {
	http.ResponseWriter
	status, bytes int
}

// WriteHeader passes informational statuses on, and the first other.
func (w *answerWriter) WriteHeader(code int) {
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	if w.status == 0 {
		w.status = code
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *answerWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += n
	return n, err
}

// ReadFrom uses the ResponseWriter's own ReadFrom where it has one.
func (w *answerWriter) ReadFrom(r io.Reader) (int64, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	rf, ok := w.ResponseWriter.(io.ReaderFrom)
	if !ok {
		return io.Copy(struct{ io.Writer }{w}, r)
	}
	n, err := rf.ReadFrom(r)
	w.bytes += int(n)
	return n, err
}

// FlushError flushes what was written, as http.ResponseController does.
func (w *answerWriter) FlushError() error {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Flush is FlushError, for code that asks for an http.Flusher.
func (w *answerWriter) Flush() { _ = w.FlushError() }

// Unwrap is for http.ResponseController.
func (w *answerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ServeHTTP serves a command chi routed (the front routes most itself).
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.serveCommand(exchangeOf(r), w, r, chi.URLParam(r, "slug"), chi.URLParam(r, "command"))
}

// serveCommand serves the command name on the connection of slug.
func (h *handler) serveCommand(x *exchange, w http.ResponseWriter, r *http.Request, slug, name string) {
	h.observe(x, w, slug, name)
	defer h.end(x, r)
	h.begin(x, r)
	defer h.done(&x.req)
	if err := h.serve(&x.w, r, &x.req, slug, name, &x.log); err != nil {
		x.log.result = answer.CodeOf(err)
		answer.Err(h.log, &x.w, r, err)
	}
}

// observe starts a request's metrics, log line and audit record, which
// end writes with what x says by then.
func (h *handler) observe(x *exchange, w http.ResponseWriter, slug, name string) {
	x.start = time.Now()
	x.w = answerWriter{ResponseWriter: w}
	x.slug, x.name = slug, name
	x.log.command = "unknown" // metric labels stay bounded
}

// end writes the request's metrics, audit record and log line.
func (h *handler) end(x *exchange, r *http.Request) {
	end := time.Now()
	rec := &x.log
	if h.without&layerMetrics == 0 {
		h.requestMetrics[rec.command].Observe(x.w.status, end.Sub(x.start))
	}
	// Straight to the handler: Logger.LogAttrs would also look up the
	// caller (runtime.Callers), which the line does not show.
	ctx, logHandler := r.Context(), h.log.Handler()
	// The audit record, whatever the log's level.
	if rec.namespace != "" && h.without&layerAudit == 0 {
		h.logAudit(ctx, r, end, x)
	}
	if h.without&layerLogLine != 0 || !logHandler.Enabled(ctx, slog.LevelInfo) {
		return
	}
	line := slog.NewRecord(end, slog.LevelInfo, "request", 0)
	if id := tracing.TraceID(ctx); id != "" {
		line.AddAttrs(slog.String("traceID", id))
	}
	line.AddAttrs(
		slog.String("requestID", x.id),
		slog.String("keyID", rec.keyID),
		slog.String("slug", x.slug),
		slog.String("command", x.name),
		slog.Int("status", x.w.status),
		slog.Int("bytes", x.w.bytes),
		slog.Duration("duration", end.Sub(x.start)))
	if rec.serviceAccount != "" {
		line.AddAttrs(slog.String("serviceAccount", rec.serviceAccount))
	}
	_ = logHandler.Handle(ctx, line)
}

// logAudit writes the audit record of a request that reached a
// connection: who, from where, what, and how it ended.
func (h *handler) logAudit(ctx context.Context, r *http.Request, at time.Time, x *exchange) {
	rec := &x.log
	actor := audit.Actor{Kind: audit.ActorKey, Name: rec.keyID}
	if rec.serviceAccount != "" {
		actor = audit.Actor{Kind: audit.ActorServiceAccount, Name: "system:serviceaccount:" + strings.Replace(rec.serviceAccount, "/", ":", 1)}
	}
	h.audit.Record(ctx, audit.Record{Action: auditAction(x.name), Actor: actor, Namespace: rec.namespace, Connection: rec.connection,
		Client: clientAddress(r), RequestID: x.id, Object: rec.object, Paths: rec.paths, Bytes: max(rec.bytes, int64(x.w.bytes)),
		Result: cmp.Or(rec.result, audit.ResultOfStatus(x.w.status)), Time: at, TraceID: tracing.TraceID(ctx)})
}

// auditActions are the audit records' actions, "gateway.<command>", made
// once.
var auditActions = func() map[string]string {
	actions := map[string]string{uploadsCommand: "gateway." + uploadsCommand}
	for _, name := range commands.Names() {
		actions[string(name)] = "gateway." + string(name)
	}
	return actions
}()

func auditAction(command string) string {
	if action, ok := auditActions[command]; ok {
		return action
	}
	return "gateway." + command
}

// requestLog collects what the request's log line and metrics say beyond
// the request itself.
type requestLog struct {
	command string // a known command's name
	keyID   string
	// serviceAccount is the caller's ServiceAccount, namespace/name, when
	// it sent a ServiceAccount token rather than a key.
	serviceAccount string
	// namespace and connection are the connection's the request reached
	// (none: no audit record, the request concerned no tenant's files);
	// paths what it named; bytes its body's; result its error code, or ""
	// for ok.
	namespace, connection string
	// object names a resumable upload ("upload/<id>").
	object string
	paths  []string
	bytes  int64
	result string
}

// request is one request's scope, started in one place (begin) and
// filled in as it goes: its command and the form it came in, its caller
// and connection, what it holds of the memory budget and how its large
// transfers are paced. env is what its command runs with.
type request struct {
	cmd  commands.Command
	form form
	// body is a JSON body, or a small raw upload read before it runs.
	body   []byte
	conn   *served
	who    caller
	memory budget.Ledger
	pace   pacing.Stream
	envs   commands.Env
	// ran says the request got as far as running its command.
	ran bool
	// named holds the paths its command reported (Env.Named), for its
	// audit record: set from the pool's goroutine.
	namedMu  sync.Mutex
	named    []string
	wasNamed bool
}

// form is how a request sends or wants a file's bytes.
type form int

const (
	jsonForm form = iota
	// upload streams the body into the file as the command runs; a
	// smallUpload is read whole first, to share the pool's sessions.
	upload
	smallUpload
	// download answers with the file's bytes.
	download
)

// begin starts the request's share of the memory budget and the pacing
// of its large transfers.
func (h *handler) begin(x *exchange, r *http.Request) {
	if h.without&layerLimits == 0 {
		x.req.memory, x.req.pace = h.memory.Ledger(r.Context()), h.pacer.Stream(r.Context())
	}
}

// done ends the request once its answer has been sent: what it held is
// garbage then; a large transfer's last chunk is charged, and the end of a
// small one that ran is noted, for large transfers to yield to.
func (h *handler) done(req *request) {
	req.pace.End()
	if req.ran && !req.large() && h.without&layerLimits == 0 {
		h.pacer.SmallDone()
	}
	req.memory.Release()
}

// large says the request moves more than a small one: a stream, or what
// holds more than a small hold of the memory budget.
func (req *request) large() bool {
	return req.form == upload || req.form == download || req.cmd.Streams || req.memory.Held() > budget.SmallHold
}

// env is what the request's command runs with, on a session of p.
func (req *request) env(p *pool.Pool) *commands.Env {
	root, _ := req.conn.ServedAt()
	req.envs = commands.Env{Memory: &req.memory, Pace: &req.pace, Root: root, Scope: commands.Scope(root, req.who.paths), Leftovers: p,
		Named: req.setNamed}
	return &req.envs
}

// setNamed keeps the paths the command reported.
func (req *request) setNamed(paths []string) {
	req.namedMu.Lock()
	defer req.namedMu.Unlock()
	req.named, req.wasNamed = paths, true
}

// namedByCommand is what setNamed kept; false when the command reported
// nothing.
func (req *request) namedByCommand() ([]string, bool) {
	req.namedMu.Lock()
	defer req.namedMu.Unlock()
	return req.named, req.wasNamed
}

// serve runs one command in named steps; each returns the error that
// answers the request when it cannot go on.
func (h *handler) serve(w http.ResponseWriter, r *http.Request, req *request, slug, name string, rec *requestLog) error {
	var err error
	if req.cmd, err = lookup(r, name, rec); err != nil {
		return err
	}
	if h.without&layerKeys != 0 {
		req.conn, req.who = h.bench.conn, h.bench.who
	} else if req.conn, req.who, err = h.authenticate(r, slug, req.cmd, rec); err != nil {
		return err
	}
	rec.namespace, rec.connection = req.conn.GetNamespace(), req.conn.ref()
	if h.without&layerLimits == 0 {
		if err := h.admit(req.conn, req.who); err != nil {
			return err
		}
		defer h.leave(req.who)
	}
	// The paths the command reports once it decoded the request, else
	// (it did not get that far, or it is a raw upload) read here.
	defer func() {
		if named, ok := req.namedByCommand(); ok {
			rec.paths = named
		} else {
			rec.paths = namedPaths(r, req.body)
		}
	}()
	err = h.decode(w, r, req)
	rec.bytes = max(r.ContentLength, 0)
	if err != nil {
		return err
	}
	req.ran = true
	result, streamed, err := h.run(w, r, req)
	if err != nil {
		if failure, ok := errors.AsType[*commands.Failure](err); ok {
			rec.result = failure.Code
		}
	}
	if streamed {
		// The answer is sent; a failure halfway shows as a short body.
		return nil
	}
	return h.answer(w, name, result, err)
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

// run runs the request's command on a session of its connection's pool.
// It reports whether it sent the answer itself (a download).
func (h *handler) run(w http.ResponseWriter, r *http.Request, req *request) (result any, streamed bool, err error) {
	conn := req.conn
	// A client that goes away does not cut the pool's building short (the
	// requests waiting for the same pool would get its failure), nor an
	// operation: the session it runs on is shared, and closing it would
	// fail the others.
	p, err := h.pools.Get(context.WithoutCancel(r.Context()), conn.kind.dialer, conn.endpoint)
	if err != nil {
		return nil, false, err
	}
	// A stream's own bound (streamTimeout) closes its session, for a
	// server that hangs.
	stream := req.form == upload || req.form == download || req.cmd.Streams
	_, _, timeout := conn.SessionLimits()
	if stream {
		timeout = h.streamTimeout()
	}
	op := pool.Op{Idempotent: req.cmd.Idempotent && req.form == jsonForm, Stream: stream, Timeout: timeout}
	env := req.env(p)
	// The request's context ends a wait for a session when the client goes
	// away, and the commands that read or copy whole files or directories
	// at their next chunk; another operation, once started, runs to its end.
	ctx := r.Context()
	if h.tracer != nil {
		// The command's operation on the server, from the wait for a
		// session to its end: the request span's child.
		var span trace.Span
		ctx, span = h.tracer.Start(ctx, conn.kind.resource+" "+string(req.cmd.Name), trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.String("sftpgate.connection", conn.GetName()), attribute.Bool("sftpgate.stream", stream)))
		defer func() {
			if err != nil {
				// Its code, never its words: an error's cause may name the
				// server's paths or the cluster's objects.
				span.SetStatus(codes.Error, answer.CodeOf(err))
			}
			span.End()
		}()
	}
	err = p.Do(ctx, op, func(s files.Session) error {
		fs := env.FS(s)
		var runErr error
		switch req.form {
		case smallUpload:
			result, runErr = req.cmd.Upload.Bytes(fs, r.URL.Query(), req.body)
		case upload:
			body, done := readAhead(w, r, http.MaxBytesReader(w, r.Body, h.limits.MaxUploadBytes))
			result, runErr = req.cmd.Upload.Stream(fs, r.URL.Query(), body, r.ContentLength)
			done(runErr != nil)
		case download:
			streamed, runErr = serveFile(w, r, fs, req.cmd.Download, req.body)
		default:
			result, runErr = req.cmd.Run(r.Context(), fs, req.body)
		}
		return runErr
	})
	return result, streamed, err
}

// streamTimeout bounds a stream's operation: as long as the request may
// take, and a minute more, so that a slow client's own timeout (which
// fails only its request) ends it first.
func (h *handler) streamTimeout() time.Duration { return h.limits.RequestTimeout + time.Minute }

// answer sends the command's envelope: its result, or the failure the
// SFTP server answered; any other error answers the request instead.
func (h *handler) answer(w http.ResponseWriter, name string, result any, err error) error {
	if err == nil {
		answer.Command(w, name, result, nil)
		return nil
	}
	if failure, ok := errors.AsType[*commands.Failure](err); ok {
		answer.Command(w, name, nil, failure)
		return nil
	}
	return h.runError(err)
}

// namedPaths are the paths a request names, for its audit record: a JSON
// body's path, from and to (read again only from a body of at most
// maxAuditedBody: a large write's content is not parsed twice), or a raw
// request's path parameter.
func namedPaths(r *http.Request, body []byte) []string {
	const maxAuditedBody = 64 << 10
	if len(body) > 0 && len(body) <= maxAuditedBody {
		if paths, ok := jsonPaths(body); ok {
			return paths
		}
	}
	if p := r.URL.Query().Get("path"); p != "" {
		return []string{p}
	}
	return nil
}

// pathDecoder is jsonPaths' decoder, kept for the next request.
type pathDecoder struct {
	body bytes.Reader
	dec  jsontext.Decoder
}

var pathDecoders = sync.Pool{New: func() any { return new(pathDecoder) }}

// jsonPaths are the path, from and to members of a JSON object, in that
// order, read in one pass that skips the rest (a write's content): a
// decoding into a struct read the body twice, which showed in the CPU
// of small writes.
func jsonPaths(body []byte) ([]string, bool) {
	d := pathDecoders.Get().(*pathDecoder)
	defer pathDecoders.Put(d)
	d.body.Reset(body)
	d.dec.Reset(&d.body)
	dec := &d.dec
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, false
	}
	var named [3]string
	for dec.PeekKind() == '"' {
		name, err := dec.ReadToken()
		if err != nil {
			return nil, false
		}
		i := slices.Index([]string{"path", "from", "to"}, name.String())
		if i < 0 || dec.PeekKind() != '"' {
			if dec.SkipValue() != nil {
				return nil, false
			}
			continue
		}
		value, err := dec.ReadToken()
		if err != nil {
			return nil, false
		}
		named[i] = value.String()
	}
	var paths []string
	for _, p := range named {
		if p != "" {
			paths = append(paths, p)
		}
	}
	return paths, true
}
