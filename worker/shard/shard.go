// Package shard divides a component's work among its replicas through
// Kubernetes Leases, and nothing else. Each replica renews a member Lease;
// each item of work (a watch, a transfer) has a Lease of its own naming the
// replica doing it, written only when the item changes hands. A replica
// holds its items while its membership is live (renewed within the lease
// duration, without a lapse since it took them), so renewing costs one
// write per replica, however many items. A replica takes free items while
// it holds fewer than its share (the items over the live members, rounded
// up), takes an item whose holder's membership has expired (read at the
// API server, not from a cache), and gives items back when it holds more
// than its share (after a replica joined). A replica that dies leaves its
// membership to expire: the others take its items within one lease
// duration.
package shard

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// Labels of the Leases, by which a replica lists them.
const (
	// LabelShard marks every Lease of the package's with the kind of work,
	// for a cache to hold only these.
	LabelShard = "sftpgate.dev/shard"
	// LabelItem marks an item's Lease with the kind of work.
	LabelItem = "sftpgate.dev/shard-item"
	// LabelMember marks a replica's member Lease with the kind of work.
	LabelMember = "sftpgate.dev/shard-member"
)

// DefaultLeaseDuration is how long a Lease holds without renewal: a dead
// replica's items wait at most this long for another.
const DefaultLeaseDuration = 15 * time.Second

// Shard is one replica's part of one kind of work.
type Shard struct {
	// Cache lists the Leases (a cache of the namespace's Leases will do);
	// Client reads and writes them at the API server.
	Cache  client.Reader
	Client client.Client
	// Namespace holds the Leases; Kind names the work ("watch"); Identity
	// is this replica's (its pod's name).
	Namespace, Kind, Identity string
	// LeaseDuration is DefaultLeaseDuration when zero.
	LeaseDuration time.Duration
	Clock         clock.Clock

	mu sync.Mutex
	// held is the items whose Lease names this replica, taken while its
	// membership was live; renewed is when it last renewed its membership.
	held    map[string]bool
	renewed time.Time
}

func (s *Shard) duration() time.Duration {
	if s.LeaseDuration > 0 {
		return s.LeaseDuration
	}
	return DefaultLeaseDuration
}

func (s *Shard) now() time.Time {
	if s.Clock == nil {
		return time.Now()
	}
	return s.Clock.Now()
}

// Holds reports whether this replica holds item now: its Lease names this
// replica and the membership was renewed within the lease duration. Work
// checks it before each step it must not do twice at once, so that a
// replica cut off from the API server stops before another takes its
// items.
func (s *Shard) Holds(item string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[item] && s.live()
}

// live says this replica's membership holds; call with mu held.
func (s *Shard) live() bool { return s.now().Sub(s.renewed) < s.duration() }

// Sync renews this replica's membership, takes free items of items (the
// work there is now) up to its share, and says which to keep doing (keep)
// and which to stop (drop: over its share, taken by another, or gone).
// Stop the dropped items' work, then Release them.
func (s *Shard) Sync(ctx context.Context, items []string) (keep, drop []string, err error) {
	lapsed, err := s.renewMember(ctx)
	if err != nil {
		return nil, nil, err
	}
	members, err := s.liveMembers(ctx)
	if err != nil {
		return nil, nil, err
	}
	share := (len(items) + len(members) - 1) / max(len(members), 1)
	var leases coordinationv1.LeaseList
	if err := s.Cache.List(ctx, &leases, client.InNamespace(s.Namespace), client.MatchingLabels{LabelItem: s.Kind}); err != nil {
		return nil, nil, err
	}
	byItem := map[string]*coordinationv1.Lease{}
	for i := range leases.Items {
		l := &leases.Items[i]
		byItem[l.Annotations[annotationItem]] = l
	}
	exists := map[string]bool{}
	for _, item := range items {
		exists[item] = true
	}

	s.mu.Lock()
	if s.held == nil || lapsed {
		// After a lapse another replica may have taken any item: hold
		// none until they are taken again.
		for item := range s.held {
			drop = append(drop, item)
		}
		s.held = map[string]bool{}
	}
	var named []string
	for item, l := range byItem {
		if exists[item] && holder(l) == s.Identity && !s.held[item] {
			named = append(named, item)
		}
	}
	s.mu.Unlock()
	// Items whose Lease names this replica, but that it does not hold (a
	// restart's, or after a lapse), are its own if the API server says
	// so: the cache may not have seen another take them.
	for _, item := range named {
		if err := s.adopt(ctx, item); err != nil {
			return nil, drop, err
		}
	}
	s.mu.Lock()
	mine := make([]string, 0, len(s.held))
	for item := range s.held {
		mine = append(mine, item)
	}
	s.mu.Unlock()
	slices.Sort(mine)

	for _, item := range mine {
		l := byItem[item]
		switch {
		case !exists[item]:
			drop = append(drop, item)
		case l != nil && holder(l) != s.Identity:
			// Taken by another (a cache that has not seen this
			// replica's take yet has no Lease at all).
			s.forget(item)
			drop = append(drop, item)
		default:
			keep = append(keep, item)
		}
	}
	// Over its share (a replica joined): give some back.
	if over := len(keep) - share; over > 0 {
		drop = append(drop, keep[len(keep)-over:]...)
		keep = keep[:len(keep)-over]
	}
	// Under it: take free items, in an order of this replica's own so that
	// replicas starting together do not all go for the same ones.
	free := make([]string, 0)
	for _, item := range items {
		if !slices.Contains(keep, item) && !slices.Contains(drop, item) && (byItem[item] == nil || !members[holder(byItem[item])]) {
			free = append(free, item)
		}
	}
	rand.Shuffle(len(free), func(i, j int) { free[i], free[j] = free[j], free[i] }) //nolint:gosec // spreading replicas, not a secret
	for _, item := range free {
		if len(keep) >= share {
			break
		}
		switch err := s.take(ctx, item, byItem[item]); {
		case err == nil:
			keep = append(keep, item)
		case isLost(err):
		default:
			return keep, drop, err
		}
	}
	slices.Sort(keep)
	return keep, drop, nil
}

