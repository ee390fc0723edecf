// Package statuspatch writes the status of sftpgate's objects in one way,
// for the manager's controllers and the worker alike: a patch onto the
// resourceVersion read, and an event when Ready's status or reason
// changes to True or False.
package statuspatch

import (
	"context"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// Object is an object with conditions in its status.
type Object interface {
	client.Object
	GetConditions() *[]metav1.Condition
}

// Writer writes statuses through Client and records their events through
// Recorder (none when nil), as Action ("Reconcile", "Watch").
type Writer struct {
	Client   client.Client
	Recorder events.EventRecorder
	Action   string
}

// Patch writes obj's status when obj differs from before, the object as
// it was read, and records an event when Ready's status or reason changed,
// unless to Unknown (an object on its way: its event comes when it gets
// there, and one that goes back and forth costs no writes for it); it
// reports whether it recorded one. The patch carries before's
// resourceVersion: a writer that read a stale copy, or an object deleted
// and made again under its name, gets a conflict instead of writing over
// newer state.
func (w Writer) Patch(ctx context.Context, before, obj Object) (bool, error) {
	if equality.Semantic.DeepEqual(before, obj) {
		return false, nil
	}
	if err := w.Client.Status().Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return false, err
	}
	was := meta.FindStatusCondition(*before.GetConditions(), v1alpha1.ConditionReady)
	now := meta.FindStatusCondition(*obj.GetConditions(), v1alpha1.ConditionReady)
	if w.Recorder == nil || now == nil || now.Status == metav1.ConditionUnknown || (was != nil && was.Status == now.Status && was.Reason == now.Reason) {
		return false, nil
	}
	w.Recorder.Eventf(obj, nil, EventType(*obj.GetConditions()), now.Reason, w.Action, "%s", Cut(now.Message, noteLimit))
	return true, nil
}

// EventType is the rule for every event of Ready's: a Warning when Ready
// is False and the object is not Reconciling (it failed, or waits on
// something it cannot fix), Normal otherwise (ready, or on its way).
func EventType(conditions []metav1.Condition) string {
	if meta.IsStatusConditionFalse(conditions, v1alpha1.ConditionReady) &&
		!meta.IsStatusConditionTrue(conditions, v1alpha1.ConditionReconciling) {
		return corev1.EventTypeWarning
	}
	return corev1.EventTypeNormal
}

// noteLimit is the API server's limit on an event's note, in bytes.
const noteLimit = 1024

// Cut fits s into n bytes, cutting at a character's start and marking the
// cut with "…", so that a message never ends in half a character.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
