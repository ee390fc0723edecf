package controllers

import (
	"context"
	"errors"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// statusObject is an object with a Ready condition in its status.
type statusObject interface {
	client.Object
	GetConditions() *[]metav1.Condition
}

// setCondition sets a condition for the object's current generation.
func setCondition(obj statusObject, conditionType string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(obj.GetConditions(), metav1.Condition{
		Type:               conditionType,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: obj.GetGeneration(),
	})
}

// patchStatus writes obj's status if it changed since before, and emits an
// event when the Ready condition moved to another status or reason; it
// reports whether it did. The patch carries before's resource version, so a
// reconcile that read a stale cache fails with a conflict instead of
// writing over newer state (see finish).
func patchStatus(ctx context.Context, c client.Client, recorder events.EventRecorder, before, obj statusObject) (bool, error) {
	if equality.Semantic.DeepEqual(before, obj) {
		return false, nil
	}
	if err := c.Status().Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return false, err
	}
	was := meta.FindStatusCondition(*before.GetConditions(), v1alpha1.ConditionReady)
	now := meta.FindStatusCondition(*obj.GetConditions(), v1alpha1.ConditionReady)
	if now == nil || (was != nil && was.Status == now.Status && was.Reason == now.Reason) {
		return false, nil
	}
	eventType := corev1.EventTypeWarning
	if now.Status == metav1.ConditionTrue {
		eventType = corev1.EventTypeNormal
	}
	recorder.Eventf(obj, nil, eventType, now.Reason, "Reconcile", "%s", eventNote(now.Message))
	return true, nil
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

// eventNote fits a message into an event's note, which the API server
// limits to 1 KiB.
func eventNote(message string) string {
	const limit = 1024
	if len(message) <= limit {
		return message
	}
	cut := limit - len("…")
	for !utf8.RuneStart(message[cut]) {
		cut--
	}
	return message[:cut] + "…"
}