// Release gives back item's Lease, once its work has stopped, for another
// replica to take at once.
func (s *Shard) Release(ctx context.Context, item string) error {
	if !s.forget(item) {
		return nil
	}
	lease := &coordinationv1.Lease{}
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.leaseName(item)}, lease); err != nil {
		return client.IgnoreNotFound(err)
	}
	if holder(lease) != s.Identity {
		return nil
	}
	return client.IgnoreNotFound(s.Client.Delete(ctx, lease, client.Preconditions{ResourceVersion: &lease.ResourceVersion}))
}

// Orphans are the items that are gone (not in exists) but still have a
// Lease, or are in also (say, a state stored for them), and that no live
// replica holds: what a replica that died holding a deleted item left, or
// an item deleted after it was given back. A live holder cleans up after
// its own items.
func (s *Shard) Orphans(ctx context.Context, exists map[string]bool, also []string) ([]string, error) {
	members, err := s.liveMembers(ctx)
	if err != nil {
		return nil, err
	}
	var leases coordinationv1.LeaseList
	if err := s.Cache.List(ctx, &leases, client.InNamespace(s.Namespace), client.MatchingLabels{LabelItem: s.Kind}); err != nil {
		return nil, err
	}
	held := map[string]bool{}
	candidates := slices.Clone(also)
	for i := range leases.Items {
		l := &leases.Items[i]
		item := l.Annotations[annotationItem]
		candidates = append(candidates, item)
		held[item] = held[item] || members[holder(l)]
	}
	slices.Sort(candidates)
	var orphans []string
	for _, item := range slices.Compact(candidates) {
		if !exists[item] && !held[item] {
			orphans = append(orphans, item)
		}
	}
	return orphans, nil
}

// Remove deletes an orphaned item's Lease, whoever it names.
func (s *Shard) Remove(ctx context.Context, item string) error {
	s.forget(item)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.leaseName(item)}}
	return client.IgnoreNotFound(s.Client.Delete(ctx, lease))
}

// Leave gives back every Lease this replica holds and its membership, for
// a replica stopping on purpose: its items move at once, not after a lease
// duration.
func (s *Shard) Leave(ctx context.Context) error {
	s.mu.Lock()
	items := make([]string, 0, len(s.held))
	for item := range s.held {
		items = append(items, item)
	}
	s.mu.Unlock()
	var errs []error
	for _, item := range items {
		errs = append(errs, s.Release(ctx, item))
	}
	member := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.memberName()}}
	errs = append(errs, client.IgnoreNotFound(s.Client.Delete(ctx, member)))
	return errors.Join(errs...)
}

// annotationItem holds an item's key on its Lease: names are bounded, keys
// need not be.
const annotationItem = "sftpgate.dev/shard-item"

func (s *Shard) leaseName(item string) string    { return s.Kind + "-" + item }
func (s *Shard) memberName() string              { return s.memberOf(s.Identity) }
func (s *Shard) memberOf(identity string) string { return s.Kind + "-member-" + identity }

