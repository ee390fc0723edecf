// Package controllers holds the operator's reconcilers and RunManager, the
// "sftpgate manager" subcommand that runs them.
package controllers

import (
	"cmp"
	"context"
	"flag"
	"os"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sftpgate/sftpgate/api"
	"github.com/sftpgate/sftpgate/internal/cmdline"
	"github.com/sftpgate/sftpgate/internal/egress"
	"github.com/sftpgate/sftpgate/internal/ftpdial"
	"github.com/sftpgate/sftpgate/internal/logging"
	"github.com/sftpgate/sftpgate/internal/s3dial"
	"github.com/sftpgate/sftpgate/internal/sftpdial"
	"github.com/sftpgate/sftpgate/internal/tenants"
)

// Options configure the controllers; RunManager reads them from flags.
type Options struct {
	TestInterval       time.Duration
	MaxConcurrentTests int
	// MaxTestsPerNamespace bounds the tests one namespace runs at once.
	MaxTestsPerNamespace int
	// MaxTestBackoff bounds the wait after failed tests in a row.
	MaxTestBackoff time.Duration
	// NewOrFailingTestsPerMinute bounds a namespace's tests of connections
	// not proven good.
	NewOrFailingTestsPerMinute int
	// Networks are where connections and stores may not dial.
	egress.Networks
	// Namespace is the manager's own, where it keeps slug reservations.
	Namespace string
	// SlugGracePeriod and TokenGracePeriod are how long a freed slug or
	// token is held for its namespace.
	SlugGracePeriod, TokenGracePeriod time.Duration
	// SweepInterval is how often freed slugs and tokens are looked for;
	// tests shorten it. Zero means every 30 seconds.
	SweepInterval time.Duration
}

// DefaultNamespace is the manager's namespace when neither --namespace nor
// POD_NAMESPACE says otherwise.
const DefaultNamespace = "sftpgate-system"

// BindFlags registers the controller options on fs with their defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.DurationVar(&o.TestInterval, "test-interval", 5*time.Minute,
		"How often each SftpConnection is tested again when nothing changed; 0 tests only on changes.")
	fs.IntVar(&o.MaxConcurrentTests, "max-concurrent-tests", 8,
		"How many connection tests run at once.")
	fs.IntVar(&o.MaxTestsPerNamespace, "max-tests-per-namespace", 2,
		"How many connection tests one namespace runs at once; its other connections wait in line, and other namespaces' tests go ahead.")
	fs.DurationVar(&o.MaxTestBackoff, "max-test-backoff", 5*time.Minute,
		"The longest wait before testing again a connection whose tests keep failing (5s after the first failure, doubling).")
	fs.IntVar(&o.NewOrFailingTestsPerMinute, "new-or-failing-tests-per-minute", 30,
		"How many tests of new, changed or failing connections one namespace runs per minute (and at once, after a quiet minute); retests of connections that passed are not counted. 0 is no limit.")
	o.BindNetworks(fs)
	fs.StringVar(&o.Namespace, "namespace", cmp.Or(os.Getenv("POD_NAMESPACE"), DefaultNamespace),
		"The manager's namespace, where it keeps reservations of slugs and tokens (Leases); $POD_NAMESPACE by default.")
	fs.DurationVar(&o.SlugGracePeriod, "slug-grace-period", 5*time.Minute,
		"How long a slug freed by a deleted (or renamed) connection is held for that connection's namespace before another namespace's claim gets it.")
	fs.DurationVar(&o.TokenGracePeriod, "token-grace-period", 5*time.Minute,
		"How long an API token freed by a deleted (or changed) ApiKey is held for that key's namespace before a key in another namespace may have it.")
}

