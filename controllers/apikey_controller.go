package controllers

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

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
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/apitoken"
)

// IndexTokenSecret is the cache index of ApiKeys by the name of the
// existing Secret their token is read from.
const IndexTokenSecret = "sftpgate.dev/token-secret" //nolint:gosec // an index name, not a credential

// IndexDuplicateToken is the cache index of the ApiKeys refused as
// duplicates (value "true"): those to look at again when a token is let go.
const IndexDuplicateToken = "sftpgate.dev/duplicate-token" //nolint:gosec // an index name, not a credential

// ApiKeyReconciler issues tokens for ApiKeys and keeps only their hash in
// status, which is all the gateway reads.
type ApiKeyReconciler struct {
	// Client reads ApiKeys from the cache and writes Secrets and status.
	Client client.Client
	// SecretMetadata lists Secrets' metadata from the cache of the metadata
	// watch, to find Secrets a key owns but no longer uses.
	SecretMetadata client.Reader
	// APIReader reads Secrets (their data is never cached) and, before a
	// rotation, the ApiKey itself from the API server.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Tokens reserves each token hash in use for its key's namespace.
	Tokens *reservations
}

// +kubebuilder:rbac:groups=sftpgate.dev,resources=apikeys,verbs=get;list;watch
// +kubebuilder:rbac:groups=sftpgate.dev,resources=apikeys/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=sftpgate.dev,resources=apikeys/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;delete

// Reconcile issues or reads the key's token and records whether the key works.
func (r *ApiKeyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var key v1alpha1.ApiKey
	if err := r.Client.Get(ctx, req.NamespacedName, &key); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !key.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	before := key.DeepCopy()
	var facts keyFacts
	result, err := r.reconcile(ctx, &key, &facts)
	if err != nil {
		return finish(ctrl.Result{}, err)
	}
	setKeyStatus(&key, facts, time.Now())
	_, err = patchStatus(ctx, r.Client, r.Recorder, before, &key)
	return finish(result, err)
}

// reconcile records in f why the key has no token it may use, if it has
// none.
func (r *ApiKeyReconciler) reconcile(ctx context.Context, key *v1alpha1.ApiKey, f *keyFacts) (ctrl.Result, error) {
	var (
		err   error
		owned string // the Secret the key issues into, if it does
	)
	switch token := key.Spec.Token; {
	case token.SHA256 != "":
		recordToken(key, token.SHA256, cmp.Or(token.KeyID, token.SHA256[:8]), "")
	case token.ExistingSecret != nil:
		f.refused, err = r.readExistingSecret(ctx, key)
	default:
		owned = cmp.Or(token.SecretName, key.Name)
		f.refused, err = r.issueIntoSecret(ctx, key, owned)
	}
	if err == nil {
		// A Secret the key no longer issues into would bring its old token
		// back if the key were switched back to it.
		err = r.deleteUnusedSecrets(ctx, key, owned)
	}
	if err != nil || f.refused != nil {
		return ctrl.Result{}, err
	}
	var result ctrl.Result
	if f.refused, result, err = r.claimToken(ctx, key); err != nil || f.refused != nil {
		return result, err
	}
	if expires := key.Spec.ExpiresAt; expires != nil && time.Now().Before(expires.Time) {
		// Flip to Expired when the time comes, without an edit.
		return ctrl.Result{RequeueAfter: time.Until(expires.Time) + time.Second}, nil
	}
	return ctrl.Result{}, nil
}

// recordToken puts a token's hash and key id in status; issuedAt moves only
// when the token changes.
func recordToken(key *v1alpha1.ApiKey, hash, keyID, secretName string) {
	if key.Status.TokenSHA256 != hash || key.Status.IssuedAt == nil {
		now := metav1.Now()
		key.Status.IssuedAt = &now
	}
	key.Status.TokenSHA256, key.Status.KeyID, key.Status.SecretName = hash, keyID, secretName
}

