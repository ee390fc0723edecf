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
	"github.com/sftpgate/sftpgate/internal/s3dial"
)

// ObjectStoreReconciler tests each ObjectStore as SftpConnectionReconciler
// tests a connection (the same pace, slots and budget of tests, the same
// dial policy) and writes what it found to the Ready condition.
type ObjectStoreReconciler struct {
	Client         client.Client
	SecretMetadata client.Reader
	// APIReader reads a Secret straight from the API server when a test is
	// due: the manager holds no Secret's data.
	APIReader          client.Reader
	Recorder           events.EventRecorder
	Dialer             *s3dial.Dialer
	Pace               testPace
	MaxConcurrentTests int
	Slots              *testSlots
	// TestBudget is shared with the connections' tests: a namespace's
	// budget counts both kinds.
	TestBudget *testBudget
}

// +kubebuilder:rbac:groups=sftpgate.dev,resources=objectstores,verbs=get;list;watch
// +kubebuilder:rbac:groups=sftpgate.dev,resources=objectstores/status,verbs=get;update;patch

// Reconcile tests one store when something it depends on changed or its
// test interval has passed, and records the outcome.
func (r *ObjectStoreReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	defer r.Slots.leave(req.NamespacedName)
	budgetKey := types.NamespacedName{Namespace: req.Namespace, Name: v1alpha1.KindObjectStore + "/" + req.Name}
	var store v1alpha1.ObjectStore
	if err := r.Client.Get(ctx, req.NamespacedName, &store); err != nil {
		if apierrors.IsNotFound(err) {
			r.TestBudget.spend(budgetKey)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !store.DeletionTimestamp.IsZero() {
		r.TestBudget.spend(budgetKey)
		return ctrl.Result{}, nil
	}
	before := store.DeepCopy()
	var facts testFacts
	tests := testStatus{last: &store.Status.LastTestTime, failed: &store.Status.FailedTests,
		what: "object store", secret: store.Spec.Credentials.SecretRef.Name, namespace: store.Namespace}
	write := func() (bool, error) {
		store.Status.ObservedGeneration = store.Generation
		tests.set(&store, facts, false, true)
		transitioned, err := patchStatus(ctx, r.Client, r.Recorder, before, &store)
		before = store.DeepCopy()
		return transitioned, err
	}
	result, err := r.reconcile(ctx, &store, budgetKey, &facts, func() error { _, err := write(); return err })
	if err != nil {
		return finish(ctrl.Result{}, err)
	}
	_, err = write()
	return finish(result, err)
}

// reconcile records in f whether the Secret exists and, when a test is due
// and may run, what it found.
func (r *ObjectStoreReconciler) reconcile(ctx context.Context, store *v1alpha1.ObjectStore, budgetKey types.NamespacedName, f *testFacts, testing func() error) (ctrl.Result, error) {
	secretKey := types.NamespacedName{Namespace: store.Namespace, Name: store.Spec.Credentials.SecretRef.Name}
	secretMeta := &metav1.PartialObjectMetadata{}
	secretMeta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := r.SecretMetadata.Get(ctx, secretKey, secretMeta); err != nil {
		return ctrl.Result{}, r.secretMissing(store, f, err)
	}
	hash := egress.CredentialsHash(secretMeta)
	record := storeRecord(store)
	f.untested = record.untested(hash)
	if wait, due := r.Pace.next(record, hash, time.Now()); !due {
		f.waiting = fmt.Sprintf("the next test waits for the backoff after %d failed tests in a row to end", store.Status.FailedTests)
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if !record.proven(hash) {
		if wait := r.TestBudget.wait(budgetKey, time.Now()); wait > 0 {
			f.waiting = "the test waits for its namespace's budget of tests of new or failing connections and stores"
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	release := r.Slots.take(client.ObjectKeyFromObject(store))
	if release == nil {
		f.waiting = "the test waits for one of its namespace's test slots"
		return ctrl.Result{RequeueAfter: waitInLine}, nil
	}
	defer release()
	defer r.TestBudget.spend(budgetKey)
	var secret corev1.Secret
	if err := r.APIReader.Get(ctx, secretKey, &secret); err != nil {
		return ctrl.Result{}, r.secretMissing(store, f, err)
	}
	if f.untested {
		if err := testing(); err != nil {
			return ctrl.Result{}, err
		}
	}
	outcome := r.test(ctx, store, &secret)
	if ctx.Err() != nil {
		return ctrl.Result{}, ctx.Err()
	}
	f.test = &outcome
	store.Status.CredentialsHash = egress.CredentialsHash(&secret)
	store.Status.LastHandledTestRequest = store.Annotations[v1alpha1.AnnotationTestRequestedAt]
	return ctrl.Result{RequeueAfter: r.Pace.Interval}, nil
}

func (r *ObjectStoreReconciler) secretMissing(store *v1alpha1.ObjectStore, f *testFacts, err error) error {
	if !apierrors.IsNotFound(err) {
		return err
	}
	store.Status.CredentialsHash = ""
	f.secretMissing = true
	return nil
}

// test makes the store's client and lists one key of its prefix.
func (r *ObjectStoreReconciler) test(ctx context.Context, store *v1alpha1.ObjectStore, secret *corev1.Secret) testOutcome {
	outcome := testOutcome{at: metav1.Now()}
	client, err := r.Dialer.Client(ctx, store, secret)
	if err == nil {
		err = client.Test(ctx, store)
	}
	var dialErr *egress.Error
	switch {
	case errors.As(err, &dialErr):
		outcome.reason, outcome.message = dialErr.Reason, dialErr.Message
	case err != nil:
		outcome.reason, outcome.message = v1alpha1.ReasonStoreUnavailable, err.Error()
	default:
		outcome.passed, outcome.reason = true, v1alpha1.ReasonConnected
		outcome.message = fmt.Sprintf("Listed %q in bucket %q at %s", store.Spec.Prefix, store.Spec.Bucket, client.Host)
	}
	return outcome
}

// SetupWithManager watches the stores' specs and annotations and the
// metadata of the Secrets they use.
func (r *ObjectStoreReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.ObjectStore{}, IndexCredentialsSecret, func(o client.Object) []string {
		return []string{o.(*v1alpha1.ObjectStore).Spec.Credentials.SecretRef.Name}
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.ObjectStore{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(usingSecret(r.Client, func() client.ObjectList { return &v1alpha1.ObjectStoreList{} }))).
		WatchesRawSource(source.Channel(r.Slots.wake, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.MaxConcurrentTests, 1)}).
		Named("objectstore").
		Complete(r)
}
