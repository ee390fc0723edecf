// Package worker is "sftpgate worker": the component that does the work
// that runs on its own, apart from requests. It polls the SftpWatches and
// delivers their events (package watches), and runs the Transfers
// (package transfers), and removes expired resumable uploads (package
// uploadexpiry); its replicas divide the work among themselves
// through Leases (package shard), and keep its state in ConfigMaps of
// their namespace (package statestore).
package worker

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sftpgate/sftpgate/api"
	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/auditstore"
	"github.com/sftpgate/sftpgate/internal/cmdline"
	"github.com/sftpgate/sftpgate/internal/egress"
	"github.com/sftpgate/sftpgate/internal/ftpdial"
	"github.com/sftpgate/sftpgate/internal/httpedge"
	"github.com/sftpgate/sftpgate/internal/logging"
	"github.com/sftpgate/sftpgate/internal/pool"
	"github.com/sftpgate/sftpgate/internal/profiling"
	"github.com/sftpgate/sftpgate/internal/s3dial"
	"github.com/sftpgate/sftpgate/internal/sftpdial"
	"github.com/sftpgate/sftpgate/internal/storedbytes"
	"github.com/sftpgate/sftpgate/internal/tenants"
	"github.com/sftpgate/sftpgate/internal/tracing"
	"github.com/sftpgate/sftpgate/internal/uploadrecord"
	"github.com/sftpgate/sftpgate/worker/auditsinks"
	"github.com/sftpgate/sftpgate/worker/deliver"
	"github.com/sftpgate/sftpgate/worker/ends"
	"github.com/sftpgate/sftpgate/worker/expectations"
	"github.com/sftpgate/sftpgate/worker/metrics"
	"github.com/sftpgate/sftpgate/worker/shard"
	"github.com/sftpgate/sftpgate/worker/statestore"
	"github.com/sftpgate/sftpgate/worker/tasks"
	"github.com/sftpgate/sftpgate/worker/transfers"
	"github.com/sftpgate/sftpgate/worker/uploadexpiry"
	"github.com/sftpgate/sftpgate/worker/watches"
)

// Options configure the worker; Run reads them from flags.
type Options struct {
	// Namespace is the worker's own, where its Leases and the watches'
	// states live.
	Namespace string
	// Identity names this replica in its Leases: its pod's name.
	Identity string
	// Networks are where connections, stores and sinks may not dial.
	egress.Networks
	// LeaseDuration is how long a replica's hold on a watch lasts without
	// renewal: a dead replica's watches move within it.
	LeaseDuration time.Duration
	// LeaseBuckets is how many buckets (each with a Lease) the items of
	// each kind fall into; every replica must count the same.
	LeaseBuckets int
	// LeaseSettle is how long the replicas' memberships must have lasted
	// before a replica takes work (its own), or takes free work and gives
	// any back (every one's): zero is LeaseDuration.
	LeaseSettle time.Duration
	// IdleTimeout closes SSH connections unused for this long.
	IdleTimeout time.Duration
	Limits      watches.Limits
	Transfers   transfers.Limits
	// UploadSweepInterval is how often expired resumable uploads are
	// looked for (their expiry is the gateway's --upload-expiry).
	UploadSweepInterval time.Duration
	// UploadGrace is how long past its expiry an upload is left.
	UploadGrace time.Duration
	// UploadMemory bounds the parts the replica's uploads to object stores
	// hold, and UploadMemoryPerNamespace one namespace's: 0 takes the
	// defaults (DefaultUploadMemory).
	UploadMemory, UploadMemoryPerNamespace int64
	// Expiry bounds the removal of expired uploads.
	Expiry uploadexpiry.Limits
	// Expectations bound the FileExpectations evaluated.
	Expectations expectations.Limits
	// Clock is the time expectations' windows are read on; nil is
	// time.Now. Tests set it to a clock of their own.
	Clock func() time.Time
	// StateBudget bounds the bytes of states stored for each namespace
	// (with the gateway's upload records), and for all; zero limits are
	// the defaults.
	StateBudget storedbytes.Limits
	// Audit bounds the records held before they are stored, AuditSinks
	// what is stored of each namespace's.
	Audit      audit.Bounds
	AuditSinks auditsinks.Limits
	// APIQPS and APIBurst bound the requests a replica sends the API
	// server: a rate and its bursts.
	APIQPS   float64
	APIBurst int
	// MetricsAddr serves /metrics; "0" serves it nowhere. ProbeAddr
	// serves /healthz and /readyz.
	MetricsAddr, ProbeAddr string
	// Profiling serves Go's pprof profiles at /debug/pprof/ next to the
	// metrics.
	Profiling bool
	// Log is where the worker logs, its manager's lines too (Run: from
	// --log-level); nil logs nothing.
	Log *slog.Logger
}

