// Package gateway is the HTTP API: POST {base}/<slug>/<command> runs a
// command on the SFTP server of the SftpConnection serving slug, for a
// client holding an ApiKey of that connection's namespace. Connections and
// keys come from an informer cache; Secrets are read only when a
// connection's session pool is built.
package gateway

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api"
	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/gateway/answer"
	"github.com/sftpgate/sftpgate/gateway/budget"
	"github.com/sftpgate/sftpgate/gateway/commands"
	"github.com/sftpgate/sftpgate/gateway/keyauth"
	"github.com/sftpgate/sftpgate/gateway/kubeauth"
	"github.com/sftpgate/sftpgate/gateway/lastuse"
	"github.com/sftpgate/sftpgate/gateway/metrics"
	"github.com/sftpgate/sftpgate/gateway/openapi"
	"github.com/sftpgate/sftpgate/gateway/pacing"
	"github.com/sftpgate/sftpgate/gateway/uploads"
	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/auditstore"
	"github.com/sftpgate/sftpgate/internal/cmdline"
	"github.com/sftpgate/sftpgate/internal/ftpdial"
	"github.com/sftpgate/sftpgate/internal/httpedge"
	"github.com/sftpgate/sftpgate/internal/logging"
	"github.com/sftpgate/sftpgate/internal/pool"
	"github.com/sftpgate/sftpgate/internal/ratelimit"
	"github.com/sftpgate/sftpgate/internal/recovery"
	"github.com/sftpgate/sftpgate/internal/s3dial"
	"github.com/sftpgate/sftpgate/internal/s3fs"
	"github.com/sftpgate/sftpgate/internal/sftpdial"
	"github.com/sftpgate/sftpgate/internal/storedbytes"
	"github.com/sftpgate/sftpgate/internal/tenants"
	"github.com/sftpgate/sftpgate/internal/tracing"
	"github.com/sftpgate/sftpgate/internal/uploadrecord"
)

// pacingQuiet is how long after the last small request large transfers
// run unpaced: a trickle of small requests does not slow them.
const pacingQuiet = 20 * time.Millisecond

// memoryWait is how long a request waits for room in the memory budget
// before it is answered 503: long enough for a burst's other large
// requests to finish, short enough that a client retries elsewhere.
const memoryWait = time.Second

// Server is a running gateway's state.
type Server struct {
	restConfig *rest.Config
	cache      cache.Cache
	handler    http.Handler
	pools      *pool.Pools
	endpoints  endpoints
	document   []byte
	docs       []byte
	limits     Limits
	memory     *budget.Budget
	lastUse    *lastuse.Recorder
	metrics    *metrics.Metrics
	log        *slog.Logger
	audit      *audit.Trail
}

