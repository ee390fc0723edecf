// Package shard divides a component's work among its replicas through
// Kubernetes Leases, and nothing else. Items of work (watches, transfers)
// fall into a fixed number of buckets by a hash of their key, as
// Knative's reconciler buckets do; each replica renews a member Lease, and
// each bucket with work has a Lease naming the replica doing its items,
// written only when the bucket changes hands. So the Leases are bounded by
// the buckets, not the items, and renewing costs one write per replica,
// however many items. A replica holds its buckets while its membership is
// live (renewed within the lease duration, without a lapse since it took
// them). It takes free buckets while it holds fewer than its share (the
// buckets with work over the live members, rounded up), takes a bucket
// whose holder's membership has expired (read at the API server, not
// from a cache), and gives buckets back when it holds more than its share
// (after a replica joined). A replica that dies leaves its membership to
// expire: the others take its buckets within one lease duration.
package shard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
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
	// LabelBucket marks a bucket's Lease with the kind of work.
	LabelBucket = "sftpgate.dev/shard-bucket"
	// labelItem marked the Lease of one item, before items fell into
	// buckets: such Leases are removed.
	labelItem = "sftpgate.dev/shard-item"
	// LabelMember marks a replica's member Lease with the kind of work.
	LabelMember = "sftpgate.dev/shard-member"
)

// DefaultBuckets is how many buckets items fall into: enough for three
// replicas to share them within a few percent, few enough that their
// Leases cost nothing.
const DefaultBuckets = 64

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
	// Buckets is how many buckets items fall into (DefaultBuckets when
	// zero); every replica of a kind must count the same.
	Buckets int
	Clock   clock.Clock

	// renewing serialises renewals: Renew's ticker and Sync's own.
	renewing sync.Mutex
	mu       sync.Mutex
	// held is the buckets whose Lease names this replica, taken while its
	// membership was live; renewed is when it last renewed its membership.
	held    map[string]bool
	renewed time.Time
	// given is the items Sync last said to keep; leaving the buckets it
	// gave up, given back by Settle once their items' work stopped.
	given   map[string]bool
	leaving []string
}

func (s *Shard) buckets() int { return cmp.Or(s.Buckets, DefaultBuckets) }

// Bucket names the bucket item falls into, and how many there are ("7-of-
// 64"), so that replicas that count buckets otherwise never share one.
func (s *Shard) Bucket(item string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(item))
	n := uint32(s.buckets()) //nolint:gosec // a small positive count
	return fmt.Sprintf("%d-of-%d", h.Sum32()%n, n)
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

// Holds reports whether this replica holds item now: its bucket's Lease
// names this replica and the membership was renewed within the lease
// duration. Work checks it before each step it must not do twice at once,
// so that a replica cut off from the API server stops before another
// takes its items.
func (s *Shard) Holds(item string) bool {
	b := s.Bucket(item)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[b] && s.live()
}

// live says this replica's membership holds; call with mu held.
func (s *Shard) live() bool { return s.now().Sub(s.renewed) < s.duration() }

// Sync renews this replica's membership, takes free buckets of those items
// (the work there is now) fall into, up to its share, and says which items
// to keep doing (keep: those of its buckets) and which to stop (drop:
// kept before, now in a bucket given back or taken by another, or gone).
// Stop the dropped items' work, then Settle.
func (s *Shard) Sync(ctx context.Context, items []string) (keep, drop []string, err error) {
	of := map[string][]string{}
	for _, item := range items {
		b := s.Bucket(item)
		of[b] = append(of[b], item)
	}
	buckets := slices.Sorted(maps.Keys(of))
	kept, gone, err := s.syncBuckets(ctx, buckets)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leaving = append(s.leaving, gone...)
	if err != nil && kept == nil {
		return nil, nil, err
	}
	given := map[string]bool{}
	for _, b := range kept {
		for _, item := range of[b] {
			given[item] = true
			keep = append(keep, item)
		}
	}
	for item := range s.given {
		if !given[item] {
			drop = append(drop, item)
		}
	}
	s.given = given
	slices.Sort(keep)
	slices.Sort(drop)
	return keep, drop, err
}