// DefaultNamespace is the worker's namespace when neither --namespace nor
// POD_NAMESPACE says otherwise.
const DefaultNamespace = "sftpgate-system"

// BindFlags registers the options on fs with their defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	host, _ := os.Hostname()
	fs.StringVar(&o.Namespace, "namespace", cmp.Or(os.Getenv("POD_NAMESPACE"), DefaultNamespace),
		"The worker's namespace, where its Leases and the watches' states are kept.")
	fs.StringVar(&o.Identity, "identity", cmp.Or(os.Getenv("POD_NAME"), host), "This replica's name in its Leases (its pod's name).")
	o.BindNetworks(fs)
	fs.DurationVar(&o.LeaseDuration, "lease-duration", shard.DefaultLeaseDuration,
		"How long a replica's hold on a watch lasts without renewal: a dead replica's watches move to another within it.")
	fs.IntVar(&o.LeaseBuckets, "lease-buckets", shard.DefaultBuckets,
		"Buckets the watches (and the transfers) fall into, each with a Lease: the Leases do not grow with the work. Every replica must say the same.")
	fs.DurationVar(&o.LeaseSettle, "lease-settle", 0,
		"How long a replica's membership must have lasted before it takes work, and every replica's before free work is taken or any given back, so that replicas started together divide the work once; 0 is --lease-duration.")
	fs.DurationVar(&o.IdleTimeout, "idle-timeout", 5*time.Minute, "Close SSH connections unused for this long.")
	d := watches.DefaultLimits()
	o.Limits = d
	fs.IntVar(&o.Limits.MaxFiles, "max-watch-files", d.MaxFiles, "Most files one watch tracks; a larger folder is DirectoryTooLarge.")
	fs.IntVar(&o.Limits.MaxPending, "max-pending-events", d.MaxPending,
		"Most events one watch holds undelivered; past it, changes wait on the server for later polls.")
	fs.IntVar(&o.Limits.MaxWatchesPerNamespace, "max-watches-per-namespace", d.MaxWatchesPerNamespace,
		"Most watches of one namespace that run; the newer ones are OverQuota.")
	fs.IntVar(&o.Limits.MaxWatchesTotal, "max-watches-total", d.MaxWatchesTotal,
		"Most watches that run in the cluster, all namespaces: what its API server and etcd were measured to hold; 0 for no bound. Past it the newer are OverQuota, the operator's namespaces' taking places before web UI accounts'.")
	fs.IntVar(&o.Limits.MaxAccountWatchesTotal, "max-account-watches-total", d.MaxAccountWatchesTotal,
		"Of those, the most of all web UI accounts (namespaces labelled sftpgate.dev/account) together; below --max-watches-total, 0 for no bound only without it. Set the web UI's flag of the name alike: it stops sign-ups there.")
	fs.IntVar(&o.Limits.MaxTransfersPerNamespace, "max-watch-transfers-per-namespace", d.MaxTransfersPerNamespace,
		"Most Transfers the watches of one namespace keep (made by spec.transfer, not yet deleted); past it the next file's waits (TransfersAtLimit).")
	fs.Float64Var(&o.Limits.EventsPerMinutePerNamespace, "events-per-minute-per-namespace", d.EventsPerMinutePerNamespace,
		"Events (and tries) one namespace's watches may send a minute, per replica.")
	fs.IntVar(&o.Limits.MaxHeldFiles, "max-held-files", d.MaxHeldFiles,
		"Most files the watches this replica holds track together (their memory); past it, a watch that would track more waits (ReplicaAtCapacity).")
	fs.IntVar(&o.Limits.MaxHeldFilesPerNamespace, "max-held-files-per-namespace", d.MaxHeldFilesPerNamespace,
		"Of those, the most one namespace's watches track on this replica.")
	fs.IntVar(&o.Limits.Polls, "max-polls", d.Polls, "Polls in flight on this replica.")
	fs.IntVar(&o.Limits.PollsPerNamespace, "max-polls-per-namespace", d.PollsPerNamespace, "Polls of one namespace's watches in flight on this replica.")
	fs.DurationVar(&o.Limits.PollTimeout, "poll-timeout", d.PollTimeout,
		"Longest a poll may take (and hold its slot): a folder that takes longer to list fails its poll.")
	fs.DurationVar(&o.Limits.PollTimeEvery, "poll-time-interval", d.PollTimeEvery,
		"Most time between two writes of a watch's status in which only lastPollTime changed (each watch's between half of it and it): the writes of watches at rest do not grow with their polls.")
	t := transfers.DefaultLimits()
	o.Transfers = t
	fs.IntVar(&o.Transfers.MaxRunningPerNamespace, "max-transfers-per-namespace", t.MaxRunningPerNamespace,
		"Most transfers of one namespace that run at once; the newer ones are Queued.")
	fs.IntVar(&o.Transfers.MaxAccountRunningTotal, "max-account-transfers-total", t.MaxAccountRunningTotal,
		"Most transfers of all web UI accounts together that run at once; the newer ones are OverQuota until others end.")
	fs.IntVar(&o.Transfers.Streams, "max-transfer-streams", t.Streams, "Files copied at once on this replica.")
	fs.IntVar(&o.Transfers.StreamsPerNamespace, "max-transfer-streams-per-namespace", t.StreamsPerNamespace,
		"Files of one namespace's transfers copied at once on this replica.")
	fs.IntVar(&o.Transfers.MaxFiles, "max-transfer-files", t.MaxFiles, "Most files one transfer copies; a larger source is TooManyFiles.")
	fs.DurationVar(&o.Transfers.StallTimeout, "transfer-stall-timeout", t.StallTimeout,
		"A file's copy that makes no progress for this long fails its try (and frees its stream).")
	fs.IntVar(&o.Transfers.RangesPerFile, "transfer-ranges-per-file", t.RangesPerFile,
		"Ranges of a large file (64 MiB and up, server to server) copied at once, each on sessions of its own; 1 copies it as one stream.")
	fs.Func("write-interval", fmt.Sprintf("Least time between two writes of a watch's or a transfer's status, and of its state or plan: each is written when it changed, no more often unless its conditions changed (default %v).", d.WriteEvery),
		func(v string) error {
			every, err := time.ParseDuration(v)
			if err != nil || every <= 0 {
				return fmt.Errorf("want a duration such as 5s, not %q", v)
			}
			o.Limits.WriteEvery, o.Transfers.WriteEvery = every, every
			return nil
		})
	o.UploadMemory, o.UploadMemoryPerNamespace = DefaultUploadMemory, DefaultUploadMemoryPerNamespace
	quantityFlag(fs, &o.UploadMemory, "max-upload-memory",
		"Memory the parts of this replica's uploads to object stores may hold together; a part waits for room")
	quantityFlag(fs, &o.UploadMemoryPerNamespace, "max-upload-memory-per-namespace",
		"Of it, what one namespace's uploads may hold; a store whose part would not fit is refused")
	fs.DurationVar(&o.UploadSweepInterval, "upload-sweep-interval", uploadexpiry.DefaultInterval,
		"How often expired resumable uploads are looked for and removed (they expire after the gateway's --upload-expiry).")
	fs.DurationVar(&o.UploadGrace, "upload-expiry-grace", uploadexpiry.DefaultGrace,
		"How long past its expiry an upload is left before it is removed: at least the gateway's --request-timeout and a minute, since a part sent just before the expiry may take that long.")
	e := uploadexpiry.DefaultLimits()
	o.Expiry = e
	fs.IntVar(&o.Expiry.Connections, "expiry-connections", e.Connections,
		"Connections whose expired uploads are removed at once on this replica (each connection's one after another).")
	fs.IntVar(&o.Expiry.ConnectionsPerNamespace, "expiry-connections-per-namespace", e.ConnectionsPerNamespace,
		"Of those, the most of one namespace's connections.")
	fs.DurationVar(&o.Expiry.Timeout, "expiry-timeout", e.Timeout,
		"Longest the removal of one expired upload may take (dial included), whatever the connection's own timeouts say.")
	fs.IntVar(&o.Expiry.FailedSweeps, "expiry-failed-sweeps", e.FailedSweeps,
		"Sweeps that may fail to remove an expired upload's partial file (its server not answering, or refusing) before the upload is abandoned: its record removed, with an audit record, its partial file perhaps left on the server.")
	x := expectations.DefaultLimits()
	o.Expectations = x
	fs.IntVar(&o.Expectations.MaxPerNamespace, "max-expectations-per-namespace", x.MaxPerNamespace,
		"FileExpectations of one namespace evaluated at most; the newer are OverQuota.")
	fs.IntVar(&o.Expectations.MaxTotal, "max-expectations-total", x.MaxTotal,
		"FileExpectations evaluated in the cluster at most; the newer are OverQuota.")
	fs.IntVar(&o.Expectations.MaxAccountTotal, "max-account-expectations-total", x.MaxAccountTotal,
		"Of those, the most of web UI accounts' namespaces.")
	fs.IntVar(&o.Expectations.OutcomesKept, "expectation-outcomes-kept", x.OutcomesKept,
		"Outcomes an expectation's status keeps (status.lastOutcomes), the newest; at most 50.")
	fs.IntVar(&o.Expectations.MaxPending, "expectation-pending-outcomes", x.MaxPending,
		"Outcomes an expectation holds for a sink that does not take them; past it the oldest is dropped, and the status says so.")
	fs.IntVar(&o.Expectations.Listings, "max-expectation-listings", x.Listings, "Listings of expected folders in flight on this replica.")
	fs.IntVar(&o.Expectations.ListingsPerNamespace, "max-expectation-listings-per-namespace", x.ListingsPerNamespace,
		"Of those, the most of one namespace's expectations.")
	fs.IntVar(&o.Expectations.MaxEntries, "max-expectation-entries", x.MaxEntries,
		"Entries a listing of an expected folder reads at most; a larger folder is DirectoryTooLarge.")
	o.StateBudget = storedbytes.Limits{}.WithDefaults()
	storedbytes.RegisterFlags(fs, &o.StateBudget)
	audit.RegisterFlags(fs, &o.Audit)
	fs.IntVar(&o.AuditSinks.Outbox, "audit-outbox-records", auditsinks.DefaultOutbox,
		"Undelivered audit records stored for one namespace's AuditSink at most; past it, the oldest are dropped and a record says so.")
	fs.IntVar(&o.AuditSinks.Recent, "audit-recent-records", auditsinks.DefaultRecent,
		"Audit records of one namespace kept once delivered (or without an AuditSink): what the web UI's Activity page shows.")
	fs.DurationVar(&o.AuditSinks.StuckAfter, "audit-stuck-after", auditsinks.DefaultStuckAfter,
		"How long a namespace's oldest undelivered audit record may wait before its AuditSink is not Ready (DeliveryStuck), whatever the cause.")
	fs.Float64Var(&o.APIQPS, "kube-api-qps", 50, "Requests a second this replica may send the Kubernetes API server (its writes of statuses, states and Leases).")
	fs.IntVar(&o.APIBurst, "kube-api-burst", 100, "Requests this replica may send the API server at once beyond --kube-api-qps.")
	fs.StringVar(&o.MetricsAddr, "metrics-address", ":9090", "Address of the Prometheus metrics endpoint (/metrics); 0 turns it off.")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	fs.BoolVar(&o.Profiling, "profiling", false, "Serve Go's pprof profiles at /debug/pprof/ on the metrics address.")
}

