package tasks

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/tenants"
	"github.com/sftpgate/sftpgate/worker/deliver"
	"github.com/sftpgate/sftpgate/worker/ends"
	"github.com/sftpgate/sftpgate/worker/metrics"
	"github.com/sftpgate/sftpgate/worker/shard"
	"github.com/sftpgate/sftpgate/worker/statestore"
)

// Env is what the worker gives the runner of each kind that reports
// through statuses and events (watches, transfers): the same clients,
// sessions, sender, recorder and metrics for all, and Leases and stored
// states of the kind's own.
type Env struct {
	// Cache reads the kind's items and connections; Client reads Secrets
	// and sinks, and writes statuses.
	Cache  client.Reader
	Client client.Client
	// Ends runs operations on connections and stores.
	Ends *ends.Ends
	// Tenants says which namespaces are web UI accounts' (Totals.IsStranger).
	Tenants tenants.Kinds
	// Audit records what the tasks do to tenants' files.
	Audit    *audit.Trail
	Sender   *deliver.Sender
	Shard    *shard.Shard
	States   *statestore.Store
	Recorder events.EventRecorder
	Metrics  *metrics.Metrics
	// Log is where the runner logs; nil logs nothing.
	Log *slog.Logger
	// SyncInterval is how often the replica takes its share anew (and
	// renews its Leases): a third of a lease duration.
	SyncInterval time.Duration
}

// Registry is where a kind's metrics go: the worker's, or none (nil)
// when Metrics is not set.
func (e Env) Registry() interface {
	Register(prometheus.Collector) error
} {
	if e.Metrics == nil {
		return nil
	}
	return e.Metrics
}
