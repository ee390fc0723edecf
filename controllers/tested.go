package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/egress"
)

// A tested kind (SftpConnection, ObjectStore, FtpConnection) is tested
// against its server by one controller path: its Secret's version, the
// pace of its tests, its namespace's budget and slots, the test itself,
// and status from what was found (testStatus.set). Each kind gives the
// test (a testedKind); SftpConnection adds its slug before it.

// testedObject is an object of a tested kind.
type testedObject interface {
	slugged
	GetTestStatus() *v1alpha1.TestStatus
	CredentialsSecret() string
}

// testGate decides when a tested object's test runs, runs it, and
// records in status what it ran against.
type testGate struct {
	// SecretMetadata reads Secrets' metadata from the cache of the
	// metadata watch: how the controller learns that a Secret changed.
	SecretMetadata client.Reader
	// APIReader reads a Secret straight from the API server when a test
	// is due: the manager holds no Secret's data in memory.
	APIReader client.Reader
	// Pace is how often an object is tested again with nothing changed,
	// and how long failures in a row hold the next test back.
	Pace testPace
	// Slots bound the tests running at once per namespace.
	Slots *testSlots
	// TestBudget bounds, per namespace, the tests of objects not proven
	// good; the kinds share it.
	TestBudget *testBudget
}

// run records in f whether obj's Secret exists and, when a test is due
// and may run, what test found. testing writes status before a test of a
// new spec or Secret, so that status says it runs.
func (g *testGate) run(ctx context.Context, obj testedObject, budgetKey types.NamespacedName, f *testFacts,
	testing func() error, test func(context.Context, *corev1.Secret) testOutcome) (ctrl.Result, error) {
	ts := obj.GetTestStatus()
	secretKey := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.CredentialsSecret()}
	secretMeta := &metav1.PartialObjectMetadata{}
	secretMeta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := g.SecretMetadata.Get(ctx, secretKey, secretMeta); err != nil {
		return ctrl.Result{}, secretMissing(ts, f, err)
	}
	hash := egress.CredentialsHash(secretMeta)
	record := recordOf(obj)
	f.untested = record.untested(hash)
	if wait, due := g.Pace.next(record, hash, time.Now()); !due {
		f.waiting = fmt.Sprintf("the next test waits for the backoff after %d failed tests in a row to end", ts.FailedTests)
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if !record.proven(hash) {
		if wait := g.TestBudget.wait(budgetKey, time.Now()); wait > 0 {
			f.waiting = "the test waits for its namespace's budget of tests of new or failing connections and stores"
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	release := g.Slots.take(client.ObjectKeyFromObject(obj))
	if release == nil {
		// In line: woken when a test of its namespace ends.
		f.waiting = "the test waits for one of its namespace's test slots"
		return ctrl.Result{RequeueAfter: waitInLine}, nil
	}
	defer release()
	defer g.TestBudget.spend(budgetKey)
	var secret corev1.Secret
	if err := g.APIReader.Get(ctx, secretKey, &secret); err != nil {
		return ctrl.Result{}, secretMissing(ts, f, err)
	}
	if f.untested {
		if err := testing(); err != nil {
			return ctrl.Result{}, err
		}
	}
	outcome := test(ctx, &secret)
	if ctx.Err() != nil {
		// Shutting down: the test was cut short, not failed.
		return ctrl.Result{}, ctx.Err()
	}
	f.test = &outcome
	ts.CredentialsHash = egress.CredentialsHash(&secret)
	ts.LastHandledTestRequest = obj.GetAnnotations()[v1alpha1.AnnotationTestRequestedAt]
	return ctrl.Result{RequeueAfter: g.Pace.Interval}, nil
}

// secretMissing records a missing credentials Secret (and passes on other
// errors); the Secret watch tests the object when it appears.
func secretMissing(ts *v1alpha1.TestStatus, f *testFacts, err error) error {
	if !apierrors.IsNotFound(err) {
		return err
	}
	ts.CredentialsHash = ""
	f.secretMissing = true
	return nil
}

// testsOf is where obj's status records its tests; what names its kind
// in messages.
func testsOf(obj testedObject, what string) testStatus {
	ts := obj.GetTestStatus()
	return testStatus{last: &ts.LastTestTime, failed: &ts.FailedTests, what: what, secret: obj.CredentialsSecret(), namespace: obj.GetNamespace()}
}

// outcomeOf is what a test that ended with err found: the reason of a
// dial or test error, otherwise (an error of no known step) fallback, or
// when err is nil Connected with passed's message.
func outcomeOf(err error, fallback string, passed func() string) testOutcome {
	outcome := testOutcome{at: metav1.Now()}
	var dialErr *egress.Error
	switch {
	case errors.As(err, &dialErr):
		outcome.reason, outcome.message = dialErr.Reason, dialErr.Message
	case err != nil:
		outcome.reason, outcome.message = fallback, err.Error()
	default:
		outcome.passed, outcome.reason, outcome.message = true, v1alpha1.ReasonConnected, passed()
	}
	return outcome
}

// testedKind is what a tested kind without a slug gives the shared path.
type testedKind struct {
	// kind names it in the namespace's test budget; what in messages;
	// name is its controller's.
	kind, what, name string
	object           func() testedObject
	list             func() client.ObjectList
	// test tests obj with secret; it may record in obj's status what the
	// server showed of itself.
	test func(ctx context.Context, obj testedObject, secret *corev1.Secret) testOutcome
}

// TestedReconciler tests each object of one tested kind and writes what
// it found to its status.
type TestedReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	testGate
	MaxConcurrentTests int
	// Slugs decides who serves which slug.
	Slugs *slugs
	kind  testedKind
}

// Reconcile tests one object when something it depends on changed or its
// test interval has passed, and records the outcome.
func (r *TestedReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	defer r.Slots.leave(req.NamespacedName)
	budgetKey := types.NamespacedName{Namespace: req.Namespace, Name: r.kind.kind + "/" + req.Name}
	obj := r.kind.object()
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.TestBudget.spend(budgetKey)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		r.TestBudget.spend(budgetKey)
		return ctrl.Result{}, nil
	}
	before := obj.DeepCopyObject().(testedObject) //nolint:forcetypeassert // a copy of its own type
	var (
		facts testFacts
		slug  slugFacts
	)
	write := func() error {
		obj.GetTestStatus().ObservedGeneration = obj.GetGeneration()
		blocked := slug.blocked(obj)
		testsOf(obj, r.kind.what).set(obj, facts, blocked, slug.heldUntil.IsZero())
		_, err := patchStatus(ctx, r.Client, r.Recorder, before, obj)
		before = obj.DeepCopyObject().(testedObject) //nolint:forcetypeassert // a copy of its own type
		return err
	}
	slug, result, err := r.Slugs.claim(ctx, obj)
	if err != nil || slug != (slugFacts{}) {
		if err != nil {
			return finish(ctrl.Result{}, err)
		}
		return finish(result, write())
	}
	test := func(ctx context.Context, secret *corev1.Secret) testOutcome { return r.kind.test(ctx, obj, secret) }
	result, err = r.run(ctx, obj, budgetKey, &facts, write, test)
	if err != nil {
		return finish(ctrl.Result{}, err)
	}
	return finish(result, write())
}

// SetupWithManager watches the objects' specs and annotations and the
// metadata of the Secrets they use.
func (r *TestedReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, r.kind.object(), IndexCredentialsSecret, func(o client.Object) []string {
		return []string{o.(testedObject).CredentialsSecret()} //nolint:forcetypeassert // the kind's
	}); err != nil {
		return err
	}
	if err := indexSlug(ctx, mgr, r.kind.object()); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(r.kind.object(), builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{})))
	return r.Slugs.watchSlugs(b, r.kind.list).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(usingSecret(r.Client, r.kind.list))).
		WatchesRawSource(source.Channel(r.Slots.wake, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.MaxConcurrentTests, 1)}).
		Named(r.kind.name).
		Complete(r)
}