// Worker is a running worker replica.
type Worker struct {
	mgr       ctrl.Manager
	metrics   *metrics.Metrics
	runner    *watches.Runner
	transfers *transfers.Runner
	sinks     *auditsinks.Runner
	// expectations runs the FileExpectations.
	expectations *expectations.Runner
	audit        *audit.Trail
	// members is the replica's one member Lease, for every kind.
	members *shard.Membership
	log     *slog.Logger
}

// New builds a worker replica on the cluster of restConfig.
func New(restConfig *rest.Config, opts Options) (*Worker, error) {
	if opts.Identity == "" || opts.Namespace == "" {
		return nil, errors.New("the worker needs --identity and --namespace")
	}
	if err := opts.Limits.CheckTotals(); err != nil {
		return nil, err
	}
	policy, err := opts.DialPolicy()
	if err != nil {
		return nil, err
	}
	sharded, err := labels.NewRequirement(shard.LabelShard, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	stored, storedCache, indexStored := storedbytes.Watch(opts.Namespace)
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme: api.Scheme(),
		// The manager's client is the cache's: only watches, connections,
		// the replicas' Leases and the metadata of what is stored for
		// tenants are cached (direct reads the rest).
		Cache: cache.Options{
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				&coordinationv1.Lease{}: {Namespaces: map[string]cache.Config{opts.Namespace: {}}, Label: labels.NewSelector().Add(*sharded)},
				stored:                  storedCache,
			},
		},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: cmp.Or(opts.ProbeAddr, "0"),
		Logger:                 logging.Logr(opts.Log),
	})
	if err != nil {
		return nil, err
	}
	// Secrets, sinks, states and Leases are read at the API server when
	// needed: never cached or watched, nor readable beyond what RBAC gives.
	direct, err := client.New(restConfig, client.Options{Scheme: api.Scheme()})
	if err != nil {
		return nil, err
	}
	// The Leases have a client of their own, as client-go's leader
	// election has: a renewal must not wait behind the replica's bulk
	// writes in --kube-api-qps, or the replica lapses and drops its work.
	leaseConfig := rest.CopyConfig(restConfig)
	leaseConfig.QPS, leaseConfig.Burst = -1, 0
	leases, err := client.New(leaseConfig, client.Options{Scheme: api.Scheme()})
	if err != nil {
		return nil, err
	}
	kinds := tenants.Kinds{Reader: mgr.GetCache()}
	if err := indexStored(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	budget := &storedbytes.Budget{Cache: mgr.GetCache(), Namespace: opts.Namespace, Limits: opts.StateBudget.WithDefaults(), Tenants: kinds}
	m := metrics.New()
	if err := m.Register(budget); err != nil {
		return nil, err
	}
	pools := &pool.Pools{Secrets: direct, IdleTimeout: opts.IdleTimeout, Dials: m.Dials, Component: "worker", Log: opts.Log}
	if err := m.Register(pools); err != nil {
		return nil, err
	}
	stores := &s3dial.Dialer{Policy: policy, Tenants: kinds,
		Memory: s3dial.NewMemory(cmp.Or(opts.UploadMemory, DefaultUploadMemory), cmp.Or(opts.UploadMemoryPerNamespace, DefaultUploadMemoryPerNamespace)).Of}
	ends := &ends.Ends{Pools: pools, Dialers: map[string]pool.Dialer{
		v1alpha1.KindSftpConnection: &sftpdial.Dialer{Policy: policy, Tenants: kinds}, v1alpha1.KindFtpConnection: &ftpdial.Dialer{Policy: policy, Tenants: kinds},
		v1alpha1.KindObjectStore: stores,
	}}
	records := &auditstore.Store{Client: direct, Reader: mgr.GetCache(), Namespace: opts.Namespace, Budget: budget}
	trail := audit.NewTrail("worker", opts.Log).Keep(records, opts.Audit)
	trail.Dropped = m.AuditDropped.WithLabelValues("held")
	sender, err := deliver.New(policy, kinds)
	if err != nil {
		return nil, err
	}
	sender.Outcomes = m.Events
	// One member Lease for every kind (Start renews it), and bucket
	// Leases of each kind's own.
	members := &shard.Membership{Client: leases, Namespace: opts.Namespace, Identity: opts.Identity,
		LeaseDuration: opts.LeaseDuration, Buckets: opts.LeaseBuckets}
	if err := m.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sftpgate_worker_member_live", Help: "1 while this replica's membership Lease is current: it counts in every kind's share of the work.",
	}, func() float64 {
		if members.Live() {
			return 1
		}
		return 0
	})); err != nil {
		return nil, err
	}
	leasesOf := func(kind string) *shard.Shard {
		return &shard.Shard{Cache: mgr.GetCache(), Client: leases, Namespace: opts.Namespace, Kind: kind, Identity: opts.Identity,
			Membership: members, LeaseDuration: opts.LeaseDuration, SettleTime: opts.LeaseSettle, Buckets: opts.LeaseBuckets}
	}
	syncInterval := cmp.Or(opts.LeaseDuration, shard.DefaultLeaseDuration) / 3
	recorder := mgr.GetEventRecorder("sftpgate-worker")
	envOf := func(kind string) tasks.Env {
		return tasks.Env{Cache: mgr.GetCache(), Client: direct, Ends: ends, Tenants: kinds, Audit: trail, Sender: sender, Metrics: m,
			Recorder: recorder, Log: opts.Log, Shard: leasesOf(kind),
			States:       &statestore.Store{Client: direct, Cache: mgr.GetCache(), Namespace: opts.Namespace, Kind: kind, Budget: budget},
			SyncInterval: syncInterval}
	}
	r := &watches.Runner{Env: envOf("sftpwatch"), Limits: opts.Limits}
	tr := &transfers.Runner{Env: envOf("transfer"), Limits: opts.Transfers}
	sinks := &auditsinks.Runner{Env: envOf("audit"), Store: records, Budget: budget, Limits: opts.AuditSinks}
	expecting := &expectations.Runner{Env: envOf("fileexpectation"), Limits: opts.Expectations, Now: opts.Clock}
	for _, runnable := range []manager.Runnable{
		r, tr, sinks, expecting,
		&uploadexpiry.Sweeper{
			Records: &uploadrecord.Store{Client: direct, Reader: mgr.GetCache(), Namespace: opts.Namespace}, Connections: mgr.GetCache(), Ends: ends,
			Shard: leasesOf("upload"), Removed: m.UploadsExpired, RemovedBytes: m.UploadBytesExpired,
			SyncInterval: syncInterval, Interval: cmp.Or(opts.UploadSweepInterval, uploadexpiry.DefaultInterval), Grace: cmp.Or(opts.UploadGrace, uploadexpiry.DefaultGrace),
			Limits: opts.Expiry.WithDefaults(), Log: opts.Log, Audit: trail,
		},
	} {
		if err := mgr.Add(runnable); err != nil {
			return nil, err
		}
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { pools.Run(ctx); return nil })); err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, err
	}
	return &Worker{mgr: mgr, members: members, log: logging.OrDiscard(opts.Log), metrics: m, runner: r, transfers: tr, sinks: sinks,
		expectations: expecting, audit: trail}, nil
}

