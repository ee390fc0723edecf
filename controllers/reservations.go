package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// Some names are cluster-wide and called by clients: slugs, and API token
// hashes. Each one a namespace uses is reserved for it, so that deleting
// and recreating the object using it (kubectl replace --force, an Argo CD
// Replace, a rename) keeps it, and another namespace's claim never takes
// over, in between, a name clients still call.

// LabelReservation marks the Leases that reserve a cluster-wide name for a
// namespace; its value is the kind of name ("slug", "token").
const LabelReservation = "sftpgate.dev/reservation"

// defaultSweep is how often reservations are swept.
const defaultSweep = 30 * time.Second

// reservations keeps, in the manager's namespace, a Lease "<kind>-<name>"
// for each name of one kind in use, naming the namespace using it (its
// holder identity). Once the name is freed, the Lease's renew time is
// when, and its duration the grace period: the name is held for that
// namespace until then. Kept in the API server, a reservation survives a
// restart of the manager, and no finalizer holds up the deletion of the
// objects using names. Only the sweep says a name is freed, and deletes
// reservations past their grace period: no claim can.
type reservations struct {
	// client reads Leases from the manager's cache (of its namespace, with
	// LabelReservation) and writes them; apiReader reads one the cache
	// cannot see.
	client    client.Client
	apiReader client.Reader
	namespace string
	kind      string
	grace     time.Duration
	// sweep is how often Start sweeps, and how old a reservation must be
	// before the sweep may find its name freed (the status of the object
	// that took it may still be on its way to the cache).
	sweep time.Duration
	// inUse says whether a live object uses name, as the cache sees it.
	inUse func(ctx context.Context, name string) (bool, error)
}

func (s *reservations) key(name string) client.ObjectKey {
	return client.ObjectKey{Namespace: s.namespace, Name: s.kind + "-" + name}
}

// get returns name's Lease, or nil.
func (s *reservations) get(ctx context.Context, name string) (*coordinationv1.Lease, error) {
	var lease coordinationv1.Lease
	if err := s.client.Get(ctx, s.key(name), &lease); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return &lease, nil
}

// hold records that an object of namespace ns uses name.
func (s *reservations) hold(ctx context.Context, name, ns string) error {
	lease, err := s.get(ctx, name)
	if err == nil && lease == nil {
		lease, err = s.create(ctx, name, ns)
	}
	if err != nil || lease == nil {
		return err
	}
	if holder := lease.Spec.HolderIdentity; holder != nil && *holder == ns && lease.Spec.RenewTime == nil {
		return nil
	}
	lease.Spec = heldBy(ns)
	return s.client.Update(ctx, lease)
}

// create makes name's Lease, held for ns, and returns nil. If it exists
// already (made at the same moment by another worker, so the cache has
// not seen it yet), it returns that Lease as the API server has it;
// unless it is held for another namespace, which the claim being made did
// not know.
func (s *reservations) create(ctx context.Context, name, ns string) (*coordinationv1.Lease, error) {
	key := s.key(name)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
		Labels: map[string]string{LabelReservation: s.kind, v1alpha1.LabelManagedBy: v1alpha1.ManagedBy}}}
	lease.Spec = heldBy(ns)
	if err := s.client.Create(ctx, lease); !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	lease = &coordinationv1.Lease{}
	if err := s.apiReader.Get(ctx, key, lease); err != nil {
		return nil, err
	}
	if holder := lease.Spec.HolderIdentity; holder != nil && *holder != ns {
		return nil, fmt.Errorf("the %s %s has a reservation the cache had not seen: deciding again", s.kind, name)
	}
	return lease, nil
}

func heldBy(ns string) coordinationv1.LeaseSpec {
	now := metav1.NowMicro()
	return coordinationv1.LeaseSpec{HolderIdentity: &ns, AcquireTime: &now}
}

// heldFor says which namespace, if any, a name that no object uses (as the
// cache sees it) is held for, and until when. Until the sweep has found
// the name freed, it is held as if used, for at least the next sweep;
// after the grace period, it is free.
func (s *reservations) heldFor(ctx context.Context, name string, now time.Time) (string, time.Time, error) {
	lease, err := s.get(ctx, name)
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

// Start sweeps until ctx ends (a manager runs it on the leader): every
// sweep it finds the reservations whose name no object uses any more, and
// starts their grace period; and it deletes those past it. So reservations
// do not pile up, and a name's grace period starts when it is freed, not
// when someone next asks for it.
func (s *reservations) Start(ctx context.Context) error {
	tick := time.NewTicker(s.sweep)
	defer tick.Stop()
	for {
		if err := s.sweepOnce(ctx, time.Now()); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "sweeping reservations", "kind", s.kind)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (s *reservations) sweepOnce(ctx context.Context, now time.Time) error {
	var leases coordinationv1.LeaseList
	if err := s.client.List(ctx, &leases, client.InNamespace(s.namespace), client.MatchingLabels{LabelReservation: s.kind}); err != nil {
		return err
	}
	var errs []error
	freed := map[string][]*coordinationv1.Lease{} // by namespace held for, still in their grace period
	for i := range leases.Items {
		lease := &leases.Items[i]
		switch spec := lease.Spec; {
		case spec.RenewTime != nil && spec.LeaseDurationSeconds != nil:
			if now.After(spec.RenewTime.Add(time.Duration(*spec.LeaseDurationSeconds) * time.Second)) {
				errs = append(errs, s.delete(ctx, lease))
			} else if spec.HolderIdentity != nil {
				freed[*spec.HolderIdentity] = append(freed[*spec.HolderIdentity], lease)
			}
		case spec.AcquireTime == nil || now.Sub(spec.AcquireTime.Time) >= s.sweep:
			used, err := s.inUse(ctx, strings.TrimPrefix(lease.Name, s.kind+"-"))
			if err != nil || used {
				errs = append(errs, err)
				continue
			}
			freedAt := metav1.NewMicroTime(now)
			seconds := int32(s.grace.Seconds())
			lease.Spec.RenewTime, lease.Spec.LeaseDurationSeconds = &freedAt, &seconds
			errs = append(errs, changedMeanwhile(s.client.Update(ctx, lease)))
		}
	}
	// A namespace that frees name after name (editing a slug or a token in
	// a loop) keeps its latest maxFreed reservations, not all.
	for _, held := range freed {
		if len(held) <= maxFreed {
			continue
		}
		slices.SortFunc(held, func(a, b *coordinationv1.Lease) int { return b.Spec.RenewTime.Compare(a.Spec.RenewTime.Time) })
		for _, lease := range held[maxFreed:] {
			errs = append(errs, s.delete(ctx, lease))
		}
	}
	return errors.Join(errs...)
}

// maxFreed bounds the freed names of one kind held for one namespace.
const maxFreed = 100

// delete deletes lease as the sweep read it.
func (s *reservations) delete(ctx context.Context, lease *coordinationv1.Lease) error {
	return changedMeanwhile(client.IgnoreNotFound(s.client.Delete(ctx, lease, client.Preconditions{ResourceVersion: &lease.ResourceVersion})))
}

// changedMeanwhile ignores a conflict: the reservation was held again
// since the sweep read it, and the next sweep decides on what it is now.
func changedMeanwhile(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}