// Settle gives back the buckets Sync let go, once the work of the items it
// dropped has stopped, for another replica to take at once.
func (s *Shard) Settle(ctx context.Context) error {
	s.mu.Lock()
	leaving := s.leaving
	s.leaving = nil
	s.mu.Unlock()
	var errs []error
	for _, b := range leaving {
		s.mu.Lock()
		again := s.held[b]
		s.mu.Unlock()
		if !again {
			errs = append(errs, s.release(ctx, b))
		}
	}
	return errors.Join(errs...)
}

// syncBuckets takes free buckets of buckets (those with work) up to this
// replica's share, and says which to keep and which to give back (over
// its share, taken by another, or without work).
func (s *Shard) syncBuckets(ctx context.Context, buckets []string) (keep, drop []string, err error) {
	if err := s.renewIfDue(ctx); err != nil {
		return nil, nil, err
	}
	members, err := s.liveMembers(ctx)
	if err != nil {
		return nil, nil, err
	}
	share := (len(buckets) + len(members) - 1) / max(len(members), 1)
	leases, err := s.list(ctx, LabelBucket)
	if err != nil {
		return nil, nil, err
	}
	byBucket := map[string]*coordinationv1.Lease{}
	for i := range leases {
		l := &leases[i]
		byBucket[l.Annotations[annotationBucket]] = l
	}
	exists := map[string]bool{}
	for _, bucket := range buckets {
		exists[bucket] = true
	}

	s.mu.Lock()
	var named []string
	for bucket, l := range byBucket {
		if exists[bucket] && holder(l) == s.Identity && !s.held[bucket] {
			named = append(named, bucket)
		}
	}
	s.mu.Unlock()
	// Buckets whose Lease names this replica, but that it does not hold (a
	// restart's, or after a lapse), are its own if the API server says
	// so: the cache may not have seen another take them.
	for _, bucket := range named {
		if err := s.adopt(ctx, bucket); err != nil {
			return nil, drop, err
		}
	}
	s.mu.Lock()
	mine := make([]string, 0, len(s.held))
	for bucket := range s.held {
		mine = append(mine, bucket)
	}
	s.mu.Unlock()
	slices.Sort(mine)

	for _, bucket := range mine {
		l := byBucket[bucket]
		switch {
		case !exists[bucket]:
			s.forget(bucket)
			drop = append(drop, bucket)
		case l != nil && holder(l) != s.Identity:
			// Taken by another (a cache that has not seen this
			// replica's take yet has no Lease at all).
			s.forget(bucket)
			drop = append(drop, bucket)
		default:
			keep = append(keep, bucket)
		}
	}
	// Over its share (a replica joined): give some back.
	if over := len(keep) - share; over > 0 {
		for _, bucket := range keep[len(keep)-over:] {
			s.forget(bucket)
			drop = append(drop, bucket)
		}
		keep = keep[:len(keep)-over]
	}
	// Under it: take free buckets, in an order of this replica's own so that
	// replicas starting together do not all go for the same ones.
	free := make([]string, 0)
	for _, bucket := range buckets {
		if !slices.Contains(keep, bucket) && !slices.Contains(drop, bucket) && (byBucket[bucket] == nil || !members[holder(byBucket[bucket])]) {
			free = append(free, bucket)
		}
	}
	rand.Shuffle(len(free), func(i, j int) { free[i], free[j] = free[j], free[i] }) //nolint:gosec // spreading replicas, not a secret
	for _, bucket := range free {
		if len(keep) >= share {
			break
		}
		switch err := s.take(ctx, bucket, byBucket[bucket]); {
		case err == nil:
			keep = append(keep, bucket)
		case isLost(err):
		default:
			return keep, drop, err
		}
	}
	slices.Sort(keep)
	return keep, drop, nil
}