// New builds a gateway reading from the cluster of restConfig. Start the
// returned server's cache with Start before serving.
func New(restConfig *rest.Config, opts Options) (*Server, error) {
	opts = opts.withDefaults()
	log := logging.OrDiscard(opts.Log)
	policy, err := opts.DialPolicy()
	if err != nil {
		return nil, err
	}
	scheme := api.Scheme()
	m := metrics.New()
	// Requests read connections and keys from the informers' indexes
	// (cacheindex), which hand out the cache's own objects: they only read
	// them.
	c, err := cache.New(restConfig, cache.Options{Scheme: scheme, DefaultTransform: cache.TransformStripManagedFields(),
		DefaultWatchErrorHandler: func(ctx context.Context, r *toolscache.Reflector, err error) {
			m.WatchErrors.Inc()
			m.APIServerUp.Set(0)
			toolscache.DefaultWatchErrorHandler(ctx, r, err)
		}})
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	keys, err := keyauth.IndexKeys(ctx, c)
	if err != nil {
		return nil, err
	}
	kinds := tenants.Kinds{Reader: c}
	memory := budget.New(opts.Limits.MemoryBudget, memoryWait)
	served, err := servedKinds(ctx, c, &sftpdial.Dialer{Policy: policy, Tenants: kinds, Directories: opts.Directories},
		&ftpdial.Dialer{Policy: policy, Tenants: kinds},
		&s3dial.Dialer{Policy: policy, Tenants: kinds, Memory: func(ns string) s3fs.Memory { return memory.Parts(ns) }})
	if err != nil {
		return nil, err
	}
	// Reads Secrets and creates reviews straight from the API server.
	direct, err := client.New(restConfig, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	document, err := openapi.Document(opts.BasePath)
	if err != nil {
		return nil, err
	}
	docs, err := openapi.Docs(opts.BasePath)
	if err != nil {
		return nil, err
	}
	s := &Server{
		restConfig: restConfig,
		cache:      c,
		endpoints:  served,
		pools: &pool.Pools{Secrets: direct, IdleTimeout: opts.IdleTimeout,
			MaxWaiting: opts.Limits.MaxWaitingPerConnection, Dials: m.Dials, Log: log},
		metrics:  m,
		document: document,
		docs:     docs,
		limits:   opts.Limits,
		memory:   memory,
		lastUse:  lastuse.New(direct, log),
		log:      log,
	}
	stateBudget := &storedbytes.Budget{Client: direct, Namespace: opts.Namespace, Limits: opts.StateBudget, Tenants: tenants.Kinds{Reader: c}}
	if !opts.NoAudit {
		s.audit = audit.NewTrail("gateway", log).Keep(&auditstore.Store{Client: direct, Namespace: opts.Namespace, Budget: stateBudget}, opts.Audit)
		s.audit.Dropped = s.metrics.AuditDropped.WithLabelValues("held")
	}
	if err := m.Register(s.pools); err != nil {
		return nil, err
	}
	h := &handler{
		endpoints:      s.endpoints,
		authorizer:     &keyauth.Authorizer{Keys: keys},
		pools:          s.pools,
		limits:         opts.Limits,
		limiter:        ratelimit.New[types.UID](opts.Limits.RatePerKey, opts.Limits.RateBurst),
		memory:         s.memory,
		lastUse:        s.lastUse,
		pacer:          pacing.New(opts.Limits.LargeTransferShare, pacingQuiet, m.Paced),
		metrics:        m,
		requestMetrics: requestMetrics(m),
		perKey:         ratelimit.NewInFlight[types.UID](opts.Limits.MaxRequestsPerKey),
		perNamespace:   ratelimit.NewInFlight[string](opts.Limits.MaxRequestsPerNamespace),
		log:            log,
		audit:          s.audit,
		tracer:         tracerOf(opts.Tracing),
	}
	records := &uploadrecord.Store{Client: direct, Namespace: opts.Namespace, Budget: stateBudget}
	limits := opts.Uploads
	limits.MaxSize = opts.Limits.MaxUploadBytes
	if h.uploads, err = uploads.New(records, limits, h.uploadError, log); err != nil {
		return nil, err
	}
	if !opts.NoServiceAccounts {
		// Reads the issuer's document and keys as the gateway, from the
		// API server.
		httpClient, err := rest.HTTPClientFor(restConfig)
		if err != nil {
			return nil, err
		}
		server, _, err := rest.DefaultServerUrlFor(restConfig)
		if err != nil {
			return nil, err
		}
		issuer := kubeauth.NewIssuer(httpClient, server.String(), opts.Audience)
		h.reviewer = kubeauth.New(direct, issuer, opts.Audience, opts.AuthorizationCacheTTL)
	}
	s.handler = s.routes(opts.BasePath, h)
	return s, nil
}

func (s *Server) routes(base string, h *handler) http.Handler {
	prefix := "/" + strings.Trim(base, "/")
	if prefix != "/" {
		prefix += "/"
	}
	return s.newFront(prefix, h, s.mux(base, h, h.serveUploads))
}

// newFront is the front of h below prefix ("/<base>/", or "/"), with mux
// for what is not a command.
func (s *Server) newFront(prefix string, h *handler, mux http.Handler) *front {
	f := &front{h: h, prefix: prefix, log: s.log, mux: mux}
	f.guarded = recovery.Middleware(func(w http.ResponseWriter, r *http.Request, err error) {
		answer.Err(s.log, w, r, answer.Internal(err))
	})(http.HandlerFunc(f.serve))
	return f
}

// mux routes what the front does not: every path but a command's.
func (s *Server) mux(base string, command http.Handler, uploads http.HandlerFunc) *chi.Mux {
	r := chi.NewRouter()
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		answer.Err(s.log, w, r, answer.NotFound())
	})
	r.Route("/"+strings.Trim(base, "/"), func(r chi.Router) {
		r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
			answer.JSON(w, http.StatusOK, map[string]string{"status": "ok"})
		})
		r.Get("/readyz", s.readyz)
		r.Get("/openapi.json", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(s.document)
		})
		r.Get("/docs", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write(s.docs)
		})
		r.Route("/{slug}/uploads", func(r chi.Router) {
			r.HandleFunc("/", uploads)
			r.HandleFunc("/{id}", uploads)
		})
		r.Handle("/{slug}/{command}", command)
		r.Handle("/{slug}/{command}/", command)
	})
	return r
}