// Start runs the worker until ctx ends: then it stops its watches, stores
// what they hold and gives their Leases back.
func (w *Worker) Start(ctx context.Context) error {
	informer, err := w.mgr.GetCache().GetInformer(ctx, &v1alpha1.SftpWatch{})
	if err != nil {
		return err
	}
	// A watch whose spec changed is looked at again at once.
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(old, obj any) {
		o, okOld := old.(*v1alpha1.SftpWatch)
		n, okNew := obj.(*v1alpha1.SftpWatch)
		if okOld && okNew && o.Generation != n.Generation {
			w.runner.Wake(n.UID)
		}
	}}); err != nil {
		return err
	}
	informer, err = w.mgr.GetCache().GetInformer(ctx, &v1alpha1.FileExpectation{})
	if err != nil {
		return err
	}
	// An expectation whose spec changed is looked at again at once.
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(old, obj any) {
		o, okOld := old.(*v1alpha1.FileExpectation)
		n, okNew := obj.(*v1alpha1.FileExpectation)
		if okOld && okNew && o.Generation != n.Generation {
			w.expectations.Wake(n.UID)
		}
	}}); err != nil {
		return err
	}
	informer, err = w.mgr.GetCache().GetInformer(ctx, &v1alpha1.Transfer{})
	if err != nil {
		return err
	}
	// A new transfer starts at once, not at the next sync.
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(any) { w.transfers.Kick() }}); err != nil {
		return err
	}
	informer, err = w.mgr.GetCache().GetInformer(ctx, &v1alpha1.AuditSink{})
	if err != nil {
		return err
	}
	// A new sink's namespace is taken at once, a changed one looked at
	// again at once.
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { w.sinks.Kick() },
		UpdateFunc: func(old, obj any) {
			o, okOld := old.(*v1alpha1.AuditSink)
			n, okNew := obj.(*v1alpha1.AuditSink)
			if okOld && okNew && o.Generation != n.Generation {
				w.sinks.Wake(n.Namespace)
			}
		},
	}); err != nil {
		return err
	}
	// What the work reads of the cache besides, started with the rest: a
	// replica that takes over another's work then waits for no cache to
	// sync, and holds at rest what it holds at work.
	namespaces := &metav1.PartialObjectMetadata{}
	namespaces.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	for _, obj := range []client.Object{&v1alpha1.SftpConnection{}, &v1alpha1.ObjectStore{}, &v1alpha1.HolidayCalendar{}, namespaces} {
		if _, err := w.mgr.GetCache().GetInformer(ctx, obj); err != nil {
			return err
		}
	}
	// Stores records until Close, once every task has stopped.
	go w.audit.Run(context.WithoutCancel(ctx))
	// The membership is renewed once the caches synced: every member is
	// counted in every share, so one still starting (a replacement of a
	// killed replica, its caches syncing for minutes) would hold back the
	// work the survivors should take within a lease.
	renewCtx, stopRenewing := context.WithCancel(ctx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		if w.mgr.GetCache().WaitForCacheSync(renewCtx) {
			w.members.Run(renewCtx, func(err error) { w.log.Error("renewing the replica's membership", "error", err) })
		}
	}()
	err = w.mgr.Start(ctx)
	// Every kind gave its buckets back: the membership goes last, with no
	// renewal after.
	stopRenewing()
	<-renewed
	leaveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := w.members.Leave(leaveCtx); err != nil {
		w.log.Error("leaving the replicas", "error", err)
	}
	// Every task has stopped: the chains end whole.
	w.audit.Close(context.WithoutCancel(ctx))
	return err
}