// release deletes bucket's Lease if it still names this replica, which
// no longer holds it.
func (s *Shard) release(ctx context.Context, bucket string) error {
	lease := &coordinationv1.Lease{}
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.leaseName(bucket)}, lease); err != nil {
		return client.IgnoreNotFound(err)
	}
	if holder(lease) != s.Identity {
		return nil
	}
	return client.IgnoreNotFound(s.Client.Delete(ctx, lease, client.Preconditions{ResourceVersion: &lease.ResourceVersion}))
}

// Orphans are the items of also (say, those with a state stored) that
// are gone (not in exists) and whose bucket no other live replica holds:
// what an item deleted while a replica that died held it, or after it was
// given back, left. A live holder cleans up after its own items.
func (s *Shard) Orphans(ctx context.Context, exists map[string]bool, also []string) ([]string, error) {
	members, err := s.liveMembers(ctx)
	if err != nil {
		return nil, err
	}
	leases, err := s.list(ctx, LabelBucket)
	if err != nil {
		return nil, err
	}
	others := map[string]bool{}
	for i := range leases {
		if h := holder(&leases[i]); h != s.Identity && members[h] {
			others[leases[i].Annotations[annotationBucket]] = true
		}
	}
	var orphans []string
	for _, item := range also {
		if !exists[item] && !others[s.Bucket(item)] {
			orphans = append(orphans, item)
		}
	}
	return orphans, nil
}

// Tidy removes the Leases no live replica needs: a bucket's that has no
// work (not in busy) and whose holder is not live, and those of single
// items, which earlier versions wrote.
func (s *Shard) Tidy(ctx context.Context, busy map[string]bool) error {
	members, err := s.liveMembers(ctx)
	if err != nil {
		return err
	}
	buckets, err := s.list(ctx, LabelBucket)
	if err != nil {
		return err
	}
	items, err := s.list(ctx, labelItem)
	if err != nil {
		return err
	}
	var errs []error
	for i := range buckets {
		if l := &buckets[i]; !busy[l.Annotations[annotationBucket]] && !members[holder(l)] {
			errs = append(errs, client.IgnoreNotFound(s.Client.Delete(ctx, l, client.Preconditions{ResourceVersion: &l.ResourceVersion})))
		}
	}
	for i := range items {
		errs = append(errs, client.IgnoreNotFound(s.Client.Delete(ctx, &items[i])))
	}
	return errors.Join(errs...)
}

// list is the Leases of this kind labelled label, as the cache has them.
func (s *Shard) list(ctx context.Context, label string) ([]coordinationv1.Lease, error) {
	var leases coordinationv1.LeaseList
	err := s.Cache.List(ctx, &leases, client.InNamespace(s.Namespace), client.MatchingLabels{label: s.Kind})
	return leases.Items, err
}

// Leave gives back every Lease this replica holds and its membership, for
// a replica stopping on purpose: its items move at once, not after a lease
// duration.
func (s *Shard) Leave(ctx context.Context) error {
	s.mu.Lock()
	buckets := slices.Collect(maps.Keys(s.held))
	s.held, s.given = map[string]bool{}, nil
	s.mu.Unlock()
	var errs []error
	for _, b := range buckets {
		errs = append(errs, s.release(ctx, b))
	}
	member := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.memberName()}}
	errs = append(errs, client.IgnoreNotFound(s.Client.Delete(ctx, member)))
	return errors.Join(errs...)
}

// annotationBucket names a bucket on its Lease; annotationBuckets says on
// a member Lease how many buckets the replica counts (a replica of an
// earlier version, which says nothing, counts none: nothing moves until it
// is gone).
const (
	annotationBucket  = "sftpgate.dev/shard-bucket"
	annotationBuckets = "sftpgate.dev/shard-buckets"
)

