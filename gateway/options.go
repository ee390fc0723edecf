package gateway

import (
	"cmp"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sftpgate/sftpgate/gateway/budget"
	"github.com/sftpgate/sftpgate/gateway/kubeauth"
	"github.com/sftpgate/sftpgate/gateway/uploads"
	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/egress"
	"github.com/sftpgate/sftpgate/internal/pool"
	"github.com/sftpgate/sftpgate/internal/sftpdir"
	"github.com/sftpgate/sftpgate/internal/storedbytes"
)

// Options configure the gateway; Run reads them from flags. A field left
// zero takes its default, the same as its flag's (Defaults has them all),
// so that New(Options{}) is the gateway the flags make by default. Where a
// flag says 0 is no limit, the field says Unlimited.
type Options struct {
	// Tracing is where request spans go: nil is OpenTelemetry's global
	// provider when the environment turns tracing on (internal/tracing),
	// else no spans. Tests set a provider of their own.
	Tracing trace.TracerProvider
	Addr    string
	// MetricsAddr is where /metrics is served; "0" serves it nowhere.
	MetricsAddr string
	BasePath    string
	// Networks are where connections and stores may not dial.
	egress.Networks
	IdleTimeout time.Duration
	// LogFlushInterval is how long Run's log lines may wait in a buffer
	// before they are written; Unlimited writes each at once.
	LogFlushInterval time.Duration
	// Profiling serves Go's pprof profiles at /debug/pprof/ next to the
	// metrics, for finding where a busy gateway spends its CPU.
	Profiling bool
	Limits    Limits
	// Directories bounds a directory read whole, from a server that allows
	// one SFTP channel per connection.
	Directories sftpdir.Limits
	// Audience is the audience of the ServiceAccount tokens the gateway
	// accepts, unless NoServiceAccounts turns them off.
	Audience          string
	NoServiceAccounts bool
	// AuthorizationCacheTTL is how long an RBAC decision for a
	// ServiceAccount is used.
	AuthorizationCacheTTL time.Duration
	// Namespace is sftpgate's own, where resumable uploads' records are
	// kept (as ConfigMaps), for every replica and the worker to find.
	Namespace string
	// Uploads bound resumable uploads; their largest is MaxUploadBytes.
	Uploads uploads.Limits
	// StateBudget bounds the bytes of upload records (with the worker's
	// states) stored for each namespace, and for all.
	StateBudget storedbytes.Limits
	// Audit bounds the audit records held before they are stored;
	// NoAudit records none (for measuring what the trail costs).
	Audit   audit.Bounds
	NoAudit bool
	// Log is where the gateway logs (Run: from --log-level and
	// --log-flush-interval); nil logs nothing.
	Log *slog.Logger
}

// Limits bound what one request may take.
type Limits struct {
	// MaxBodyBytes is the largest JSON request body.
	MaxBodyBytes int64
	// MaxUploadBytes is the largest raw upload.
	MaxUploadBytes int64
	// RatePerKey is how many requests per second one API key may send to
	// one gateway replica, with bursts up to RateBurst.
	RatePerKey float64
	RateBurst  int
	// MemoryBudget is the bytes the replica may hold for request bodies
	// and answers in flight (its default: budget.DefaultSize).
	MemoryBudget int64
	// MaxRequestsPerKey and MaxRequestsPerNamespace bound the requests in
	// flight on this replica of one API key and of one namespace's keys.
	MaxRequestsPerKey, MaxRequestsPerNamespace int
	// MaxWaitingPerConnection bounds the requests waiting for a session
	// of one connection's pool.
	MaxWaitingPerConnection int
	// LargeTransferShare is the part of the time large transfers together
	// may take while small requests are being answered (package pacing);
	// 1 does not pace them.
	LargeTransferShare float64
	// RequestTimeout bounds a whole request (the HTTP server's read and
	// write timeouts). Within it, each SFTP operation, a dial and a retry
	// included, is bounded by its connection's operationTimeout, except
	// streams (raw uploads and downloads, and the commands that read whole
	// files or directories), which may take the whole request's time; a
	// dial also by its connectTimeout, and so is the read of the
	// connection's Secret when its pool is built.
	RequestTimeout time.Duration
}

