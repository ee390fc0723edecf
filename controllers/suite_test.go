package controllers_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/controllers"
	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
)

// The test kit's, as every test package has them.
var must = testkit.Must

var (
	// k8s is a client straight to the API server, as kubectl would be.
	k8s client.Client
	// managerLogs is everything the manager logged, for tests that check
	// that no secret shows there.
	managerLogs testkit.Log
	// mgr is the manager the tests run, for reconcilers they run besides it.
	mgr ctrl.Manager
	// managerOptions are the options mgr runs with.
	managerOptions controllers.Options
)

// slugGracePeriod is the manager's --slug-grace-period in these tests: long
// enough that a test sees a freed slug held, short enough that a test
// sees it pass.
const slugGracePeriod = 10 * time.Second

// testBudget is the manager's --new-or-failing-tests-per-minute in these
// tests: more than any other test makes connections in one namespace.
const testBudget = 20

// TestMain runs one control plane and one manager for the whole package;
// each test works in a namespace of its own.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrl.SetLogger(zap.New(zap.WriteTo(io.MultiWriter(os.Stderr, &managerLogs)), zap.UseDevMode(true)))
	env, c, err := testcluster.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	k8s = c
	controllers.UseAPIServer(c)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Test servers listen on loopback, which the default policy denies.
	opts := &managerOptions
	opts.BindFlags(flag.NewFlagSet("manager", flag.ContinueOnError))
	opts.TestInterval, opts.DeniedNetworks, opts.SlugGracePeriod = 0, testcluster.LoopbackNetworks, slugGracePeriod
	opts.TokenGracePeriod, opts.SweepInterval = slugGracePeriod, time.Second
	opts.NewOrFailingTestsPerMinute = testBudget
	mgrOpts := opts.ManagerOptions()
	mgrOpts.Metrics = metricsserver.Options{BindAddress: "0"}
	mgr, err = ctrl.NewManager(env.Config, mgrOpts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := testcluster.EnsureNamespace(ctx, env.Config, opts.Namespace); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := opts.Setup(ctx, mgr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
	}
	return code
}

// newNamespace creates a namespace for one test. envtest has no namespace
// controller, so it is never really deleted; names are unique instead.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// conditioned are the objects whose Ready condition tests wait for.
type conditioned interface {
	client.Object
	GetConditions() *[]metav1.Condition
}

// waitFor polls until cond holds for obj (re-read into obj), or fails with
// its last state.
func waitFor[T conditioned](t *testing.T, obj T, what string, cond func(T) bool) T {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	var got T
	testkit.EventuallyFound(t, fmt.Sprintf("%s: %s", key, what), func() (bool, string) {
		got = obj.DeepCopyObject().(T)
		if err := k8s.Get(context.Background(), key, got); err != nil {
			t.Fatal(err)
		}
		return cond(got), fmt.Sprintf("conditions %+v", *got.GetConditions())
	})
	return got
}

// waitForReady waits until the Ready condition, for the current generation,
// has the given status and reason.
func waitForReady[T conditioned](t *testing.T, obj T, status metav1.ConditionStatus, reason string) T {
	t.Helper()
	return waitFor(t, obj, fmt.Sprintf("Ready=%s/%s", status, reason), func(o T) bool {
		ready := meta.FindStatusCondition(*o.GetConditions(), v1alpha1.ConditionReady)
		return ready != nil && ready.ObservedGeneration == o.GetGeneration() &&
			ready.Status == status && ready.Reason == reason
	})
}

func readyCondition(o conditioned) *metav1.Condition {
	return meta.FindStatusCondition(*o.GetConditions(), v1alpha1.ConditionReady)
}
