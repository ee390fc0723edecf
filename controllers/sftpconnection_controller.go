package controllers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/gateway/sftpdial"
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
	Client client.Client
	// SecretMetadata reads Secrets' metadata from the cache of the metadata
	// watch; it is how the controller learns that a Secret changed.
	SecretMetadata client.Reader
	// APIReader reads a Secret straight from the API server when a test is
	// due, so the manager never holds Secrets' data in memory.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Dialer    *sftpdial.Dialer
	// TestInterval is how often a connection is tested again with nothing
	// changed; 0 tests only on changes.
	TestInterval time.Duration
	// MaxConcurrentTests bounds how many tests run at once.
	MaxConcurrentTests int
}

// +kubebuilder:rbac:groups=sftpgate.dev,resources=sftpconnections,verbs=get;list;watch
// +kubebuilder:rbac:groups=sftpgate.dev,resources=sftpconnections/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile tests one connection when something it depends on changed or
// its test interval has passed, and records the outcome.
func (r *SftpConnectionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var conn v1alpha1.SftpConnection
	if err := r.Client.Get(ctx, req.NamespacedName, &conn); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !conn.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	before := conn.DeepCopy()
	result, err := r.reconcile(ctx, &conn)
	if err != nil {
		return ctrl.Result{}, err
	}
	transitioned, err := patchStatus(ctx, r.Client, r.Recorder, before, &conn)
	if transitioned && conn.Spec.HostKey.InsecureSkipVerify && meta.IsStatusConditionTrue(conn.Status.Conditions, v1alpha1.ConditionReady) {
		r.Recorder.Eventf(&conn, nil, corev1.EventTypeWarning, "HostKeyNotVerified", "ConnectionTest",
			"the server's host key is not verified (spec.hostKey.insecureSkipVerify): the connection can be intercepted")
	}
	return finish(result, err)
}

func (r *SftpConnectionReconciler) reconcile(ctx context.Context, conn *v1alpha1.SftpConnection) (ctrl.Result, error) {
	conn.Status.ObservedGeneration = conn.Generation

	holder, err := r.slugHolder(ctx, conn)
	if err != nil {
		return ctrl.Result{}, err
	}
	if holder != nil {
		conn.Status.Slug = ""
		// Name the holder only to its own namespace's users.
		by := "another SftpConnection"
		if holder.Namespace == conn.Namespace {
			by = fmt.Sprintf("SftpConnection %q", holder.Name)
		}
		setReady(conn, metav1.ConditionFalse, v1alpha1.ReasonSlugConflict, fmt.Sprintf(
			"slug %q is already served for %s; choose another spec.slug", conn.EffectiveSlug(), by))
		return ctrl.Result{}, nil
	}
	conn.Status.Slug = conn.EffectiveSlug()

	key := types.NamespacedName{Namespace: conn.Namespace, Name: conn.Spec.Credentials.SecretRef.Name}
	secretMeta := &metav1.PartialObjectMetadata{}
	secretMeta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := r.SecretMetadata.Get(ctx, key, secretMeta); err != nil {
		return ctrl.Result{}, secretMissing(conn, key, err)
	}
	if wait, due := r.nextTest(conn, sftpdial.CredentialsHash(secretMeta), time.Now()); !due {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	var secret corev1.Secret
	if err := r.APIReader.Get(ctx, key, &secret); err != nil {
		return ctrl.Result{}, secretMissing(conn, key, err)
	}
	r.test(ctx, conn, &secret)
	if ctx.Err() != nil {
		// Shutting down: the test was cut short, not failed.
		return ctrl.Result{}, ctx.Err()
	}
	conn.Status.CredentialsHash = sftpdial.CredentialsHash(&secret)
	conn.Status.LastHandledTestRequest = conn.Annotations[v1alpha1.AnnotationTestRequestedAt]
	return ctrl.Result{RequeueAfter: r.TestInterval}, nil
}

// secretMissing records a missing credentials Secret (and passes on other
// errors); the Secret watch tests the connection when it appears.
func secretMissing(conn *v1alpha1.SftpConnection, key types.NamespacedName, err error) error {
	if !apierrors.IsNotFound(err) {
		return err
	}
	conn.Status.CredentialsHash = ""
	setReady(conn, metav1.ConditionFalse, v1alpha1.ReasonSecretNotFound, fmt.Sprintf(
		"Secret %q does not exist in namespace %q; the connection is tested as soon as it is created",
		key.Name, key.Namespace))
	return nil
}

// nextTest says whether a test is due now and, if not, how long until it is
// (0: only when something changes). Restarts and re-syncs do not test again
// what was tested recently with the same spec and Secret.
func (r *SftpConnectionReconciler) nextTest(conn *v1alpha1.SftpConnection, hash string, now time.Time) (time.Duration, bool) {
	ready := meta.FindStatusCondition(conn.Status.Conditions, v1alpha1.ConditionReady)
	last := conn.Status.LastTestTime
	switch {
	case ready == nil, last == nil, ready.ObservedGeneration != conn.Generation,
		ready.Reason == v1alpha1.ReasonSlugConflict, conn.Status.CredentialsHash != hash,
		conn.Annotations[v1alpha1.AnnotationTestRequestedAt] != conn.Status.LastHandledTestRequest:
		return 0, true
	case r.TestInterval <= 0:
		return 0, false
	}
	wait := last.Add(r.TestInterval).Sub(now)
	return wait, wait <= 0
}

// test runs the connection test: dial (resolve, connect, verify the host
// key, authenticate, start SFTP), then resolve and stat rootPath.
func (r *SftpConnectionReconciler) test(ctx context.Context, conn *v1alpha1.SftpConnection, secret *corev1.Secret) {
	now := metav1.Now()
	conn.Status.LastTestTime = &now

	root, session, err := r.dialAndResolveRoot(ctx, conn, secret)
	if session != nil {
		// The handshake accepted this key: it is what trust on first use pins.
		conn.Status.HostKey = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(session.HostKey)))
		conn.Status.HostKeyFingerprint = ssh.FingerprintSHA256(session.HostKey)
		conn.Status.HostKeyAddress = sftpdial.Address(conn)
		conn.Status.ServerVersion = session.ServerVersion
	}
	if err != nil {
		reason, message := v1alpha1.ReasonSFTPUnavailable, err.Error()
		var dialErr *sftpdial.Error
		if errors.As(err, &dialErr) {
			reason, message = dialErr.Reason, dialErr.Message
		}
		setReady(conn, metav1.ConditionFalse, reason, message)
		return
	}
	conn.Status.RootPath = root
	message := fmt.Sprintf("Connected to %s as %q (%s); rootPath %s is a directory",
		sftpdial.Address(conn), conn.Spec.Username, session.ServerVersion, root)
	if conn.Spec.HostKey.InsecureSkipVerify {
		message += ". WARNING: the server's host key was not verified (spec.hostKey.insecureSkipVerify)"
	}
	setReady(conn, metav1.ConditionTrue, v1alpha1.ReasonConnected, message)
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
		err = &sftpdial.Error{Reason: v1alpha1.ReasonTimeout, Err: err, Message: fmt.Sprintf(
			"%s did not answer a stat of rootPath within %s", sftpdial.Address(conn), timeout)}
	}
	return root, session, err
}