// Unlimited is no limit, as a limit of Options.
const Unlimited = -1

// Defaults are the gateway's options when nothing says otherwise: its
// flags' defaults.
func Defaults() Options {
	return Options{
		Addr:             ":8080",
		Networks:         egress.Networks{}.NetworksOrDefaults(),
		MetricsAddr:      ":9090",
		BasePath:         "/",
		IdleTimeout:      5 * time.Minute,
		LogFlushInterval: time.Second,
		Limits: Limits{
			MaxBodyBytes:            32 << 20,
			MaxUploadBytes:          64 << 30,
			RatePerKey:              1000,
			RateBurst:               2000,
			MemoryBudget:            budget.DefaultSize(),
			MaxRequestsPerKey:       128,
			MaxRequestsPerNamespace: 512,
			MaxWaitingPerConnection: pool.DefaultMaxWaiting,
			LargeTransferShare:      0.1,
			RequestTimeout:          5 * time.Minute,
		},
		Directories:           sftpdir.Limits{MaxEntries: sftpdir.DefaultMaxEntries, MaxBytes: sftpdir.DefaultMaxBytes},
		Audience:              kubeauth.DefaultAudience,
		AuthorizationCacheTTL: kubeauth.DefaultDecisionTTL,
		Namespace:             cmp.Or(os.Getenv("POD_NAMESPACE"), DefaultNamespace),
		Uploads: uploads.Limits{Expiry: uploads.DefaultExpiry, MaxPerNamespace: uploads.DefaultMaxPerNamespace,
			WritesPerNamespace: uploads.DefaultWritesPerNamespace, WritesBurst: uploads.DefaultWritesBurst},
		StateBudget: storedbytes.Limits{}.WithDefaults(),
		Audit:       audit.Bounds{}.WithDefaults(),
	}
}

// DefaultNamespace is the gateway's namespace when neither --namespace nor
// POD_NAMESPACE says otherwise.
const DefaultNamespace = "sftpgate-system"

// withDefaults is o with each zero field set to its default.
func (o Options) withDefaults() Options {
	d := Defaults()
	or := func(v *string, def string) {
		if *v == "" {
			*v = def
		}
	}
	orDuration := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	orInt := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	orInt64 := func(v *int64, def int64) {
		if *v == 0 {
			*v = def
		}
	}
	or(&o.Addr, d.Addr)
	or(&o.MetricsAddr, d.MetricsAddr)
	or(&o.BasePath, d.BasePath)
	o.Networks = o.NetworksOrDefaults()
	or(&o.Audience, d.Audience)
	orDuration(&o.IdleTimeout, d.IdleTimeout)
	orDuration(&o.LogFlushInterval, d.LogFlushInterval)
	orDuration(&o.AuthorizationCacheTTL, d.AuthorizationCacheTTL)
	or(&o.Namespace, d.Namespace)
	orDuration(&o.Uploads.Expiry, d.Uploads.Expiry)
	orInt(&o.Uploads.MaxPerNamespace, d.Uploads.MaxPerNamespace)
	if o.Uploads.WritesPerNamespace == 0 {
		o.Uploads.WritesPerNamespace = d.Uploads.WritesPerNamespace
	}
	orInt(&o.Uploads.WritesBurst, d.Uploads.WritesBurst)
	o.StateBudget = o.StateBudget.WithDefaults()
	o.Audit = o.Audit.WithDefaults()
	l, dl := &o.Limits, d.Limits
	orInt64(&l.MaxBodyBytes, dl.MaxBodyBytes)
	orInt64(&l.MaxUploadBytes, dl.MaxUploadBytes)
	if l.RatePerKey == 0 {
		l.RatePerKey = dl.RatePerKey
	}
	orInt(&l.RateBurst, dl.RateBurst)
	orInt64(&l.MemoryBudget, dl.MemoryBudget)
	orInt(&l.MaxRequestsPerKey, dl.MaxRequestsPerKey)
	orInt(&l.MaxRequestsPerNamespace, dl.MaxRequestsPerNamespace)
	orInt(&l.MaxWaitingPerConnection, dl.MaxWaitingPerConnection)
	if l.LargeTransferShare == 0 {
		l.LargeTransferShare = dl.LargeTransferShare
	}
	orDuration(&l.RequestTimeout, dl.RequestTimeout)
	orInt(&o.Directories.MaxEntries, d.Directories.MaxEntries)
	orInt64(&o.Directories.MaxBytes, d.Directories.MaxBytes)
	return o
}

