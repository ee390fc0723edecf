package controllers

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// TransferTTLReconciler deletes finished Transfers once their
// ttlSecondsAfterFinished passed, as Kubernetes' TTL-after-finished
// controller does Jobs.
type TransferTTLReconciler struct {
	client.Client
}

// Reconcile deletes the transfer when its time is up, or comes back then.
func (r *TransferTTLReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var t v1alpha1.Transfer
	if err := r.Get(ctx, req.NamespacedName, &t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ttl := t.Spec.TTLSecondsAfterFinished
	if ttl == nil || !t.Finished() || t.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	if left := time.Until(t.Status.CompletionTime.Add(time.Duration(*ttl) * time.Second)); left > 0 {
		return ctrl.Result{RequeueAfter: left}, nil
	}
	return ctrl.Result{}, client.IgnoreNotFound(r.Delete(ctx, &t, client.Preconditions{UID: &t.UID}))
}

// SetupWithManager watches Transfers.
func (r *TransferTTLReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("transfer-ttl").For(&v1alpha1.Transfer{}).Complete(r)
}
