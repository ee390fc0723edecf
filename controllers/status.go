package controllers

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/internal/statuspatch"
)

// setCondition sets a condition for the object's current generation.
func setCondition(obj statuspatch.Object, conditionType string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(obj.GetConditions(), metav1.Condition{
		Type:               conditionType,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: obj.GetGeneration(),
	})
}

// patchStatus writes obj's status if it changed since before, the object
// as read (see statuspatch), and emits an event when Ready moved; it
// reports whether it did. A conflict (a stale cache) is handled by finish.
func patchStatus(ctx context.Context, c client.Client, recorder events.EventRecorder, before, obj statuspatch.Object) (bool, error) {
	return statuspatch.Writer{Client: c, Recorder: recorder, Action: "Reconcile"}.Patch(ctx, before, obj)
}

// errStaleCache says the cache has not caught up with the API server yet.
var errStaleCache = errors.New("the cache is behind the API server")

// finish ends a reconcile. A conflict (the object changed since it was read,
// or the cache had not caught up with our last write), an AlreadyExists (a
// racing reconcile created the object first) or a stale cache is no
// failure: try again shortly with fresh reads.
func finish(result ctrl.Result, err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || errors.Is(err, errStaleCache) {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	return result, err
}