// front is what every request passes first, in one allocation (its
// exchange): its id, the recovery of a panic, the refusal of a method
// override, and the route. A command's route, by far the most requests',
// it finds itself where the path is surely one: chi's costs allocations
// (its context, the request's path values and pattern) on every request.
// Any other path goes to chi's mux, whose routes are the same.
type front struct {
	h *handler
	// prefix is the base path with a slash at its end.
	prefix string
	log    *slog.Logger
	mux    http.Handler
	// guarded is serve, its panics recovered.
	guarded http.Handler
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x := &exchange{Context: r.Context()}
	if f.h.tracer != nil {
		// The caller's trace goes on in the gateway: its traceparent is
		// the request span's parent.
		ctx := tracing.Propagator.Extract(x.Context, propagation.HeaderCarrier(r.Header))
		var span trace.Span
		// Named after the route, never the request's own path or a
		// method no route has: what a stranger sends does not make span
		// names or attributes of its choosing.
		method := r.Method
		if method != http.MethodPost && method != http.MethodGet && method != http.MethodHead && method != http.MethodPatch &&
			method != http.MethodDelete && method != http.MethodOptions {
			method = "_OTHER"
		}
		x.Context, span = f.h.tracer.Start(ctx, method+" "+f.prefix+"{slug}/{command}", trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", method)))
		defer func() { endRequestSpan(span, x) }()
	}
	if f.h.without&layerRequestID == 0 || f.h.tracer != nil {
		if f.h.without&layerRequestID == 0 {
			x.id = httpedge.TakeRequestID(r)
		}
		r = r.WithContext(x)
	}
	if f.h.without&layerRouting != 0 {
		f.h.serveCommand(x, w, r, f.h.bench.slug, f.h.bench.command)
		return
	}
	f.guarded.ServeHTTP(w, r)
}

func (f *front) serve(w http.ResponseWriter, r *http.Request) {
	// tusd would apply X-HTTP-Method-Override after the gateway judged
	// r.Method (a POST sent as PATCH would skip
	// --upload-writes-per-namespace).
	if len(r.Header["X-Http-Method-Override"]) > 0 {
		answer.Err(f.log, w, r, answer.MethodOverride())
		return
	}
	if slug, command, ok := f.commandRoute(r); ok {
		f.h.serveCommand(exchangeOf(r), w, r, slug, command)
		return
	}
	f.mux.ServeHTTP(w, r)
}

// commandRoute is the slug and command of a path that is surely chi's
// route /{slug}/{command} (or with a slash at its end) below the base:
// two segments, neither empty, the second not "uploads" (the uploads'
// routes, more specific). A path chi would route by its escaped form
// (URL.RawPath) is left to chi. TestCommandRoute holds the two equal.
func (f *front) commandRoute(r *http.Request) (slug, command string, ok bool) {
	if r.URL.RawPath != "" {
		return "", "", false
	}
	rest, ok := strings.CutPrefix(r.URL.Path, f.prefix)
	if !ok {
		return "", "", false
	}
	slug, command, ok = strings.Cut(rest, "/")
	command = strings.TrimSuffix(command, "/")
	if !ok || slug == "" || command == "" || command == "uploads" || strings.Contains(command, "/") {
		return "", "", false
	}
	return slug, command, true
}

// readyz is ready once the cache has synced: before, every key and
// connection would look unknown.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 100*time.Millisecond)
	defer cancel()
	if !s.cache.WaitForCacheSync(ctx) {
		answer.Err(s.log, w, r, answer.NotSynced())
		return
	}
	answer.JSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// Handler is the gateway's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// HTTPServer is an HTTP server of the handler with the gateway's
// timeouts; set its address, or serve it on a listener.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    httpedge.MaxHeaderBytes,
		// A request's body and answer are bounded like the request itself.
		ReadTimeout:  s.limits.RequestTimeout,
		WriteTimeout: s.limits.RequestTimeout + 10*time.Second,
		IdleTimeout:  2 * time.Minute,
	}
}

