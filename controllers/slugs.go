package controllers

import (
	"cmp"
	"context"
	"slices"
	"time"

	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// A slug stays with the connection serving it: a newer claim, even from an
// older object, cannot take it over. When none serves it, the oldest claim
// gets it (by creation time, then namespace and name); except that a slug
// freed by a connection (deleted, or given another slug) is first held for
// that connection's namespace for a grace period (see reservations).

// slugInUse reports whether a live connection serves slug.
func (r *SftpConnectionReconciler) slugInUse(ctx context.Context, slug string) (bool, error) {
	var conns v1alpha1.SftpConnectionList
	if err := r.Client.List(ctx, &conns, client.MatchingFields{IndexSlug: slug}); err != nil {
		return false, err
	}
	return slices.ContainsFunc(conns.Items, func(c v1alpha1.SftpConnection) bool {
		return c.Status.Slug == slug && c.DeletionTimestamp.IsZero()
	}), nil
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