// forget drops item from what this replica holds; false if it held none.
func (s *Shard) forget(item string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.held[item]
	delete(s.held, item)
	return ok
}

// renewMember renews (or makes) this replica's member Lease; lapsed says
// the membership had expired before (or never was): items held before are
// held no more.
func (s *Shard) renewMember(ctx context.Context) (lapsed bool, err error) {
	key := client.ObjectKey{Namespace: s.Namespace, Name: s.memberName()}
	lease := &coordinationv1.Lease{}
	err = s.Client.Get(ctx, key, lease)
	now := metav1.NewMicroTime(s.now())
	switch {
	case apierrors.IsNotFound(err):
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: key.Name,
			Labels: map[string]string{LabelShard: s.Kind, LabelMember: s.Kind, v1alpha1.LabelManagedBy: v1alpha1.ManagedBy}},
			Spec: s.spec(now)}
		err = client.IgnoreAlreadyExists(s.Client.Create(ctx, lease))
	case err != nil:
		return false, err
	default:
		lease.Spec = s.spec(now)
		err = s.Client.Update(ctx, lease)
	}
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	lapsed = !s.live()
	s.renewed = now.Time
	return lapsed, nil
}

func (s *Shard) spec(now metav1.MicroTime) coordinationv1.LeaseSpec {
	return coordinationv1.LeaseSpec{HolderIdentity: ptr.To(s.Identity), LeaseDurationSeconds: ptr.To(int32(s.duration().Seconds())),
		AcquireTime: &now, RenewTime: &now}
}

// liveMembers names the replicas whose membership is live, as the cache
// has them (this one included).
func (s *Shard) liveMembers(ctx context.Context) (map[string]bool, error) {
	var list coordinationv1.LeaseList
	if err := s.Cache.List(ctx, &list, client.InNamespace(s.Namespace), client.MatchingLabels{LabelMember: s.Kind}); err != nil {
		return nil, err
	}
	live := map[string]bool{s.Identity: true}
	for i := range list.Items {
		if l := &list.Items[i]; !s.expired(l) {
			live[holder(l)] = true
		}
	}
	return live, nil
}

// expired reports whether l's holder stopped renewing it.
func (s *Shard) expired(l *coordinationv1.Lease) bool {
	if l.Spec.RenewTime == nil {
		return true
	}
	d := s.duration()
	if l.Spec.LeaseDurationSeconds != nil {
		d = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return !s.now().Before(l.Spec.RenewTime.Add(d))
}

// holder is who l names ("" for none).
func holder(l *coordinationv1.Lease) string { return ptr.Deref(l.Spec.HolderIdentity, "") }

// errLost is an item another replica holds now.
var errLost = errors.New("another replica holds it")

func isLost(err error) bool {
	return errors.Is(err, errLost) || apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err)
}

// adopt holds item if its Lease, read at the API server, names this
// replica.
func (s *Shard) adopt(ctx context.Context, item string) error {
	l := &coordinationv1.Lease{}
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.leaseName(item)}, l); err != nil {
		return client.IgnoreNotFound(err)
	}
	if holder(l) == s.Identity {
		s.mu.Lock()
		s.held[item] = true
		s.mu.Unlock()
	}
	return nil
}

// take makes or takes over item's Lease, l being what the cache has. A
// holder the cache shows dead is checked at the API server first: a cache
// behind could show a membership expired that was renewed since.
func (s *Shard) take(ctx context.Context, item string, l *coordinationv1.Lease) error {
	now := metav1.NewMicroTime(s.now())
	if l == nil {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.leaseName(item),
			Labels:      map[string]string{LabelShard: s.Kind, LabelItem: s.Kind, v1alpha1.LabelManagedBy: v1alpha1.ManagedBy},
			Annotations: map[string]string{annotationItem: item}},
			Spec: s.spec(now)}
		if err := s.Client.Create(ctx, l); err != nil {
			return err
		}
	} else {
		if was := holder(l); was != "" {
			member := &coordinationv1.Lease{}
			err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.memberOf(was)}, member)
			switch {
			case err == nil && !s.expired(member):
				return fmt.Errorf("taking %s: %w", item, errLost)
			case err != nil && !apierrors.IsNotFound(err):
				return err
			}
		}
		l = l.DeepCopy()
		transitions := ptr.Deref(l.Spec.LeaseTransitions, 0) + 1
		l.Spec = s.spec(now)
		l.Spec.LeaseTransitions = &transitions
		// The cache's resourceVersion: a replica that took it meanwhile
		// makes this a conflict.
		if err := s.Client.Update(ctx, l); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.held[item] = true
	s.mu.Unlock()
	return nil
}