// BindFlags registers the options on fs, set to their defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	*o = Defaults()
	fs.StringVar(&o.Addr, "listen-address", o.Addr, "Address the API listens on.")
	fs.StringVar(&o.MetricsAddr, "metrics-address", o.MetricsAddr,
		"Address of the Prometheus metrics endpoint (/metrics), apart from the API since it names every connection; 0 turns it off.")
	fs.BoolVar(&o.Profiling, "profiling", false, "Serve Go's pprof profiles at /debug/pprof/ on the metrics address.")
	fs.StringVar(&o.BasePath, "base-path", o.BasePath, "Path prefix of every endpoint, e.g. /sftp for an ingress that does not strip it.")
	o.BindNetworks(fs)
	fs.DurationVar(&o.IdleTimeout, "idle-timeout", o.IdleTimeout, "Close SSH connections unused for this long.")
	unlimited(fs, &o.LogFlushInterval, "log-flush-interval", time.ParseDuration,
		"Write log lines in batches at least this often (and at exit); 0 writes each line at once.")
	fs.Int64Var(&o.Limits.MaxBodyBytes, "max-body-bytes", o.Limits.MaxBodyBytes, "Largest JSON request body.")
	fs.Int64Var(&o.Limits.MaxUploadBytes, "max-upload-bytes", o.Limits.MaxUploadBytes, "Largest raw upload (Content-Type: application/octet-stream).")
	unlimited(fs, &o.Limits.RatePerKey, "rate-per-key", parseFloat, "Requests per second one API key may send to this replica; 0 is no limit.")
	fs.IntVar(&o.Limits.RateBurst, "rate-burst", o.Limits.RateBurst, "Requests one API key may send at once above its rate.")
	fs.DurationVar(&o.Limits.RequestTimeout, "request-timeout", o.Limits.RequestTimeout, "Bound on a whole request.")
	quantity(fs, &o.Limits.MemoryBudget, "memory-budget", "Bytes this replica may hold for request bodies and answers in flight, as a quantity (256Mi); "+
		"default a quarter of the container's memory limit, or 64Mi without one.")
	unlimited(fs, &o.Limits.MaxRequestsPerKey, "max-requests-per-key", strconv.Atoi,
		"Requests one API key may have in flight on this replica; 0 is no bound.")
	unlimited(fs, &o.Limits.MaxRequestsPerNamespace, "max-requests-per-namespace", strconv.Atoi,
		"Requests the keys of one namespace may have in flight on this replica together; 0 is no bound.")
	fs.IntVar(&o.Limits.MaxWaitingPerConnection, "max-waiting-per-connection", o.Limits.MaxWaitingPerConnection,
		"Requests that may wait for a session of one connection when all of its sessions are busy; more are answered 503.")
	fs.Func("audience", fmt.Sprintf("Audience of the ServiceAccount tokens the gateway accepts; empty accepts none (default %q).", o.Audience),
		func(v string) error {
			if o.NoServiceAccounts = v == ""; v != "" {
				o.Audience = v
			}
			return nil
		})
	fs.DurationVar(&o.AuthorizationCacheTTL, "authorization-cache-ttl", o.AuthorizationCacheTTL,
		"How long an RBAC decision for a ServiceAccount is used: a RoleBinding removed takes effect within it.")
	fs.Func("large-transfer-share", fmt.Sprintf("Part of the time large transfers (JSON reads and writes over 64 KiB, raw uploads and downloads, copy, hash) "+
		"together may take while small requests are being answered, from 0.01 to 1; 1 does not pace them (default %g).", o.Limits.LargeTransferShare),
		func(v string) error {
			share, err := strconv.ParseFloat(v, 64)
			if err != nil || share < 0.01 || share > 1 {
				return fmt.Errorf("want a number from 0.01 to 1, not %q", v)
			}
			o.Limits.LargeTransferShare = share
			return nil
		})
	fs.Func("max-directory-entries", fmt.Sprintf("Most entries of a directory read whole, from a server that allows one SFTP channel per connection "+
		"(OpenSSH's MaxSessions 1); list and rmdir of a larger one fail with too_large (default %d).", o.Directories.MaxEntries), func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("want a positive number, not %q", v)
		}
		o.Directories.MaxEntries = n
		return nil
	})
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "The gateway's namespace, where resumable uploads' records are kept.")
	fs.DurationVar(&o.Uploads.Expiry, "upload-expiry", o.Uploads.Expiry,
		"How long after its creation a resumable upload may go on; then the worker removes what it sent.")
	fs.IntVar(&o.Uploads.MaxPerNamespace, "max-uploads-per-namespace", o.Uploads.MaxPerNamespace,
		"Resumable uploads the connections of one namespace may have under way.")
	unlimited(fs, &o.Uploads.WritesPerNamespace, "upload-writes-per-namespace", parseFloat,
		"Requests of resumable uploads that write their records (all but HEAD and OPTIONS) one namespace may send to one replica per second; 0 is no limit.")
	fs.IntVar(&o.Uploads.WritesBurst, "upload-writes-burst", o.Uploads.WritesBurst, "Burst of --upload-writes-per-namespace.")
	storedbytes.RegisterFlags(fs, &o.StateBudget)
	audit.RegisterFlags(fs, &o.Audit)
	fs.BoolFunc("audit", "Keep the audit trail: a record of every request that reaches a tenant's connection, logged, stored and "+
		"delivered to its AuditSink (default true; false records none, which regulated tenants will not accept).", func(v string) error {
		on, err := strconv.ParseBool(v)
		o.NoAudit = !on
		return err
	})
	quantity(fs, &o.Directories.MaxBytes, "max-directory-bytes", "Most bytes the gateway may receive while it reads a directory whole "+
		"(see --max-directory-entries), as a quantity (32Mi) or in bytes (default 32Mi).")
}

// quantity registers a flag of a positive quantity of bytes, such as
// 128Mi or 1000000.
func quantity(fs *flag.FlagSet, p *int64, name, usage string) {
	fs.Func(name, usage, func(v string) error {
		q, err := resource.ParseQuantity(v)
		if err != nil || q.Value() <= 0 {
			return fmt.Errorf("want a positive quantity such as 128Mi, not %q", v)
		}
		*p = q.Value()
		return nil
	})
}

// unlimited registers a flag of a limit whose 0 is Unlimited, its default
// *p.
func unlimited[T int | float64 | time.Duration](fs *flag.FlagSet, p *T, name string, parse func(string) (T, error), usage string) {
	fs.Func(name, fmt.Sprintf("%s (default %v)", usage, *p), func(v string) error {
		n, err := parse(v)
		if err != nil || n < 0 {
			return fmt.Errorf("want a number, 0 or more, not %q", v)
		}
		if n == 0 {
			n = Unlimited
		}
		*p = n
		return nil
	})
}

func parseFloat(v string) (float64, error) { return strconv.ParseFloat(v, 64) }
