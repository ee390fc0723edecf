package controllers

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/robfig/cron/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/calendar"
)

// LabelSchedule names, on a Transfer, the TransferSchedule that made it.
const LabelSchedule = "sftpgate.dev/transfer-schedule"

// maxMissed bounds the runs a schedule looks back over after the
// controller was down: past it, only the latest missed run counts.
const maxMissed = 100

// TransferScheduleReconciler makes the Transfers of TransferSchedules when
// they are due, as the CronJob controller makes Jobs: concurrency policy,
// starting deadline, history limits, suspend.
type TransferScheduleReconciler struct {
	client.Client
	Recorder events.EventRecorder
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// +kubebuilder:rbac:groups=sftpgate.dev,resources=transferschedules,verbs=get;list;watch
// +kubebuilder:rbac:groups=sftpgate.dev,resources=transferschedules/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=sftpgate.dev,resources=transfers,verbs=get;list;watch;create;delete

// Reconcile makes the schedule's due Transfer, trims its history and
// requeues itself for the next run.
func (r *TransferScheduleReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var s v1alpha1.TransferSchedule
	if err := r.Get(ctx, req.NamespacedName, &s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := s.DeepCopy()
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	var owned v1alpha1.TransferList
	if err := r.List(ctx, &owned, client.InNamespace(s.Namespace), client.MatchingLabels{LabelSchedule: s.Name}); err != nil {
		return ctrl.Result{}, err
	}
	active, succeeded, failed := split(&s, owned.Items)
	if err := r.trim(ctx, succeeded, s.Spec.SuccessfulTransfersHistoryLimit, 3); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.trim(ctx, failed, s.Spec.FailedTransfersHistoryLimit, 1); err != nil {
		return ctrl.Result{}, err
	}
	s.Status.Active = nil
	for _, t := range active {
		s.Status.Active = append(s.Status.Active, t.Name)
	}
	if len(succeeded) > 0 {
		s.Status.LastSuccessfulTime = succeeded[len(succeeded)-1].Status.CompletionTime
	}
	sched, err := calendar.Parse(s.Spec.Schedule, s.Spec.TimeZone)
	if err == nil && sched.Next(now).IsZero() {
		err = fmt.Errorf("the schedule %q never comes due", s.Spec.Schedule)
	}
	if err != nil || s.Spec.Suspend {
		f := scheduleFacts{}
		if err != nil {
			f.invalid = err.Error()
		}
		setScheduleStatus(&s, f)
		_, err := patchStatus(ctx, r.Client, r.Recorder, before, &s)
		return ctrl.Result{}, err
	}
	due := lastDue(sched, s.CreationTimestamp.Time, s.Status.LastScheduleTime, now)
	if !due.IsZero() {
		if err := r.start(ctx, &s, due, now, active); err != nil {
			return ctrl.Result{}, err
		}
	}
	next := sched.Next(now)
	setScheduleStatus(&s, scheduleFacts{next: next})
	if _, err := patchStatus(ctx, r.Client, r.Recorder, before, &s); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: next.Sub(now) + 100*time.Millisecond}, nil
}

// start makes the Transfer due at due, unless the concurrency policy or
// the starting deadline says to skip it; either way due is handled.
func (r *TransferScheduleReconciler) start(ctx context.Context, s *v1alpha1.TransferSchedule, due, now time.Time, active []*v1alpha1.Transfer) error {
	handled := &metav1.Time{Time: due}
	if d := s.Spec.StartingDeadlineSeconds; d != nil && now.Sub(due) > time.Duration(*d)*time.Second {
		s.Status.LastScheduleTime = handled
		r.Recorder.Eventf(s, nil, "Warning", "MissedSchedule", "Schedule", "the run due at %s is past its starting deadline", due.UTC().Format(time.RFC3339))
		return nil
	}
	switch {
	case len(active) > 0 && s.Spec.ConcurrencyPolicy == v1alpha1.ConcurrencyForbid:
		s.Status.LastScheduleTime = handled
		r.Recorder.Eventf(s, nil, "Normal", "Skipped", "Schedule", "the run due at %s is skipped: %s still runs", due.UTC().Format(time.RFC3339), active[0].Name)
		return nil
	case len(active) > 0 && s.Spec.ConcurrencyPolicy == v1alpha1.ConcurrencyReplace:
		for _, t := range active {
			if err := r.Delete(ctx, t, client.Preconditions{UID: &t.UID}); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
	}
	t := &v1alpha1.Transfer{ObjectMeta: metav1.ObjectMeta{
		Namespace: s.Namespace, Name: fmt.Sprintf("%s-%d", s.Name, due.Unix()),
		Labels: map[string]string{}, Annotations: map[string]string{}},
		Spec: *s.Spec.TransferTemplate.Spec.DeepCopy()}
	for k, v := range s.Spec.TransferTemplate.Metadata.Labels {
		t.Labels[k] = v
	}
	for k, v := range s.Spec.TransferTemplate.Metadata.Annotations {
		t.Annotations[k] = v
	}
	t.Labels[LabelSchedule] = s.Name
	if err := controllerutil.SetControllerReference(s, t, r.Scheme()); err != nil {
		return err
	}
	switch err := r.Create(ctx, t); {
	case apierrors.IsAlreadyExists(err):
		// This run's Transfer, made before (a repeated reconcile), unless
		// something else has its name.
		var existing v1alpha1.Transfer
		if err := r.Get(ctx, client.ObjectKeyFromObject(t), &existing); err != nil {
			return err
		}
		if !metav1.IsControlledBy(&existing, s) {
			r.Recorder.Eventf(s, nil, "Warning", "NameTaken", "Schedule", "the run due at %s is skipped: a Transfer named %s exists and is not this schedule's",
				due.UTC().Format(time.RFC3339), t.Name)
		}
	case err != nil:
		return err
	}
	s.Status.LastScheduleTime = handled
	r.Recorder.Eventf(s, t, "Normal", "Created", "Schedule", "made Transfer %s for the run due at %s", t.Name, due.UTC().Format(time.RFC3339))
	return nil
}

// trim deletes the oldest of finished beyond limit (def when unset).
func (r *TransferScheduleReconciler) trim(ctx context.Context, finished []*v1alpha1.Transfer, limit *int32, def int32) error {
	keep := int(def)
	if limit != nil {
		keep = int(*limit)
	}
	for _, t := range finished[:max(len(finished)-keep, 0)] {
		if err := r.Delete(ctx, t, client.Preconditions{UID: &t.UID}); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// split sorts the schedule's own Transfers into those still running and
// those that ended well or not, oldest first.
func split(s *v1alpha1.TransferSchedule, items []v1alpha1.Transfer) (active, succeeded, failed []*v1alpha1.Transfer) {
	for i := range items {
		t := &items[i]
		if !metav1.IsControlledBy(t, s) {
			continue
		}
		switch {
		case !t.Finished():
			active = append(active, t)
		case meta.IsStatusConditionTrue(t.Status.Conditions, v1alpha1.ConditionReady):
			succeeded = append(succeeded, t)
		default:
			failed = append(failed, t)
		}
	}
	byCompletion := func(a, b *v1alpha1.Transfer) int {
		return cmp.Or(a.Status.CompletionTime.Compare(b.Status.CompletionTime.Time), cmp.Compare(a.Name, b.Name))
	}
	slices.SortFunc(succeeded, byCompletion)
	slices.SortFunc(failed, byCompletion)
	slices.SortFunc(active, func(a, b *v1alpha1.Transfer) int { return cmp.Compare(a.Name, b.Name) })
	return active, succeeded, failed
}

// lastDue is the latest run due after the last one handled (or the
// schedule's creation) and not after now; zero when none is. After more
// than maxMissed runs were missed (the controller was long down), the
// latest is found from an hour before now.
func lastDue(sched cron.Schedule, created time.Time, last *metav1.Time, now time.Time) time.Time {
	from := created
	if last != nil {
		from = last.Time
	}
	var due time.Time
	n := 0
	// Next gives the zero time for an expression that never fires (30
	// February): no run.
	for t := sched.Next(from); !t.IsZero() && !t.After(now); t = sched.Next(t) {
		if n++; n > maxMissed && from.Before(now.Add(-time.Hour)) {
			from, n = now.Add(-time.Hour), 0
			t = from
			continue
		}
		due = t
	}
	return due
}

// SetupWithManager watches schedules and the Transfers they own.
func (r *TransferScheduleReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.TransferSchedule{}).
		Owns(&v1alpha1.Transfer{}).
		Complete(r)
}