// Setup adds the controllers to mgr: connection tests, API keys,
// transfer schedules and finished transfers' expiry.
func (o *Options) Setup(ctx context.Context, mgr ctrl.Manager) error {
	policy, err := o.DialPolicy()
	if err != nil {
		return err
	}
	keys := o.ApiKeyReconciler(mgr)
	if err := keys.SetupWithManager(ctx, mgr); err != nil {
		return err
	}
	// Each kind has its test slots (they wake its own controller); the
	// namespace's budget counts every kind's tests.
	budget := newTestBudget(o.NewOrFailingTestsPerMinute)
	gate := func() testGate {
		return testGate{SecretMetadata: mgr.GetCache(), APIReader: mgr.GetAPIReader(),
			Pace:  testPace{Interval: o.TestInterval, MaxBackoff: o.MaxTestBackoff},
			Slots: newTestSlots(o.MaxTestsPerNamespace), TestBudget: budget}
	}
	kinds := tenants.Kinds{Reader: mgr.GetCache()}
	sl := &slugs{Client: mgr.GetClient(), Held: o.reservations(mgr, "slug", o.SlugGracePeriod)}
	sl.Held.inUse = sl.inUse
	connections := &SftpConnectionReconciler{
		Client:             mgr.GetClient(),
		Recorder:           mgr.GetEventRecorder("sftpconnection-controller"),
		Dialer:             &sftpdial.Dialer{Policy: policy, Tenants: kinds},
		testGate:           gate(),
		MaxConcurrentTests: o.MaxConcurrentTests,
		Slugs:              sl,
	}
	if err := connections.SetupWithManager(ctx, mgr); err != nil {
		return err
	}
	for _, kind := range []testedKind{
		objectStores(&s3dial.Dialer{Policy: policy, Tenants: kinds}),
		ftpConnections(&ftpdial.Dialer{Policy: policy, Tenants: kinds}),
	} {
		r := &TestedReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(kind.name + "-controller"),
			testGate: gate(), MaxConcurrentTests: o.MaxConcurrentTests, Slugs: sl, kind: kind}
		if err := r.SetupWithManager(ctx, mgr); err != nil {
			return err
		}
	}
	schedules := &TransferScheduleReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("transferschedule-controller")}
	if err := schedules.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&TransferTTLReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&ShareLinkReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("sharelink-controller")}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := registerMetrics(mgr.GetCache(), mgr.GetScheme()); err != nil {
		return err
	}
	// Runnables added with Add run on the leader only.
	if err := mgr.Add(keys.Tokens); err != nil {
		return err
	}
	return mgr.Add(connections.Slugs.Held)
}

// ApiKeyReconciler returns the API key reconciler Setup adds to mgr.
func (o *Options) ApiKeyReconciler(mgr ctrl.Manager) *ApiKeyReconciler {
	keys := &ApiKeyReconciler{
		Client:         mgr.GetClient(),
		SecretMetadata: mgr.GetCache(),
		APIReader:      mgr.GetAPIReader(),
		Recorder:       mgr.GetEventRecorder("apikey-controller"),
		Tokens:         o.reservations(mgr, "token", o.TokenGracePeriod),
	}
	keys.Tokens.inUse = keys.tokenInUse
	return keys
}

func (o *Options) reservations(mgr ctrl.Manager, kind string, grace time.Duration) *reservations {
	return &reservations{client: mgr.GetClient(), apiReader: mgr.GetAPIReader(), namespace: o.Namespace, kind: kind, grace: grace,
		sweep: cmp.Or(o.SweepInterval, defaultSweep)}
}

// ManagerOptions are the controller-runtime options every sftpgate manager
// uses. Secrets' data is never cached: the client reads Secrets from the API
// server, and the cache keeps only their metadata, without annotations
// (kubectl's last-applied-configuration annotation holds a Secret's data).
// Of Leases, the cache holds the reservations in the manager's namespace.
func (o *Options) ManagerOptions() ctrl.Options {
	reservation, err := labels.NewRequirement(LabelReservation, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant, valid key
	}
	return ctrl.Options{
		Scheme: api.Scheme(),
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		Cache: cache.Options{
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				&corev1.Secret{}: {Transform: stripSecretMetadata},
				&coordinationv1.Lease{}: {
					Namespaces: map[string]cache.Config{o.Namespace: {}},
					Label:      labels.NewSelector().Add(*reservation),
				},
			},
		},
	}
}

func stripSecretMetadata(in any) (any, error) {
	if obj, err := meta.Accessor(in); err == nil {
		obj.SetAnnotations(nil)
		obj.SetManagedFields(nil)
	}
	return in, nil
}

// RunManager runs "sftpgate manager": the controllers, until ctx ends.
func RunManager(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	var (
		opts        Options
		metricsAddr string
		probeAddr   string
		leaderElect bool
	)
	opts.BindFlags(fs)
	fs.StringVar(&metricsAddr, "metrics-bind-address", "0", "Address of the Prometheus metrics endpoint; 0 turns it off.")
	fs.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	fs.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader, so that only one of several replicas reconciles.")
	started, err := cmdline.Parse("manager", fs, args, nil)
	if err != nil {
		return err
	}
	defer started.Flush()
	log, restConfig := started.Log, started.Config
	mgrOpts := opts.ManagerOptions()
	mgrOpts.Metrics = metricsserver.Options{BindAddress: metricsAddr}
	mgrOpts.HealthProbeBindAddress = probeAddr
	mgrOpts.LeaderElection = leaderElect
	mgrOpts.LeaderElectionID = "manager.sftpgate.dev"
	// Its Lease beside its reservations: out of a cluster there is no
	// pod namespace to default to.
	mgrOpts.LeaderElectionNamespace = opts.Namespace
	mgrOpts.LeaderElectionReleaseOnCancel = true
	mgrOpts.Logger = logging.Logr(log)
	mgr, err := ctrl.NewManager(restConfig, mgrOpts)
	if err != nil {
		return err
	}
	if err := opts.Setup(ctx, mgr); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