// issueIntoSecret makes sure the Secret the key owns holds a token: it
// creates the Secret with a new token if there is none, rotates the token
// when asked to, and otherwise leaves the token alone.
func (r *ApiKeyReconciler) issueIntoSecret(ctx context.Context, key *v1alpha1.ApiKey, name string) (*refusal, error) {
	rotation := key.Annotations[v1alpha1.AnnotationRotateRequestedAt]
	var secret corev1.Secret
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: name}, &secret)
	switch {
	case apierrors.IsNotFound(err):
		return r.createSecret(ctx, key, name, rotation)
	case err != nil:
		return nil, err
	case !metav1.IsControlledBy(&secret, key):
		return refuse(v1alpha1.ReasonSecretNotOwned, fmt.Sprintf(
			"Secret %q exists and does not belong to this ApiKey; sftpgate never overwrites it: delete it or choose another spec.token.secretName", name)), nil
	case rotation != key.Status.LastHandledRotateRequest && rotation != secret.Annotations[v1alpha1.AnnotationRotateRequestedAt]:
		// A new request. The Secret remembers which request its token
		// answers, so a rotation happens once even if writing status fails
		// afterwards; a cache that lags behind must not rotate again.
		if err := r.rotationStillRequested(ctx, key, rotation); err != nil {
			return nil, err
		}
		token, keyID := apitoken.NewToken()
		secret.Data = map[string][]byte{v1alpha1.SecretKeyToken: []byte(token)}
		metav1.SetMetaDataAnnotation(&secret.ObjectMeta, v1alpha1.AnnotationRotateRequestedAt, rotation)
		// Update carries the resource version read: a concurrent rotation
		// conflicts instead of issuing a second token.
		if err := r.Client.Update(ctx, &secret); err != nil {
			return nil, err
		}
		r.Recorder.Eventf(key, nil, corev1.EventTypeNormal, "TokenRotated", "Reconcile",
			"issued key %s into Secret %q; the previous token no longer works", keyID, name)
	}
	token := strings.TrimSpace(string(secret.Data[v1alpha1.SecretKeyToken]))
	if err := apitoken.Validate(token); err != nil {
		return refuse(v1alpha1.ReasonInvalidToken, fmt.Sprintf(
			"Secret %q, key %q: %v; rotate the key to issue a new token", name, v1alpha1.SecretKeyToken, err)), nil
	}
	recordToken(key, apitoken.Hash(token), apitoken.KeyID(token), name)
	key.Status.LastHandledRotateRequest = secret.Annotations[v1alpha1.AnnotationRotateRequestedAt]
	return nil, nil
}

// rotationStillRequested re-reads the key from the API server: a rotation
// is issued only for a request that is really new, not for the cache's
// stale view of one that was already answered.
func (r *ApiKeyReconciler) rotationStillRequested(ctx context.Context, key *v1alpha1.ApiKey, rotation string) error {
	var fresh v1alpha1.ApiKey
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(key), &fresh)
	if apierrors.IsNotFound(err) || err == nil && (fresh.Annotations[v1alpha1.AnnotationRotateRequestedAt] != rotation || fresh.Status.LastHandledRotateRequest == rotation) {
		return errStaleCache // the next reconcile finds the key as it is, or gone
	}
	return err
}

// deleteUnusedSecrets deletes the Secrets the key owns other than keep.
func (r *ApiKeyReconciler) deleteUnusedSecrets(ctx context.Context, key *v1alpha1.ApiKey, keep string) error {
	var list metav1.PartialObjectMetadataList
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := r.SecretMetadata.List(ctx, &list, client.InNamespace(key.Namespace),
		client.MatchingLabels{v1alpha1.LabelApiKey: key.Name}); err != nil {
		return err
	}
	for i := range list.Items {
		s := &list.Items[i]
		if s.Name == keep || !metav1.IsControlledBy(s, key) {
			continue
		}
		if err := r.Client.Delete(ctx, s, client.Preconditions{UID: &s.UID}); client.IgnoreNotFound(err) != nil {
			return err
		}
		r.Recorder.Eventf(key, nil, corev1.EventTypeNormal, "SecretDeleted", "Reconcile",
			"deleted Secret %q: the key no longer keeps its token there", s.Name)
	}
	return nil
}

// tokenHolder returns the key that holds key's token hash, in any
// namespace, when it is not key itself. A token belongs to one key in the
// cluster: the one that recorded it first keeps it (so an older key edited
// to a hash another key has cannot take it over), and of keys that
// recorded it at once, the oldest, by creation time then UID.
func (r *ApiKeyReconciler) tokenHolder(ctx context.Context, key *v1alpha1.ApiKey) (*v1alpha1.ApiKey, error) {
	var list v1alpha1.ApiKeyList
	if err := r.Client.List(ctx, &list, client.MatchingFields{apitoken.IndexTokenHash: key.Status.TokenSHA256}); err != nil {
		return nil, err
	}
	holder := key
	for i := range list.Items {
		if k := &list.Items[i]; k.UID != key.UID && k.DeletionTimestamp.IsZero() && holdsBefore(k, holder) {
			holder = k
		}
	}
	if holder == key {
		return nil, nil
	}
	return holder, nil
}