// errBucketsDiffer is live replicas that count buckets otherwise.
var errBucketsDiffer = errors.New("the replicas count buckets differently (--lease-buckets); none takes work until they agree")

func (s *Shard) leaseName(bucket string) string  { return s.Kind + "-bucket-" + bucket }
func (s *Shard) memberName() string              { return s.memberOf(s.Identity) }
func (s *Shard) memberOf(identity string) string { return s.Kind + "-member-" + identity }

// forget drops bucket from what this replica holds.
func (s *Shard) forget(bucket string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.held, bucket)
}

// Renew renews this replica's membership now. Run it every third of the
// lease duration apart from Sync, whose work (stopping tasks that store
// what they hold) may take longer: a membership renewed late lapses, and
// the replica drops all it holds.
func (s *Shard) Renew(ctx context.Context) error {
	s.renewing.Lock()
	defer s.renewing.Unlock()
	return s.renew(ctx)
}

func (s *Shard) renew(ctx context.Context) error {
	lapsed, err := s.renewMember(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil || lapsed {
		// After a lapse another replica may have taken any bucket: hold
		// none until they are taken again (its own adopted by Sync).
		s.held = map[string]bool{}
	}
	return nil
}

// renewIfDue renews the membership if a third of the lease duration
// passed since it was last renewed (or it never was).
func (s *Shard) renewIfDue(ctx context.Context) error {
	s.renewing.Lock()
	defer s.renewing.Unlock()
	s.mu.Lock()
	due := s.held == nil || s.now().Sub(s.renewed) >= s.duration()/3
	s.mu.Unlock()
	if !due {
		return nil
	}
	return s.renew(ctx)
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
			Labels:      map[string]string{LabelShard: s.Kind, LabelMember: s.Kind, v1alpha1.LabelManagedBy: v1alpha1.ManagedBy},
			Annotations: map[string]string{annotationBuckets: strconv.Itoa(s.buckets())}},
			Spec: s.spec(now)}
		err = client.IgnoreAlreadyExists(s.Client.Create(ctx, lease))
	case err != nil:
		return false, err
	default:
		lease.Spec = s.spec(now)
		metav1.SetMetaDataAnnotation(&lease.ObjectMeta, annotationBuckets, strconv.Itoa(s.buckets()))
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
	mine := strconv.Itoa(s.buckets())
	for i := range list.Items {
		l := &list.Items[i]
		if s.expired(l) {
			continue
		}
		if theirs := l.Annotations[annotationBuckets]; theirs != mine {
			// Items would fall into other buckets there: both could run
			// one. Nothing moves until the replicas agree.
			return nil, fmt.Errorf("%w: %s here, %q at %s", errBucketsDiffer, mine, theirs, holder(l))
		}
		live[holder(l)] = true
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

// adopt holds bucket if its Lease, read at the API server, names this
// replica.
func (s *Shard) adopt(ctx context.Context, bucket string) error {
	l := &coordinationv1.Lease{}
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.leaseName(bucket)}, l); err != nil {
		return client.IgnoreNotFound(err)
	}
	if holder(l) == s.Identity {
		s.mu.Lock()
		s.held[bucket] = true
		s.mu.Unlock()
	}
	return nil
}

// take makes or takes over bucket's Lease, l being what the cache has. A
// holder the cache shows dead is checked at the API server first: a cache
// behind could show a membership expired that was renewed since.
func (s *Shard) take(ctx context.Context, bucket string, l *coordinationv1.Lease) error {
	now := metav1.NewMicroTime(s.now())
	if l == nil {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.leaseName(bucket),
			Labels:      map[string]string{LabelShard: s.Kind, LabelBucket: s.Kind, v1alpha1.LabelManagedBy: v1alpha1.ManagedBy},
			Annotations: map[string]string{annotationBucket: bucket}},
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
				return fmt.Errorf("taking %s: %w", bucket, errLost)
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
	s.held[bucket] = true
	s.mu.Unlock()
	return nil
}
