package controllers

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// Slugs are cluster-wide, and clients call them by name, so they change
// hands with care. A slug stays with the connection serving it: a newer
// claim, even from an older object, cannot take it over. When none serves
// it, the oldest claim gets it (by creation time, then namespace and
// name); except that a slug freed by a connection (deleted, or given
// another slug) is held for that connection's namespace for a grace
// period, so that deleting and recreating a connection (kubectl replace
// --force, an Argo CD Replace, a rename) keeps its slug, and another
// namespace's claim never silently takes over a name clients still call.

// LabelSlugReservation marks the Leases that record which namespace a slug
// is held for.
const LabelSlugReservation = "sftpgate.dev/slug-reservation"

// slugReservations keeps, in the manager's namespace, a Lease for each
// slug a connection serves, naming the connection's namespace (its holder
// identity). Once the slug is freed, the Lease's renew time is when, and
// its duration the grace period: the slug is held for that namespace
// until then. Kept in the API server, the reservation survives a restart
// of the manager, and no finalizer holds up the deletion of connections.
// Only the sweep (sweepSlugs) says a slug is freed, and deletes
// reservations past their grace period: no claim can.
type slugReservations struct {
	// Client reads Leases from the manager's cache (of its namespace, with
	// LabelSlugReservation) and writes them.
	client    client.Client
	namespace string
	grace     time.Duration
	// sweep is how often sweepSlugs runs, and how old a reservation must
	// be before the sweep may find its slug freed (the status of the
	// connection that took it may still be on its way to the cache).
	sweep time.Duration
}

// defaultSlugSweep is how often slug reservations are swept.
const defaultSlugSweep = 30 * time.Second

func (s *slugReservations) key(slug string) client.ObjectKey {
	return client.ObjectKey{Namespace: s.namespace, Name: "slug-" + slug}
}

// get returns slug's Lease, or nil.
func (s *slugReservations) get(ctx context.Context, slug string) (*coordinationv1.Lease, error) {
	var lease coordinationv1.Lease
	if err := s.client.Get(ctx, s.key(slug), &lease); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return &lease, nil
}

// hold records that a connection of namespace ns serves slug.
func (s *slugReservations) hold(ctx context.Context, slug, ns string) error {
	lease, err := s.get(ctx, slug)
	switch {
	case err != nil:
		return err
	case lease == nil:
		key := s.key(slug)
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
			Labels: map[string]string{LabelSlugReservation: "true", v1alpha1.LabelManagedBy: v1alpha1.ManagedBy}}}
		lease.Spec = heldBy(ns)
		return s.client.Create(ctx, lease)
	case lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity == ns && lease.Spec.RenewTime == nil:
		return nil
	}
	lease.Spec = heldBy(ns)
	return s.client.Update(ctx, lease)
}

func heldBy(ns string) coordinationv1.LeaseSpec {
	now := metav1.NowMicro()
	return coordinationv1.LeaseSpec{HolderIdentity: &ns, AcquireTime: &now}
}

// heldFor says which namespace, if any, a slug that no connection serves
// (as the cache sees it) is held for, and until when. Until the sweep has
// found the slug freed, it is held as if served, for at least the next
// sweep; after the grace period, it is free.
func (s *slugReservations) heldFor(ctx context.Context, slug string, now time.Time) (string, time.Time, error) {
	lease, err := s.get(ctx, slug)
	if err != nil || lease == nil || lease.Spec.HolderIdentity == nil {
		return "", time.Time{}, err
	}
	until := now.Add(2 * s.sweep)
	if freed, grace := lease.Spec.RenewTime, lease.Spec.LeaseDurationSeconds; freed != nil && grace != nil {
		if until = freed.Add(time.Duration(*grace) * time.Second); !now.Before(until) {
			return "", time.Time{}, nil // the sweep deletes it
		}
	}
	return *lease.Spec.HolderIdentity, until, nil
}