// MetricsHandler serves the worker's metrics at /metrics and, with
// profiles, pprof at /debug/pprof/.
func (w *Worker) MetricsHandler(profiles bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", w.metrics.Handler())
	if profiles {
		profiling.Register(mux)
	}
	return mux
}

// defaultGCPercent is the worker's GOGC unless the environment sets one.
// Its heap is mostly its caches (every watch and transfer of the cluster,
// and the states' metadata), live as long as the process: at Go's default
// of 100 a replica also held as much garbage as that, the most of its
// memory at rest; at 50 it holds half as much, and the collections, rare
// at rest, cost little (docs/benchmarks.md).
const defaultGCPercent = 50

// Run runs "sftpgate worker" until ctx ends.
func Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	var opts Options
	opts.BindFlags(fs)
	started, err := cmdline.Parse("worker", fs, args, nil)
	if err != nil {
		return err
	}
	defer started.Flush()
	opts.Log = started.Log
	stopTracing, err := tracing.Setup(ctx, "worker")
	if err != nil {
		return err
	}
	defer func() { _ = stopTracing(context.WithoutCancel(ctx)) }()
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	restConfig := started.Config
	// controller-runtime leaves the rate to the API server's priority and
	// fairness, which exempts privileged credentials; thousands of watches
	// starting at once must not send thousands of requests at once.
	restConfig.QPS, restConfig.Burst = float32(opts.APIQPS), opts.APIBurst
	w, err := New(restConfig, opts)
	if err != nil {
		return err
	}
	if opts.MetricsAddr != "0" {
		srv := &http.Server{Addr: opts.MetricsAddr, Handler: w.MetricsHandler(opts.Profiling), ReadHeaderTimeout: 10 * time.Second,
			MaxHeaderBytes: httpedge.MaxHeaderBytes}
		go func() { _ = srv.ListenAndServe() }()
		defer func() { _ = srv.Close() }()
	}
	return w.Start(ctx)
}

// The defaults of --max-upload-memory and --max-upload-memory-per-namespace:
// at a store's default parts (8 MiB, four in flight, five held) a
// namespace copies six large files into buckets at full speed.
const (
	DefaultUploadMemory             = 1 << 30
	DefaultUploadMemoryPerNamespace = 256 << 20
)

// quantityFlag is a flag of bytes given as a quantity (256Mi).
func quantityFlag(fs *flag.FlagSet, p *int64, name, usage string) {
	fs.Func(name, fmt.Sprintf("%s, as a quantity (default %s).", usage, resource.NewQuantity(*p, resource.BinarySI)), func(v string) error {
		q, err := resource.ParseQuantity(v)
		if err != nil || q.Value() <= 0 {
			return fmt.Errorf("want a quantity such as 256Mi, not %q", v)
		}
		*p = q.Value()
		return nil
	})
}