// slugHolder returns the connection that holds conn's slug when it is not
// conn itself. A slug stays with the connection serving it (status.slug), so
// a newer claim, even from an older object, cannot take it over; when none
// serves it, the oldest claim wins, by creation time then namespace and name.
func (r *SftpConnectionReconciler) slugHolder(ctx context.Context, conn *v1alpha1.SftpConnection) (*v1alpha1.SftpConnection, error) {
	slug := conn.EffectiveSlug()
	var list v1alpha1.SftpConnectionList
	if err := r.Client.List(ctx, &list, client.MatchingFields{IndexSlug: slug}); err != nil {
		return nil, err
	}
	claims := slices.DeleteFunc(list.Items, func(c v1alpha1.SftpConnection) bool { return !c.DeletionTimestamp.IsZero() })
	if len(claims) == 0 {
		return nil, nil
	}
	holder := slices.MinFunc(claims, func(a, b v1alpha1.SftpConnection) int {
		aServes, bServes := a.Status.Slug == slug, b.Status.Slug == slug
		if aServes != bServes {
			if aServes {
				return -1
			}
			return 1
		}
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time),
			cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	if holder.UID == conn.UID {
		return nil, nil
	}
	return &holder, nil
}

// SetupWithManager registers the indexes and watches: the connection's own
// spec and annotations, other connections claiming the same slug, and the
// metadata of the Secrets connections use.
func (r *SftpConnectionReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	indexer := mgr.GetFieldIndexer()
	if err := indexer.IndexField(ctx, &v1alpha1.SftpConnection{}, IndexSlug, func(o client.Object) []string {
		return []string{o.(*v1alpha1.SftpConnection).EffectiveSlug()}
	}); err != nil {
		return err
	}
	if err := indexer.IndexField(ctx, &v1alpha1.SftpConnection{}, IndexCredentialsSecret, func(o client.Object) []string {
		return []string{o.(*v1alpha1.SftpConnection).Spec.Credentials.SecretRef.Name}
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.SftpConnection{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&v1alpha1.SftpConnection{}, r.slugClaimants()).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.connectionsUsingSecret)).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.MaxConcurrentTests, 1)}).
		Complete(r)
}

// slugClaimants enqueues the other connections that ask for the slug of a
// connection that was created, deleted, or changed its slug, so a slug that
// becomes free passes to the next in line.
func (r *SftpConnectionReconciler) slugClaimants() handler.EventHandler {
	enqueue := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], changed client.Object, slugs ...string) {
		for _, slug := range slugs {
			var list v1alpha1.SftpConnectionList
			if err := r.Client.List(ctx, &list, client.MatchingFields{IndexSlug: slug}); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "listing connections by slug", "slug", slug)
				continue
			}
			for _, c := range list.Items {
				if c.UID != changed.GetUID() {
					q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&c)})
				}
			}
		}
	}
	slug := func(o client.Object) string { return o.(*v1alpha1.SftpConnection).EffectiveSlug() }
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.Object, slug(e.Object))
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if old, now := slug(e.ObjectOld), slug(e.ObjectNew); old != now || e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero() {
				enqueue(ctx, q, e.ObjectNew, old, now)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.Object, slug(e.Object))
		},
	}
}

func (r *SftpConnectionReconciler) connectionsUsingSecret(ctx context.Context, secret client.Object) []reconcile.Request {
	var list v1alpha1.SftpConnectionList
	if err := r.Client.List(ctx, &list, client.InNamespace(secret.GetNamespace()),
		client.MatchingFields{IndexCredentialsSecret: secret.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing connections by Secret")
		return nil
	}
	requests := make([]reconcile.Request, 0, len(list.Items))
	for _, c := range list.Items {
		requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&c)})
	}
	return requests
}
