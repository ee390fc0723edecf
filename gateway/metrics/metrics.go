// Package metrics holds the gateway's Prometheus metrics, served at
// {base}/metrics. Each gateway has its own set, on a registry it owns: two
// gateways in one process (as in tests) report their own.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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
		registry: prometheus.NewRegistry(),
	}
	m.registry.MustRegister(m.Requests, m.Duration, m.Dials, m.APIServerUp, m.WatchErrors, m.Paced,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Register adds a collector, such as the pools' sizes.
func (m *Metrics) Register(c prometheus.Collector) error { return m.registry.Register(c) }

// Handler serves the metrics in the Prometheus format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}
