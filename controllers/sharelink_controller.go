package controllers

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// ShareLinkReconciler says whether each ShareLink works: Ready is Active
// until the link expires or is used up (Stalled then: only a change of
// its spec revives it), and False while its connection is missing. The
// web UI, which serves the links, counts their uses in status.uses and
// refuses them by the same rules at each use; these conditions are for
// kubectl and GitOps.
type ShareLinkReconciler struct {
	client.Client
	Recorder events.EventRecorder
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// +kubebuilder:rbac:groups=sftpgate.dev,resources=sharelinks,verbs=get;list;watch
// +kubebuilder:rbac:groups=sftpgate.dev,resources=sharelinks/status,verbs=get;update;patch

// Reconcile writes the link's conditions, and comes back when it expires.
func (r *ShareLinkReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var link v1alpha1.ShareLink
	if err := r.Get(ctx, req.NamespacedName, &link); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := link.DeepCopy()
	ready, stalled, result, err := r.assess(ctx, &link)
	if err != nil {
		return finish(ctrl.Result{}, err)
	}
	link.Status.ObservedGeneration = link.Generation
	v1alpha1.SetSummary(&link.Status.Conditions, link.Generation, ready, false, stalled)
	_, err = patchStatus(ctx, r.Client, r.Recorder, before, &link)
	return finish(result, err)
}

// assess is the link's Ready condition from its spec, its uses, the time
// and its connection, and when to look again.
func (r *ShareLinkReconciler) assess(ctx context.Context, link *v1alpha1.ShareLink) (metav1.Condition, bool, ctrl.Result, error) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	switch state, message := v1alpha1.ShareState(link, now()); state {
	case v1alpha1.ReasonExpired, v1alpha1.ReasonUsedUp:
		return metav1.Condition{Status: metav1.ConditionFalse, Reason: state, Message: message}, true, ctrl.Result{}, nil
	}
	ref := v1alpha1.ParseConnectionReference(link.Spec.Connection)
	conn, _ := v1alpha1.NewEndpoint(ref.Kind) // the pattern allows no other kind
	err := r.Get(ctx, client.ObjectKey{Namespace: link.Namespace, Name: ref.Name}, conn)
	switch {
	case apierrors.IsNotFound(err):
		return metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonConnectionNotFound,
			Message: fmt.Sprintf("no %s %q in this namespace", ref.Kind, ref.Name)}, false, ctrl.Result{}, nil
	case err != nil:
		return metav1.Condition{}, false, ctrl.Result{}, err
	}
	var result ctrl.Result
	if link.Spec.ExpiresAt != nil {
		result.RequeueAfter = link.Spec.ExpiresAt.Sub(now()) + time.Second
	}
	return metav1.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonActive, Message: "the link works"}, false, result, nil
}

// SetupWithManager watches ShareLinks (their uses too), and their
// connections.
func (r *ShareLinkReconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).Named("sharelink").For(&v1alpha1.ShareLink{})
	for _, kind := range v1alpha1.EndpointKinds {
		obj, _ := v1alpha1.NewEndpoint(kind)
		b = b.WatchesMetadata(obj, handler.EnqueueRequestsFromMapFunc(r.sharesOf))
	}
	return b.Complete(r)
}

// sharesOf are the links of a connection made or deleted (and those of
// another kind's object of the same name: a metadata event does not say
// its kind, and assessing a link again costs a read).
func (r *ShareLinkReconciler) sharesOf(ctx context.Context, conn client.Object) []reconcile.Request {
	var links v1alpha1.ShareLinkList
	if err := r.List(ctx, &links, client.InNamespace(conn.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, l := range links.Items {
		if ref := v1alpha1.ParseConnectionReference(l.Spec.Connection); ref.Name == conn.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&l)})
		}
	}
	return out
}
