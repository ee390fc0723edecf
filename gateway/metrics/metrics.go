// Package metrics holds the gateway's Prometheus metrics, served at
// {base}/metrics. Each gateway has its own set, on a registry it owns: two
// gateways in one process (as in tests) report their own.
package metrics

import (
	"maps"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/clientmetrics"
)

// Metrics are one gateway's.
type Metrics struct {
	// Requests counts requests by command and HTTP status.
	Requests *prometheus.CounterVec
	// Duration observes how long requests take, by command.
	Duration *prometheus.HistogramVec
	// Dials counts new SSH connections by result: "ok", the Ready reason
	// that says why the dial failed, or "Cancelled" when the request gave
	// up first.
	Dials *prometheus.CounterVec
	// APIServerUp says whether the API server answered the gateway's last
	// look (1) or not (0): while it does not, the gateway serves the
	// connections and keys its cache holds, as they were.
	APIServerUp prometheus.Gauge
	// WatchErrors counts the cache's watches that the API server dropped.
	WatchErrors prometheus.Counter
	// Paced counts the time large transfers waited for their turn while
	// small requests were being answered (package pacing).
	Paced prometheus.Counter
	// AuditDropped counts the audit records dropped before they were
	// stored.
	AuditDropped *prometheus.CounterVec

	registry *prometheus.Registry
}

// New makes a gateway's metrics, with the Go runtime's and the process's.
func New() *Metrics {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sftpgate_gateway_requests_total",
			Help: "Requests by command and HTTP status.",
		}, []string{"command", "status"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sftpgate_gateway_request_duration_seconds",
			Help:    "How long requests take, by command.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"command"}),
		Dials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sftpgate_gateway_dials_total",
			Help: "New SSH connections to SFTP servers, by result (ok, the reason of the failure, or Cancelled).",
		}, []string{"result"}),
		APIServerUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sftpgate_gateway_api_server_up",
			Help: "Whether the Kubernetes API server answered the gateway's last look (1) or not (0); while not, the cache serves what it last saw.",
		}),
		WatchErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sftpgate_gateway_watch_errors_total",
			Help: "Watches of connections and keys that failed; the cache keeps what it has and watches again.",
		}),
		Paced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sftpgate_gateway_paced_seconds_total",
			Help: "Time large transfers waited for their turn while small requests were being answered (--large-transfer-share).",
		}),
		AuditDropped: audit.DroppedCounter("sftpgate_gateway_audit_records_dropped_total"),
		registry:     prometheus.NewRegistry(),
	}
	m.AuditDropped.WithLabelValues("held") // from the start, for increase()
	m.registry.MustRegister(m.Requests, m.Duration, m.Dials, m.APIServerUp, m.WatchErrors, m.Paced, m.AuditDropped,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Register adds a collector, such as the pools' sizes.
func (m *Metrics) Register(c prometheus.Collector) error { return m.registry.Register(c) }

// Handler serves the metrics in the Prometheus format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(prometheus.Gatherers{m.registry, clientmetrics.Gatherer()}, promhttp.HandlerOpts{})
}

// Request is one command's children of Requests and Duration, each
// resolved at its first use (a series appears once it has something to
// say), then kept: a request counts itself with no lookup of its labels,
// which took allocations (the label values' slice, the status's text) on
// every request.
type Request struct {
	command string
	m       *Metrics
	// duration is Duration's child, once resolved.
	durationOnce sync.Once
	duration     prometheus.Observer
	// byStatus holds Requests' children of the statuses seen, copied on
	// write: read on every request, written for a status's first.
	byStatus atomic.Pointer[map[int]prometheus.Counter]
	mu       sync.Mutex
}

// Request is command's children: a command's name, or "unknown" (the
// label's values must stay bounded). Keep it: each call makes a new one.
func (m *Metrics) Request(command string) *Request {
	return &Request{command: command, m: m}
}

// Observe counts a request answered with status after d.
func (r *Request) Observe(status int, d time.Duration) {
	r.counter(status).Inc()
	r.durationOnce.Do(func() { r.duration = r.m.Duration.WithLabelValues(r.command) })
	r.duration.Observe(d.Seconds())
}

func (r *Request) counter(status int) prometheus.Counter {
	if byStatus := r.byStatus.Load(); byStatus != nil {
		if c, ok := (*byStatus)[status]; ok {
			return c
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	byStatus := map[int]prometheus.Counter{}
	if old := r.byStatus.Load(); old != nil {
		maps.Copy(byStatus, *old)
	}
	c, ok := byStatus[status]
	if !ok {
		c = r.m.Requests.WithLabelValues(r.command, strconv.Itoa(status))
		byStatus[status] = c
		r.byStatus.Store(&byStatus)
	}
	return c
}
