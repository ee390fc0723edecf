package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/egress"
	"github.com/sftpgate/sftpgate/internal/sftpdial"
)

// Cache indexes on SftpConnections.
const (
	// IndexSlug is the slug a connection asks for (spec.slug or its name).
	IndexSlug = "sftpgate.dev/slug"
	// IndexCredentialsSecret is the name of the connection's credentials Secret.
	IndexCredentialsSecret = "sftpgate.dev/credentials-secret" //nolint:gosec // an index name, not a credential

)

// SftpConnectionReconciler tests each SftpConnection against its server and
// writes what it found to the Ready condition.
type SftpConnectionReconciler struct {
	// Client reads SftpConnections from the cache and writes their status.
	Client   client.Client
	Recorder events.EventRecorder
	Dialer   *sftpdial.Dialer
	testGate
	// MaxConcurrentTests bounds how many tests run at once.
	MaxConcurrentTests int
	// Slugs decides who serves which slug.
	Slugs *slugs
}

// +kubebuilder:rbac:groups=sftpgate.dev,resources=sftpconnections,verbs=get;list;watch
// +kubebuilder:rbac:groups=sftpgate.dev,resources=sftpconnections/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Namespaces' labels say which are web UI accounts', whose connections the
// stricter dial policy holds (package tenants).
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Reconcile tests one connection when something it depends on changed or
// its test interval has passed, and records the outcome.
func (r *SftpConnectionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// Woken to test, but it took no slot (it is no longer due, or gone):
	// the next in line is woken instead.
	defer r.Slots.leave(req.NamespacedName)
	var conn v1alpha1.SftpConnection
	if err := r.Client.Get(ctx, req.NamespacedName, &conn); err != nil {
		if apierrors.IsNotFound(err) {
			r.TestBudget.spend(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !conn.DeletionTimestamp.IsZero() {
		r.TestBudget.spend(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	before := conn.DeepCopy()
	var facts connectionFacts
	// Before a test of a new spec or Secret runs, status says it runs.
	testing := func() error {
		setConnectionStatus(&conn, facts)
		_, err := patchStatus(ctx, r.Client, r.Recorder, before, &conn)
		before = conn.DeepCopy()
		return err
	}
	result, err := r.reconcile(ctx, &conn, &facts, testing)
	if err != nil {
		return finish(ctrl.Result{}, err)
	}
	setConnectionStatus(&conn, facts)
	transitioned, err := patchStatus(ctx, r.Client, r.Recorder, before, &conn)
	if transitioned && conn.Spec.HostKey.InsecureSkipVerify && meta.IsStatusConditionTrue(conn.Status.Conditions, v1alpha1.ConditionReady) {
		r.Recorder.Eventf(&conn, nil, corev1.EventTypeWarning, "HostKeyNotVerified", "ConnectionTest",
			"the server's host key is not verified (spec.hostKey.insecureSkipVerify): the connection can be intercepted")
	}
	return finish(result, err)
}

// reconcile records in f what it finds: who serves the slug, whether the
// Secret exists, and, when a test is due and may run, what it found.
func (r *SftpConnectionReconciler) reconcile(ctx context.Context, conn *v1alpha1.SftpConnection, f *connectionFacts, testing func() error) (ctrl.Result, error) {
	slug, result, err := r.Slugs.claim(ctx, conn)
	f.slug = slug
	if err != nil || slug != (slugFacts{}) {
		return result, err
	}
	return r.run(ctx, conn, client.ObjectKeyFromObject(conn), &f.testFacts, testing,
		func(ctx context.Context, secret *corev1.Secret) testOutcome { return r.test(ctx, conn, secret) })
}

// test runs the connection test: dial (resolve, connect, verify the host
// key, authenticate, start SFTP), then resolve and stat rootPath. It
// records what the server showed of itself in status.
func (r *SftpConnectionReconciler) test(ctx context.Context, conn *v1alpha1.SftpConnection, secret *corev1.Secret) testOutcome {
	outcome := testOutcome{at: metav1.Now()}
	root, session, err := r.dialAndResolveRoot(ctx, conn, secret)
	if session != nil {
		// The handshake accepted this key: it is what trust on first use pins.
		conn.Status.HostKey = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(session.HostKey)))
		conn.Status.HostKeyFingerprint = ssh.FingerprintSHA256(session.HostKey)
		conn.Status.HostKeyAddress = sftpdial.Address(conn)
		conn.Status.ServerVersion = session.ServerVersion
	}
	if err != nil {
		outcome.reason, outcome.message = v1alpha1.ReasonSFTPUnavailable, err.Error()
		var dialErr *egress.Error
		if errors.As(err, &dialErr) {
			outcome.reason, outcome.message = dialErr.Reason, dialErr.Message
		}
		return outcome
	}
	conn.Status.RootPath = root
	outcome.passed, outcome.reason = true, v1alpha1.ReasonConnected
	outcome.message = fmt.Sprintf("Connected to %s as %q (%s); rootPath %s is a directory",
		sftpdial.Address(conn), conn.Spec.Username, session.ServerVersion, root)
	if conn.Spec.HostKey.InsecureSkipVerify {
		outcome.message += ". WARNING: the server's host key was not verified (spec.hostKey.insecureSkipVerify)"
	}
	return outcome
}

func (r *SftpConnectionReconciler) dialAndResolveRoot(ctx context.Context, conn *v1alpha1.SftpConnection, secret *corev1.Secret) (string, *sftpdial.Session, error) {
	target, err := sftpdial.NewTarget(conn, secret, sftpdial.RecordFirstUse)
	if err != nil {
		return "", nil, err
	}
	session, err := r.Dialer.Dial(ctx, target)
	if err != nil {
		return "", nil, err
	}
	defer func() { _ = session.Close() }()
	// The SFTP client has no context: closing the session ends a stat that
	// hangs. A stat is quick, so the test does not wait a long operation
	// timeout for it and hold up the tests of other connections.
	timeout := min(conn.Spec.Limits.OperationTimeoutOrDefault(), conn.Spec.Limits.ConnectTimeoutOrDefault())
	opCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer context.AfterFunc(opCtx, func() { _ = session.Close() })()
	root, err := session.ResolveRoot(conn.Spec.RootPath)
	if err != nil && opCtx.Err() != nil {
		err = &egress.Error{Reason: v1alpha1.ReasonTimeout, Err: err, Message: fmt.Sprintf(
			"%s did not answer a stat of rootPath within %s", sftpdial.Address(conn), timeout)}
	}
	return root, session, err
}

// SetupWithManager registers the indexes and watches: the connection's own
// spec and annotations, other connections claiming the same slug, and the
// metadata of the Secrets connections use.
func (r *SftpConnectionReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	indexer := mgr.GetFieldIndexer()
	if err := indexSlug(ctx, mgr, &v1alpha1.SftpConnection{}); err != nil {
		return err
	}
	if err := indexer.IndexField(ctx, &v1alpha1.SftpConnection{}, IndexCredentialsSecret, func(o client.Object) []string {
		return []string{o.(*v1alpha1.SftpConnection).Spec.Credentials.SecretRef.Name}
	}); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.SftpConnection{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{})))
	return r.Slugs.watchSlugs(b, func() client.ObjectList { return &v1alpha1.SftpConnectionList{} }).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(usingSecret(r.Client, func() client.ObjectList { return &v1alpha1.SftpConnectionList{} }))).
		WatchesRawSource(source.Channel(r.Slots.wake, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.MaxConcurrentTests, 1)}).
		Complete(r)
}

// usingSecret maps a Secret to the objects of newList's kind in its
// namespace whose credentials name it (IndexCredentialsSecret).
func usingSecret(c client.Reader, newList func() client.ObjectList) handler.MapFunc {
	return func(ctx context.Context, secret client.Object) []reconcile.Request {
		list := newList()
		if err := c.List(ctx, list, client.InNamespace(secret.GetNamespace()),
			client.MatchingFields{IndexCredentialsSecret: secret.GetName()}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing the objects that use a Secret")
			return nil
		}
		var requests []reconcile.Request
		_ = meta.EachListItem(list, func(o runtime.Object) error {
			requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o.(client.Object))})
			return nil
		})
		return requests
	}
}
