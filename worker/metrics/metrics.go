// Package metrics holds the worker's Prometheus metrics, on a registry
// each worker owns.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/clientmetrics"
)

// Metrics are one worker's.
type Metrics struct {
	// Polls counts polls of watched folders by result: ok, or the reason
	// of the failure.
	Polls *prometheus.CounterVec
	// PollDuration observes how long a poll takes.
	PollDuration prometheus.Histogram
	// Events counts events by what became of them: delivered, failed (a
	// try), dead_lettered, dropped (the sink refused it and there was no
	// dead-letter sink).
	Events *prometheus.CounterVec
	// DeliveryLatency observes the time from the poll that found a change
	// to its delivery.
	DeliveryLatency prometheus.Histogram
	// Dials counts new SSH connections by result, as the gateway's.
	Dials *prometheus.CounterVec
	// TransferBytes counts the bytes transfers wrote to destinations.
	TransferBytes prometheus.Counter
	// TransferFiles counts transfers' files by how they ended: done,
	// skipped, failed; and retried (a try that failed).
	TransferFiles *prometheus.CounterVec
	// TransfersFinished counts the transfers that finished, by their
	// outcome: Succeeded, or the Ready reason of their failure.
	TransfersFinished *prometheus.CounterVec
	// AuditDropped counts the audit records dropped, by reason.
	AuditDropped *prometheus.CounterVec
	// UploadsExpired counts expired resumable uploads removed, by what was
	// removed: partial (the partial file and the record), record, or
	// abandoned (the record, its partial file not removable).
	UploadsExpired *prometheus.CounterVec
	// UploadBytesExpired counts the bytes of expired uploads' partial
	// files removed.
	UploadBytesExpired prometheus.Counter

	registry *prometheus.Registry
}

// New makes a worker's metrics, with the Go runtime's and the process's.
func New() *Metrics {
	m := &Metrics{
		Polls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sftpgate_worker_polls_total", Help: "Polls of watched folders, by result (ok, or the reason of the failure).",
		}, []string{"result"}),
		PollDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sftpgate_worker_poll_duration_seconds", Help: "How long a poll of a watched folder takes.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		Events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sftpgate_worker_events_total", Help: "Events by what became of them: delivered, failed (a try), dead_lettered, dropped.",
		}, []string{"outcome"}),
		DeliveryLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sftpgate_worker_delivery_latency_seconds", Help: "Time from the poll that found a change to its event's delivery.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}),
		Dials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sftpgate_worker_dials_total", Help: "New SSH connections to SFTP servers, by result (ok, the reason of the failure, or Cancelled).",
		}, []string{"result"}),
		TransferBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sftpgate_worker_transfer_bytes_total", Help: "Bytes transfers wrote to their destinations.",
		}),
		TransferFiles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sftpgate_worker_transfer_files_total", Help: "Transfers' files by how they ended: done, skipped, failed; retried counts failed tries.",
		}, []string{"result"}),
		TransfersFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sftpgate_worker_transfers_finished_total", Help: "Transfers that finished, by outcome: Succeeded, or the Ready reason of their failure (FilesFailed, ...).",
		}, []string{"outcome"}),
		AuditDropped: audit.DroppedCounter("sftpgate_worker_audit_records_dropped_total"),
		UploadsExpired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sftpgate_worker_uploads_expired_total", Help: "Expired resumable uploads removed, by what was removed: partial (its partial file and record), record (it had none left) or abandoned (its record alone, after --expiry-failed-sweeps sweeps failed to remove its partial file).",
		}, []string{"removed"}),
		UploadBytesExpired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sftpgate_worker_upload_bytes_expired_total", Help: "Bytes of the partial files of expired resumable uploads removed.",
		}),
		registry: prometheus.NewRegistry(),
	}
	// The series alerts read with increase() exist from the start: a
	// counter's first increment from no series at all is not seen.
	for _, outcome := range []string{"delivered", "failed", "dead_lettered", "dropped"} {
		m.Events.WithLabelValues(outcome)
	}
	for _, reason := range []string{"held", "undelivered"} {
		m.AuditDropped.WithLabelValues(reason)
	}
	m.TransfersFinished.WithLabelValues("Succeeded")
	m.TransfersFinished.WithLabelValues("FilesFailed")
	m.registry.MustRegister(m.Polls, m.PollDuration, m.Events, m.DeliveryLatency, m.Dials, m.TransferBytes, m.TransferFiles, m.TransfersFinished, m.AuditDropped, m.UploadsExpired, m.UploadBytesExpired,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Register adds a collector, such as the pools' sizes or the pending
// events.
func (m *Metrics) Register(c prometheus.Collector) error { return m.registry.Register(c) }

// Handler serves the metrics in the Prometheus format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(prometheus.Gatherers{m.registry, clientmetrics.Gatherer()}, promhttp.HandlerOpts{})
}
