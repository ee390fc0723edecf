// Package logging makes a component's logger from its flags: JSON lines
// on standard error, each with the component's name, in the same format
// for the manager, the gateway, the worker and the web UI. A component
// makes its logger once, in its Run, and passes it down to what logs (a
// Log field, or a parameter); nothing reads or sets slog's default. The
// one process-wide logger set is controller-runtime's own, by Run
// (ControllerRuntime).
package logging

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Options are how a component logs.
type Options struct {
	// Level is the least level written: --log-level.
	Level slog.Level
	// FlushInterval, above 0, writes lines in batches at least this
	// often, at once after each warning or error, and at flush; 0 writes
	// each line at once. RegisterFlags has no flag for it: the gateway
	// sets it from its own --log-flush-interval.
	FlushInterval time.Duration
}

// RegisterFlags registers --log-level on fs and returns the options it
// sets.
func RegisterFlags(fs *flag.FlagSet) *Options {
	o := &Options{Level: slog.LevelInfo}
	fs.TextVar(&o.Level, "log-level", o.Level, "Least level of the log lines written: debug, info, warn or error.")
	return o
}

// New is the logger of component, writing to standard error as opts say,
// and the function that writes out what it holds (call it when the
// component ends; lines logged after it are written at once). Each line
// is one JSON object: time, level, msg, component and the line's own
// attributes.
func New(component string, opts Options) (*slog.Logger, func()) {
	return newTo(os.Stderr, component, opts)
}

func newTo(w io.Writer, component string, opts Options) (*slog.Logger, func()) {
	handlerOpts := &slog.HandlerOptions{Level: opts.Level}
	componentAttr := []slog.Attr{slog.String("component", component)}
	if opts.FlushInterval <= 0 {
		out := &locked{w: w}
		return slog.New(&withJSON{Handler: slog.NewJSONHandler(out, handlerOpts).WithAttrs(componentAttr), out: out, component: component}), func() {}
	}
	b := &buffered{out: w, buf: &zapcore.BufferedWriteSyncer{WS: zapcore.AddSync(w), FlushInterval: opts.FlushInterval}}
	h := &syncOnWarn{Handler: slog.NewJSONHandler(b, handlerOpts), sync: b.sync}
	return slog.New(&withJSON{Handler: h.WithAttrs(componentAttr), out: b, component: component}), b.stop
}

// JSON writes an info line of l whose attribute key holds value, JSON
// already encoded, whatever the level: the line slog.Any(key,
// json.RawMessage(value)) would make, without value decoded and encoded
// again (encoding/json compacts what a json.Marshaler returns, which
// showed in the gateway's CPU per request: an audit record is logged
// with each). A logger not made by New, or since given attributes,
// writes it through slog.
func JSON(ctx context.Context, l *slog.Logger, t time.Time, msg, key string, value []byte) {
	h, ok := l.Handler().(*withJSON)
	if !ok {
		line := slog.NewRecord(t, slog.LevelInfo, msg, 0)
		line.AddAttrs(slog.Any(key, json.RawMessage(value)))
		_ = l.Handler().Handle(ctx, line)
		return
	}
	buf := make([]byte, 0, len(value)+len(msg)+len(key)+len(h.component)+80)
	buf = append(buf, `{"time":"`...)
	buf = t.AppendFormat(buf, time.RFC3339Nano)
	buf = append(buf, `","level":"INFO","msg":`...)
	buf = appendString(buf, msg)
	buf = append(buf, `,"component":`...)
	buf = appendString(buf, h.component)
	buf = append(buf, ',')
	buf = appendString(buf, key)
	buf = append(buf, ':')
	buf = append(buf, value...)
	buf = append(buf, "}\n"...)
	_, _ = h.out.Write(buf)
}

func appendString(buf []byte, s string) []byte {
	quoted, _ := json.Marshal(s)
	return append(buf, quoted...)
}

// withJSON is a component's handler, which JSON writes to directly.
// Its WithAttrs and WithGroup give the handler's own: lines with more
// attributes go through slog.
type withJSON struct {
	slog.Handler
	out       io.Writer
	component string
}