// MetricsHandler serves the Prometheus metrics at /metrics and, with
// profiling, pprof at /debug/pprof/.
func (s *Server) MetricsHandler(profiling bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", s.metrics.Handler())
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// Start runs the cache and the pools' upkeep until ctx ends, and waits for
// the cache to sync.
func (s *Server) Start(ctx context.Context) error {
	if _, err := s.cache.GetInformer(ctx, &v1alpha1.ApiKey{}); err != nil {
		return err
	}
	slots := make(chan struct{}, prewarmConcurrency)
	for _, kind := range s.endpoints {
		informer, err := s.cache.GetInformer(ctx, kind.object())
		if err != nil {
			return err
		}
		warm := s.prewarmer(ctx, kind, slots)
		if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    warm,
			UpdateFunc: func(_, obj any) { warm(obj) },
		}); err != nil {
			return err
		}
	}
	go func() { _ = s.cache.Start(ctx) }()
	go s.pools.Run(ctx)
	go s.watchAPIServer(ctx)
	go s.lastUse.Run(ctx)
	// Stores records until Close, which Run calls once requests are
	// answered: not when ctx ends, while they still are.
	go s.audit.Run(context.WithoutCancel(ctx))
	if !s.cache.WaitForCacheSync(ctx) {
		return errors.New("the cache did not sync")
	}
	return nil
}

// apiServerCheckInterval is how often the gateway looks whether the API
// server answers, for the sftpgate_gateway_api_server_up metric.
const apiServerCheckInterval = 5 * time.Second

// watchAPIServer asks the API server's /readyz (open to every client)
// until ctx ends, and says in a metric whether it answered: while it does
// not, the gateway serves from its cache, and that is worth knowing.
func (s *Server) watchAPIServer(ctx context.Context) {
	defer recovery.Log(s.log, "watching the API server")
	httpClient, err := rest.HTTPClientFor(s.restConfig)
	if err != nil {
		s.log.Error("cannot look at the API server", "error", err)
		return
	}
	base, _, err := rest.DefaultServerUrlFor(s.restConfig)
	if err != nil {
		s.log.Error("cannot look at the API server", "error", err)
		return
	}
	readyz := base.JoinPath("readyz").String()
	tick := time.NewTicker(apiServerCheckInterval)
	defer tick.Stop()
	for {
		s.metrics.APIServerUp.Set(apiServerAnswers(ctx, httpClient, readyz))
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// apiServerAnswers is 1 when url answers 200 within the check interval.
func apiServerAnswers(ctx context.Context, c *http.Client, url string) float64 {
	ctx, cancel := context.WithTimeout(ctx, apiServerCheckInterval)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0
	}
	return 1
}

// prewarmConcurrency bounds the dials of pre-warming, so that a gateway
// starting next to many connections does not dial them all at once.
const prewarmConcurrency = 4

// prewarmer returns an informer handler that opens a first session to
// each connection that is Ready, in the background: the first request to
// a connection then finds its pool warm.
func (s *Server) prewarmer(ctx context.Context, kind *servedKind, slots chan struct{}) func(obj any) {
	return func(obj any) {
		conn, ok := obj.(endpoint)
		if !ok || *conn.ServedSlug() == "" || ready(conn) != nil {
			return
		}
		go func() {
			defer recovery.Log(s.log, "pre-warming")
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-slots }()
			// Events wait here in no order: warm with the connection as it
			// is now, never with an older state that would rebuild the pool.
			latest := kind.object()
			if err := s.cache.Get(ctx, client.ObjectKeyFromObject(conn), latest); err != nil || ready(latest) != nil {
				return
			}
			// The Secret's read and the dial are each bounded by the
			// connection's connectTimeout: a bound here would end the dial
			// first, and hide the server's timeout as this one's.
			p, err := s.pools.Get(ctx, kind.dialer, latest)
			if err == nil {
				err = p.Warm(ctx)
			}
			if err != nil {
				s.log.Warn("pre-warming a connection failed", "namespace", conn.GetNamespace(), "kind", kind.name, "name", conn.GetName(), "error", err)
			}
		}()
	}
}