// sweepSlugs runs until ctx ends (on the leader): every sweep it finds the
// reservations whose slug no connection serves any more, and starts their
// grace period; and it deletes those past it. So reservations do not pile
// up, and a slug's grace period starts when it is freed, not when someone
// next asks for it.
func (r *SftpConnectionReconciler) sweepSlugs(ctx context.Context) error {
	tick := time.NewTicker(r.Slugs.sweep)
	defer tick.Stop()
	for {
		if err := r.sweepSlugsOnce(ctx, time.Now()); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "sweeping slug reservations")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (r *SftpConnectionReconciler) sweepSlugsOnce(ctx context.Context, now time.Time) error {
	s := r.Slugs
	var leases coordinationv1.LeaseList
	if err := s.client.List(ctx, &leases, client.InNamespace(s.namespace), client.MatchingLabels{LabelSlugReservation: "true"}); err != nil {
		return err
	}
	var errs []error
	for i := range leases.Items {
		lease := &leases.Items[i]
		slug := strings.TrimPrefix(lease.Name, "slug-")
		switch spec := lease.Spec; {
		case spec.RenewTime != nil && spec.LeaseDurationSeconds != nil:
			if now.After(spec.RenewTime.Add(time.Duration(*spec.LeaseDurationSeconds) * time.Second)) {
				errs = append(errs, client.IgnoreNotFound(s.client.Delete(ctx, lease, client.Preconditions{ResourceVersion: &lease.ResourceVersion})))
			}
		case spec.AcquireTime == nil || now.Sub(spec.AcquireTime.Time) >= s.sweep:
			var conns v1alpha1.SftpConnectionList
			if err := r.Client.List(ctx, &conns, client.MatchingFields{IndexSlug: slug}); err != nil {
				errs = append(errs, err)
				continue
			}
			if slices.ContainsFunc(conns.Items, func(c v1alpha1.SftpConnection) bool {
				return c.Status.Slug == slug && c.DeletionTimestamp.IsZero()
			}) {
				continue
			}
			freed := metav1.NewMicroTime(now)
			seconds := int32(s.grace.Seconds())
			lease.Spec.RenewTime, lease.Spec.LeaseDurationSeconds = &freed, &seconds
			errs = append(errs, s.client.Update(ctx, lease))
		}
	}
	return errors.Join(errs...)
}

// slugClaim is what stands between a connection and its slug: another
// connection that holds it, or a reservation for another namespace.
type slugClaim struct {
	holder *v1alpha1.SftpConnection
	// heldUntil is when a reservation for another namespace ends.
	heldUntil time.Time
}

// claimSlug decides whether conn gets its slug (a zero slugClaim) or what
// keeps it from it.
func (r *SftpConnectionReconciler) claimSlug(ctx context.Context, conn *v1alpha1.SftpConnection) (slugClaim, error) {
	slug := conn.EffectiveSlug()
	var list v1alpha1.SftpConnectionList
	if err := r.Client.List(ctx, &list, client.MatchingFields{IndexSlug: slug}); err != nil {
		return slugClaim{}, err
	}
	claims := slices.DeleteFunc(list.Items, func(c v1alpha1.SftpConnection) bool { return !c.DeletionTimestamp.IsZero() })
	serving := slices.ContainsFunc(claims, func(c v1alpha1.SftpConnection) bool { return c.Status.Slug == slug })
	if !serving {
		ns, until, err := r.Slugs.heldFor(ctx, slug, time.Now())
		if err != nil {
			return slugClaim{}, err
		}
		if ns != "" {
			claims = slices.DeleteFunc(claims, func(c v1alpha1.SftpConnection) bool { return c.Namespace != ns })
			if len(claims) == 0 || conn.Namespace != ns {
				return slugClaim{heldUntil: until}, nil
			}
		}
	}
	if len(claims) == 0 {
		// conn is being deleted, or changed its slug since it was read:
		// the next reconcile sees it as it is.
		return slugClaim{}, nil
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
		return slugClaim{}, nil
	}
	return slugClaim{holder: &holder}, nil
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
	slug := func(o client.Object) string { return o.(*v1alpha1.SftpConnection).EffectiveSlug() } //nolint:forcetypeassert // events of connections
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