// claimToken decides whether key may use its token; if not, it says why,
// and when to look again. A token belongs to one key in the cluster; and
// one freed (its key deleted, or given another token) is held for its
// key's namespace for a grace period, so that deleting and recreating a
// key (kubectl replace --force, an Argo CD Replace) keeps it.
func (r *ApiKeyReconciler) claimToken(ctx context.Context, key *v1alpha1.ApiKey) (*refusal, ctrl.Result, error) {
	hash := key.Status.TokenSHA256
	holder, err := r.tokenHolder(ctx, key)
	if err != nil {
		return nil, ctrl.Result{}, err
	}
	if holder != nil {
		// Name the holder only to its own namespace: a hash may be
		// public (hash-only keys live in Git), and must not be a way to
		// learn of other namespaces' keys.
		by := "another ApiKey"
		if holder.Namespace == key.Namespace {
			by = fmt.Sprintf("ApiKey %q", holder.Name)
		}
		return refuse(v1alpha1.ReasonDuplicateToken, fmt.Sprintf(
			"%s already has this token; a token belongs to one key in the whole cluster: give this key its own", by)), ctrl.Result{}, nil
	}
	ns, until, err := r.Tokens.heldFor(ctx, hash, time.Now())
	if err != nil {
		return nil, ctrl.Result{}, err
	}
	if ns != "" && ns != key.Namespace {
		held := refuse(v1alpha1.ReasonDuplicateToken, fmt.Sprintf(
			"a key in another namespace had this token until recently, and it is held for that namespace until %s; a token belongs to one key in the whole cluster: give this key its own",
			until.UTC().Format(time.RFC3339)))
		held.passes = true
		return held, ctrl.Result{RequeueAfter: time.Until(until) + time.Second}, nil
	}
	return nil, ctrl.Result{}, r.Tokens.hold(ctx, hash, key.Namespace)
}

// tokenInUse reports whether a live key uses the token hash.
func (r *ApiKeyReconciler) tokenInUse(ctx context.Context, hash string) (bool, error) {
	var list v1alpha1.ApiKeyList
	if err := r.Client.List(ctx, &list, client.MatchingFields{apitoken.IndexTokenHash: hash}); err != nil {
		return false, err
	}
	return slices.ContainsFunc(list.Items, func(k v1alpha1.ApiKey) bool { return k.DeletionTimestamp.IsZero() }), nil
}

// holdsBefore reports whether a recorded its token before b.
func holdsBefore(a, b *v1alpha1.ApiKey) bool {
	recorded := func(k *v1alpha1.ApiKey) time.Time {
		if k.Status.IssuedAt == nil {
			return time.Now()
		}
		return k.Status.IssuedAt.Time
	}
	return cmp.Or(recorded(a).Compare(recorded(b)), a.CreationTimestamp.Compare(b.CreationTimestamp.Time),
		cmp.Compare(a.UID, b.UID)) < 0
}

func (r *ApiKeyReconciler) createSecret(ctx context.Context, key *v1alpha1.ApiKey, name, rotation string) (*refusal, error) {
	token, keyID := apitoken.NewToken()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: key.Namespace,
			Name:      name,
			Labels:    map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedBy, v1alpha1.LabelApiKey: key.Name},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{v1alpha1.SecretKeyToken: []byte(token)},
	}
	if rotation != "" {
		metav1.SetMetaDataAnnotation(&secret.ObjectMeta, v1alpha1.AnnotationRotateRequestedAt, rotation)
	}
	if err := controllerutil.SetControllerReference(key, secret, r.Client.Scheme()); err != nil {
		return nil, err
	}
	// Create is the one step that issues a token: of two reconciles racing
	// here, one gets AlreadyExists and retries, reading the winner's token.
	if err := r.Client.Create(ctx, secret); err != nil {
		return nil, err
	}
	r.Recorder.Eventf(key, nil, corev1.EventTypeNormal, "TokenIssued", "Reconcile", "issued key %s into Secret %q", keyID, name)
	recordToken(key, apitoken.Hash(token), keyID, name)
	key.Status.LastHandledRotateRequest = rotation
	return nil, nil
}

