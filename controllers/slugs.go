package controllers

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/statuspatch"
)

// A slug is the gateway's path to one object, whatever its kind: an
// SftpConnection (its name unless spec.slug says otherwise), an
// FtpConnection or an ObjectStore (when its spec.slug names one). It
// stays with the object serving it: a newer claim, even from an older
// object, cannot take it over. When none serves it, the oldest claim gets
// it (by creation time, then namespace and name); except that a slug
// freed (its object deleted, or given another slug) is first held for
// that object's namespace for a grace period (see reservations).

// slugged is an object that may claim a slug.
type slugged interface {
	statuspatch.Object
	// ClaimedSlug is the slug it asks for; "" for none.
	ClaimedSlug() string
	// ServedSlug is where its status keeps the slug it is served under.
	ServedSlug() *string
}

// sluggedLists are the kinds whose objects claim slugs.
var sluggedLists = []func() client.ObjectList{
	func() client.ObjectList { return &v1alpha1.SftpConnectionList{} },
	func() client.ObjectList { return &v1alpha1.FtpConnectionList{} },
	func() client.ObjectList { return &v1alpha1.ObjectStoreList{} },
}

// indexSlug registers IndexSlug on obj's kind.
func indexSlug(ctx context.Context, mgr ctrl.Manager, obj slugged) error {
	return mgr.GetFieldIndexer().IndexField(ctx, obj, IndexSlug, func(o client.Object) []string {
		if slug := o.(slugged).ClaimedSlug(); slug != "" { //nolint:forcetypeassert // the kind's
			return []string{slug}
		}
		return nil
	})
}

// kindName names obj's kind in messages ("FtpConnection").
func kindName(obj client.Object) string { return reflect.TypeOf(obj).Elem().Name() }

// slugs decides who serves which slug, across kinds.
type slugs struct {
	Client client.Reader
	// Held keeps which namespace a freed slug is held for.
	Held *reservations
}

// claimsOf are the live objects of every kind that claim slug.
func (s *slugs) claimsOf(ctx context.Context, slug string) ([]slugged, error) {
	var all []slugged
	for _, newList := range sluggedLists {
		list := newList()
		if err := s.Client.List(ctx, list, client.MatchingFields{IndexSlug: slug}); err != nil {
			return nil, err
		}
		_ = meta.EachListItem(list, func(o runtime.Object) error {
			if obj := o.(slugged); obj.GetDeletionTimestamp().IsZero() { //nolint:forcetypeassert // a slugged kind's
				all = append(all, obj)
			}
			return nil
		})
	}
	return all, nil
}

// inUse reports whether a live object serves slug.
func (s *slugs) inUse(ctx context.Context, slug string) (bool, error) {
	claims, err := s.claimsOf(ctx, slug)
	return slices.ContainsFunc(claims, func(c slugged) bool { return *c.ServedSlug() == slug }), err
}

// slugFacts is what keeps an object from the slug it asks for.
type slugFacts struct {
	// holder names the object serving it, as the claimant's namespace
	// may know it; "" when none does.
	holder string
	// heldUntil is when the slug stops being held for the namespace
	// that freed it; zero when it is not.
	heldUntil time.Time
}

// claim decides whether obj gets the slug it asks for, records it in
// obj's status (or that it has none), and holds it for obj's namespace.
func (s *slugs) claim(ctx context.Context, obj slugged) (slugFacts, ctrl.Result, error) {
	slug := obj.ClaimedSlug()
	served := obj.ServedSlug()
	if slug == "" {
		*served = ""
		return slugFacts{}, ctrl.Result{}, nil
	}
	claims, err := s.claimsOf(ctx, slug)
	if err != nil {
		return slugFacts{}, ctrl.Result{}, err
	}
	if !slices.ContainsFunc(claims, func(c slugged) bool { return *c.ServedSlug() == slug }) {
		ns, until, err := s.Held.heldFor(ctx, slug, time.Now())
		if err != nil {
			return slugFacts{}, ctrl.Result{}, err
		}
		if ns != "" {
			claims = slices.DeleteFunc(claims, func(c slugged) bool { return c.GetNamespace() != ns })
			if len(claims) == 0 || obj.GetNamespace() != ns {
				*served = ""
				return slugFacts{heldUntil: until}, ctrl.Result{RequeueAfter: time.Until(until) + time.Second}, nil
			}
		}
	}
	if len(claims) > 0 {
		holder := slices.MinFunc(claims, func(a, b slugged) int {
			aServes, bServes := *a.ServedSlug() == slug, *b.ServedSlug() == slug
			if aServes != bServes {
				if aServes {
					return -1
				}
				return 1
			}
			return cmp.Or(a.GetCreationTimestamp().Compare(b.GetCreationTimestamp().Time),
				cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
		})
		if holder.GetUID() != obj.GetUID() {
			*served = ""
			// Name the holder only to its own namespace's users.
			name := "another " + kindName(holder)
			if holder.GetNamespace() == obj.GetNamespace() {
				name = fmt.Sprintf("%s %q", kindName(holder), holder.GetName())
			}
			return slugFacts{holder: name}, ctrl.Result{}, nil
		}
	}
	// Served (or, no claim listed, obj is being deleted or changed its
	// slug since it was read: the next reconcile sees it as it is).
	*served = slug
	return slugFacts{}, ctrl.Result{}, s.Held.hold(ctx, slug, obj.GetNamespace())
}

// blocked sets obj's Ready condition to what f says keeps it from its
// slug, and reports whether anything does.
func (f slugFacts) blocked(obj slugged) bool {
	slug := obj.ClaimedSlug()
	switch {
	case f.holder != "":
		setCondition(obj, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSlugConflict, fmt.Sprintf(
			"slug %q is already served for %s; choose another spec.slug", slug, f.holder))
	case !f.heldUntil.IsZero():
		setCondition(obj, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSlugConflict, fmt.Sprintf(
			"slug %q was served in another namespace until recently and is held for it until %s; choose another spec.slug, or wait",
			slug, f.heldUntil.UTC().Format(time.RFC3339)))
	default:
		return false
	}
	return true
}

// claimants enqueues the objects of own's kind (newList's) that ask for
// the slug of an object of any kind that was created, deleted, or
// changed its slug, so that a slug that becomes free passes to the next
// in line.
func (s *slugs) claimants(newList func() client.ObjectList) handler.EventHandler {
	enqueue := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], changed client.Object, slugs ...string) {
		for _, slug := range slugs {
			if slug == "" {
				continue
			}
			list := newList()
			if err := s.Client.List(ctx, list, client.MatchingFields{IndexSlug: slug}); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "listing claims of a slug", "slug", slug)
				continue
			}
			_ = meta.EachListItem(list, func(o runtime.Object) error {
				if c := o.(client.Object); c.GetUID() != changed.GetUID() { //nolint:forcetypeassert // a list's item
					q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(c)})
				}
				return nil
			})
		}
	}
	slug := func(o client.Object) string { return o.(slugged).ClaimedSlug() } //nolint:forcetypeassert // events of slugged kinds
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

// watchSlugs has b watch every slugged kind for claims of own's kind
// (newList's).
func (s *slugs) watchSlugs(b *builder.Builder, newList func() client.ObjectList) *builder.Builder {
	for _, obj := range []client.Object{&v1alpha1.SftpConnection{}, &v1alpha1.FtpConnection{}, &v1alpha1.ObjectStore{}} {
		b = b.Watches(obj, s.claimants(newList))
	}
	return b
}