// GC defaults of the gateway, unless GOGC or GOMEMLIMIT says otherwise. Its
// live heap is small and every request allocates, so at Go's default
// (GOGC=100) it collects every few megabytes allocated, and marking takes
// a large share of its CPU; GOGC=400 collects a quarter as often. Large
// files streamed through would then grow the heap fourfold; a soft limit
// collects sooner there. That limit follows the memory budget: what the
// budget holds is live and no collection frees it, so a fixed limit under
// it would have the collector run without pause whenever large requests
// fill the budget. docs/benchmarks.md has the measurements.
const (
	defaultGCPercent = 400
	// baseMemoryLimit is the soft limit while the budget holds nothing.
	baseMemoryLimit = 48 << 20
	// memoryLimitStep is how far the budget's holds move before the soft
	// limit follows.
	memoryLimitStep = 4 << 20
)

func (s *Server) tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		s.memory.Watch(memoryLimitStep, func(held int64) { debug.SetMemoryLimit(baseMemoryLimit + held) })
	}
}

// Run runs "sftpgate gateway" until ctx ends, then stops accepting
// requests and finishes those in flight.
func Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	var opts Options
	opts.BindFlags(fs)
	shutdownGrace := fs.Duration("shutdown-grace", 25*time.Second, "How long in-flight requests may finish after SIGTERM.")
	// Request lines are written in batches (--log-flush-interval): a line
	// written at once is a system call per request, which shows in the
	// CPU per small request (docs/benchmarks.md).
	started, err := cmdline.Parse("gateway", fs, args, func(o *logging.Options) { o.FlushInterval = opts.LogFlushInterval })
	if err != nil {
		return err
	}
	defer started.Flush()
	log := started.Log
	opts.Log = log
	stopTracing, err := tracing.Setup(ctx, "gateway")
	if err != nil {
		return err
	}
	defer func() { _ = stopTracing(context.WithoutCancel(ctx)) }()
	s, err := New(started.Config, opts)
	if err != nil {
		return err
	}
	s.tuneGC()
	poolCtx, stopPools := context.WithCancel(context.WithoutCancel(ctx))
	defer stopPools()
	if err := s.Start(poolCtx); err != nil {
		return err
	}
	srv := s.HTTPServer()
	srv.Addr = opts.Addr
	errc := make(chan error, 2)
	go func() { errc <- srv.ListenAndServe() }()
	if opts.MetricsAddr != "0" {
		metricsSrv := &http.Server{Addr: opts.MetricsAddr, Handler: s.MetricsHandler(opts.Profiling), ReadHeaderTimeout: 10 * time.Second,
			MaxHeaderBytes: httpedge.MaxHeaderBytes}
		go func() { errc <- metricsSrv.ListenAndServe() }()
		defer func() { _ = metricsSrv.Close() }()
	}
	log.Info("gateway listening", "address", opts.Addr)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), *shutdownGrace)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	// The requests are answered (or cut): the chains end whole.
	s.audit.Close(shutdownCtx)
	return err
}

// requestMetrics are the children of m's request metrics for every
// command, for "unknown" (a command no one knows) and for uploads.
func requestMetrics(m *metrics.Metrics) map[string]*metrics.Request {
	byCommand := map[string]*metrics.Request{"unknown": m.Request("unknown"), uploadsCommand: m.Request(uploadsCommand)}
	for _, name := range commands.Names() {
		byCommand[string(name)] = m.Request(string(name))
	}
	return byCommand
}

// tracerOf is the gateway's tracer: provider's, or the global one when
// the environment turns tracing on, or none.
func tracerOf(provider trace.TracerProvider) trace.Tracer {
	switch {
	case provider != nil:
		return provider.Tracer("github.com/sftpgate/sftpgate/gateway")
	case tracing.Enabled():
		return tracing.Tracer()
	}
	return nil
}

// endRequestSpan ends a request's span with what its answer was.
func endRequestSpan(span trace.Span, x *exchange) {
	if x.slug != "" {
		span.SetAttributes(attribute.String("sftpgate.slug", x.slug), attribute.String("sftpgate.command", x.name))
	}
	if x.log.namespace != "" {
		span.SetAttributes(attribute.String("sftpgate.namespace", x.log.namespace), attribute.String("sftpgate.connection", x.log.connection))
	}
	if x.w.status != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", x.w.status))
		if x.w.status >= http.StatusInternalServerError {
			span.SetStatus(codes.Error, http.StatusText(x.w.status))
		}
	}
	span.End()
}