// locked writes each line whole: slog's handler and JSON write to it
// apart. (buffered's syncer writes under its own lock.)
type locked struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *locked) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Logr is l for what logs through logr (controller-runtime: pass it as
// ctrl.Options.Logger): the same handler, so the same lines, but for the
// error's key, "error" as in the others where logr says "err". Its V(n)
// lines are slog's level -n: V(1) to V(4) show at debug.
func Logr(l *slog.Logger) logr.Logger {
	return logr.FromSlogHandler(errorKey{OrDiscard(l).Handler()})
}

// errorKey renames logr's "err" to "error". It is not a ReplaceAttr of
// every line's handler: that would take the gateway's request line from
// slog's fast path (it costs as much again per line).
type errorKey struct{ slog.Handler }

func (h errorKey) Handle(ctx context.Context, r slog.Record) error {
	has := false
	r.Attrs(func(a slog.Attr) bool {
		has = a.Key == "err"
		return !has
	})
	if !has {
		return h.Handler.Handle(ctx, r)
	}
	renamed := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			a.Key = "error"
		}
		renamed.AddAttrs(a)
		return true
	})
	return h.Handler.Handle(ctx, renamed)
}

func (h errorKey) WithAttrs(attrs []slog.Attr) slog.Handler {
	return errorKey{h.Handler.WithAttrs(attrs)}
}

// WithGroup's attributes are the group's: none is the line's error.
func (h errorKey) WithGroup(name string) slog.Handler { return h.Handler.WithGroup(name) }

// ControllerRuntime sends the lines of controller-runtime's own
// package-level loggers to l. Call it once, from a component's Run, never
// from New (a test may build several components in one process).
//
// A manager logs to ctrl.Options.Logger, and so do its controllers and
// runnables (their ctx carries it); but some of controller-runtime's
// packages log to its root logger, sigs.k8s.io/controller-runtime/pkg/log.Log,
// which only log.SetLogger sets: the cache's informers (client-go's watch
// errors reach it through their ctx), a Kind source that cannot start ("if
// kind is a CRD, it should be installed before calling Start"), the
// health probes, the metrics server, the kubeconfig loader. Unset, those
// lines are dropped, and the first of them after 30 seconds prints
// "log.SetLogger(...) was never called" with a stack (pkg/log's
// eventuallyFulfillRoot). Setting it to a logger that discards would drop
// real errors; setting it to the component's own logger keeps one log,
// in one format, per process.
func ControllerRuntime(l *slog.Logger) {
	ctrllog.SetLogger(Logr(l))
}

var discard = slog.New(slog.DiscardHandler)

// OrDiscard is l, or a logger that writes nothing when l is nil: what a
// type whose logger was left unset (Log: nil, in a test) logs to.
func OrDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return discard
	}
	return l
}

// buffered holds lines in buf until it is synced, which at least every
// FlushInterval it is: a line written at once is a system call per
// request, which shows in the gateway's CPU per small request
// (docs/benchmarks.md; proxies buffer access logs for the same reason).
// After stop, lines go straight to out, not into a stopped buffer.
type buffered struct {
	out io.Writer
	buf *zapcore.BufferedWriteSyncer
	// mu is held for reading by writes, for writing by stop: no line
	// goes into the buffer once it is stopped.
	mu      sync.RWMutex
	stopped bool
}

func (b *buffered) Write(p []byte) (int, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.stopped {
		return b.out.Write(p)
	}
	return b.buf.Write(p)
}

func (b *buffered) sync() error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.stopped {
		return nil
	}
	return b.buf.Sync()
}

func (b *buffered) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.stopped {
		b.stopped = true
		_ = b.buf.Stop()
	}
}

// syncOnWarn writes the buffer out after each warning or error, with the
// lines before it: what explains a crash is not lost with the buffer.
type syncOnWarn struct {
	slog.Handler
	sync func() error
}

func (h *syncOnWarn) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		_ = h.sync()
	}
	return err
}

func (h *syncOnWarn) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &syncOnWarn{Handler: h.Handler.WithAttrs(attrs), sync: h.sync}
}

func (h *syncOnWarn) WithGroup(name string) slog.Handler {
	return &syncOnWarn{Handler: h.Handler.WithGroup(name), sync: h.sync}
}
