// Package metrics holds the gateway's Prometheus metrics, served at
// {base}/metrics.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

var (
	// Requests counts requests by command and HTTP status.
	Requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sftpgate_gateway_requests_total",
		Help: "Requests by command and HTTP status.",
	}, []string{"command", "status"})

	// Duration observes how long requests take, by command.
	Duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sftpgate_gateway_request_duration_seconds",
		Help:    "How long requests take, by command.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"command"})

	// Dials counts new SSH connections by result: "ok", the Ready reason
	// that says why the dial failed, or "Cancelled" when the request gave
	// up first.
	Dials = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sftpgate_gateway_dials_total",
		Help: "New SSH connections to SFTP servers, by result (ok, the reason of the failure, or Cancelled).",
	}, []string{"result"})

	// APIServerUp says whether the API server answered the gateway's last
	// look (1) or not (0): while it does not, the gateway serves the
	// connections and keys its cache holds, as they were.
	APIServerUp = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sftpgate_gateway_api_server_up",
		Help: "Whether the Kubernetes API server answered the gateway's last look (1) or not (0); while not, the cache serves what it last saw.",
	})

	// WatchErrors counts the cache's watches that the API server dropped.
	WatchErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sftpgate_gateway_watch_errors_total",
		Help: "Watches of connections and keys that failed; the cache keeps what it has and watches again.",
	})

	// Paced counts the time large transfers waited for their turn while
	// small requests were being answered (package pacing).
	Paced = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sftpgate_gateway_paced_seconds_total",
		Help: "Time large transfers waited for their turn while small requests were being answered (--large-transfer-share).",
	})

	registry = prometheus.NewRegistry()
)

func init() {
	registry.MustRegister(Requests, Duration, Dials, APIServerUp, WatchErrors, Paced,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

// Register adds a collector, such as the pools' sizes.
func Register(c prometheus.Collector) error { return registry.Register(c) }

// Handler serves the metrics in the Prometheus format.
func Handler() http.Handler { return promhttp.HandlerFor(registry, promhttp.HandlerOpts{}) }