// readExistingSecret hashes the token in a Secret the user provides.
func (r *ApiKeyReconciler) readExistingSecret(ctx context.Context, key *v1alpha1.ApiKey) (*refusal, error) {
	ref := key.Spec.Token.ExistingSecret
	field := cmp.Or(ref.Key, v1alpha1.SecretKeyToken)
	var secret corev1.Secret
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: ref.Name}, &secret); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
		return refuse(v1alpha1.ReasonSecretNotFound, fmt.Sprintf(
			"Secret %q does not exist in namespace %q; the key works as soon as it is created", ref.Name, key.Namespace)), nil
	}
	if secret.Labels[v1alpha1.LabelApiKeyToken] != "true" {
		// Say nothing of what the Secret holds: it may not be meant for us.
		return refuse(v1alpha1.ReasonInvalidToken, fmt.Sprintf(
			"Secret %q is not labelled %s=true; label it to let ApiKeys read their token from it", ref.Name, v1alpha1.LabelApiKeyToken)), nil
	}
	raw, ok := secret.Data[field]
	if !ok {
		return refuse(v1alpha1.ReasonInvalidToken, fmt.Sprintf("Secret %q has no key %q", ref.Name, field)), nil
	}
	token := strings.TrimSpace(string(raw))
	if err := apitoken.Validate(token); err != nil {
		return refuse(v1alpha1.ReasonInvalidToken, fmt.Sprintf("Secret %q, key %q: %v", ref.Name, field, err)), nil
	}
	recordToken(key, apitoken.Hash(token), apitoken.KeyID(token), ref.Name)
	return nil, nil
}

// describeScope says in words what a key may do.
func describeScope(spec *v1alpha1.ApiKeySpec) string {
	connections := "every SftpConnection in its namespace"
	if len(spec.Connections) > 0 {
		connections = "SftpConnections " + strings.Join(spec.Connections, ", ")
	}
	switch {
	case spec.ReadOnly:
		return connections + ", read-only"
	case len(spec.Commands) > 0:
		commands := make([]string, len(spec.Commands))
		for i, c := range spec.Commands {
			commands[i] = string(c)
		}
		return connections + ", commands " + strings.Join(commands, ", ")
	}
	return connections + ", all commands"
}

// SetupWithManager watches ApiKeys and the metadata of Secrets: those the
// keys own (a deleted one is issued again) and those they read.
func (r *ApiKeyReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := apitoken.IndexFields(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.ApiKey{}, IndexTokenSecret, func(o client.Object) []string {
		if ref := o.(*v1alpha1.ApiKey).Spec.Token.ExistingSecret; ref != nil {
			return []string{ref.Name}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.ApiKey{}, IndexDuplicateToken, func(o client.Object) []string {
		if ready := meta.FindStatusCondition(o.(*v1alpha1.ApiKey).Status.Conditions, v1alpha1.ConditionReady); ready != nil && ready.Reason == v1alpha1.ReasonDuplicateToken {
			return []string{"true"}
		}
		return nil
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.ApiKey{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.keysOfSecret)).
		Watches(&v1alpha1.ApiKey{}, r.tokenChanges()).
		Complete(r)
}

// tokenChanges enqueues the keys whose claim to a token another key's
// change bears on: when a key records a token, the others that have it
// (of two that recorded it at once, one gives it up); when a key lets a
// token go (it is deleted, or its token changes), the keys refused as
// duplicates (the token may be theirs now).
func (r *ApiKeyReconciler) tokenChanges() handler.EventHandler {
	// enqueue adds the keys that have a token (the changed key too: of two
	// that recorded it at once, the later write may come from a cache that
	// had not seen the other), or with no token, those refused as
	// duplicates.
	enqueue := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], changed client.Object, hash string) {
		var list v1alpha1.ApiKeyList
		by := client.MatchingFields{apitoken.IndexTokenHash: hash}
		if hash == "" {
			by = client.MatchingFields{IndexDuplicateToken: "true"}
		}
		if err := r.Client.List(ctx, &list, by); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing API keys")
			return
		}
		for _, k := range list.Items {
			if hash != "" || k.UID != changed.GetUID() {
				q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&k)})
			}
		}
	}
	hash := func(o client.Object) string { return o.(*v1alpha1.ApiKey).Status.TokenSHA256 } //nolint:forcetypeassert // events of ApiKeys
	return handler.Funcs{
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			old, now := hash(e.ObjectOld), hash(e.ObjectNew)
			if old == now {
				return
			}
			if now != "" {
				enqueue(ctx, q, e.ObjectNew, now)
			}
			if old != "" {
				enqueue(ctx, q, e.ObjectNew, "")
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.Object, "")
		},
	}
}

func (r *ApiKeyReconciler) keysOfSecret(ctx context.Context, secret client.Object) []reconcile.Request {
	var requests []reconcile.Request
	if owner := metav1.GetControllerOf(secret); owner != nil && owner.Kind == "ApiKey" && owner.APIVersion == v1alpha1.GroupVersion.String() {
		requests = append(requests, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: secret.GetNamespace(), Name: owner.Name}})
	}
	var list v1alpha1.ApiKeyList
	if err := r.Client.List(ctx, &list, client.InNamespace(secret.GetNamespace()),
		client.MatchingFields{IndexTokenSecret: secret.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing API keys by Secret")
		return requests
	}
	for _, k := range list.Items {
		requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&k)})
	}
	return requests
}
