// Package shard divides a component's work among its replicas through
// Kubernetes Leases, and nothing else. Items of work (watches, transfers)
// fall into a fixed number of buckets by a hash of their key, as
// Knative's reconciler buckets do; each replica renews one member Lease
// for every kind of work (Membership), and each bucket with work has a
// Lease naming the replica doing its items, written only when the bucket
// changes hands. So the Leases are bounded by the buckets, not the items,
// and renewing costs one write per replica, however many items and kinds.
// A replica holds its buckets while its membership is live (renewed
// within the lease duration, without a lapse since it took them).
//
// Buckets move as little as they can. A replica takes nothing until its
// membership has settled (SettleTime after it began), so that replicas
// started together count each other; then, while it holds fewer than its
// share (the buckets with work over the live members, rounded up), it
// takes the buckets of replicas that died since (their membership read at
// the API server, not from a cache) at its next sync, all at once. While
// no member joined within the settle time, it also takes buckets given
// back (by a replica that left, or was over its share) at once, and free
// ones (never held, or held by replicas dead before it settled) at most a
// quarter of its share per sync; and gives buckets back over its share
// (after a replica joined) as gradually, once the joiner settled. A
// replica that dies leaves its membership to expire: the others take its
// buckets within the lease duration and a sync.
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
	// LabelMember marks a replica's member Lease: "all" for the one of
	// every kind; earlier versions' had one per kind, with its name.
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
	// Membership is the replica's, shared by its kinds of work, and renewed
	// by whoever runs it (Membership.Run); nil makes one of the Shard's
	// own, renewed by Renew and Sync, and removed by Leave.
	Membership *Membership
	// LeaseDuration is DefaultLeaseDuration when zero.
	LeaseDuration time.Duration
	// SettleTime is how long a membership must have lasted before the
	// replica takes buckets (its own), or takes free ones and gives any
	// back (every member's): the lease duration when zero.
	SettleTime time.Duration
	// Buckets is how many buckets items fall into (DefaultBuckets when
	// zero); every replica of a kind must count the same.
	Buckets int
	Clock   clock.Clock

	once sync.Once
	own  bool
	mu   sync.Mutex
	// held is the buckets whose Lease names this replica, taken while its
	// membership was live, in the membership's epoch.
	held  map[string]bool
	epoch uint64
	// given is the items Sync last said to keep; leaving the buckets it
	// gave up, given back by Settle once their items' work stopped.
	given   map[string]bool
	leaving []string
	// freeSince is when each bucket no live replica holds was first seen
	// so by a sync of this replica settled; only Sync reads and writes it.
	freeSince map[string]time.Time
}

// members is the replica's membership: Membership, or the Shard's own.
func (s *Shard) members() *Membership {
	s.once.Do(func() {
		if s.Membership == nil {
			s.own = true
			s.Membership = &Membership{Client: s.Client, Namespace: s.Namespace, Identity: s.Identity,
				LeaseDuration: s.LeaseDuration, Buckets: s.buckets(), Clock: s.Clock}
		}
	})
	return s.Membership
}

func (s *Shard) settleTime() time.Duration { return cmp.Or(s.SettleTime, s.duration()) }

// current says whether the membership is live, and forgets the buckets
// held in an earlier one (after a lapse another replica may have taken
// any); call with mu held.
func (s *Shard) current() bool {
	live, _, epoch := s.members().state()
	if s.held == nil || epoch != s.epoch {
		s.held, s.epoch = map[string]bool{}, epoch
	}
	return live
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
	return s.current() && s.held[b]
}

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
	keep = make([]string, 0, len(kept))
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

// ErrNotMember is a sync while this replica's membership is not live: it
// takes nothing, and what it held waits for the membership to be renewed.
var ErrNotMember = errors.New("this replica's membership is not live: not renewed within the lease duration")

// takeFraction bounds the free buckets a replica takes in one sync, and
// those it gives back: a quarter of its share (at least one), so that a
// replica that joins late, or one the others have not seen yet, moves few.
const takeFraction = 4

// syncBuckets takes buckets of buckets (those with work) up to this
// replica's share, and says which to keep and which to give back (over
// its share, taken by another, or without work).
func (s *Shard) syncBuckets(ctx context.Context, buckets []string) (keep, drop []string, err error) {
	if s.members(); s.own {
		if err := s.Membership.renewIfDue(ctx); err != nil {
			return nil, nil, err
		}
	}
	s.mu.Lock()
	live := s.current()
	s.mu.Unlock()
	if !live {
		s.freeSince = nil
		return nil, nil, ErrNotMember
	}
	v, err := s.view(ctx)
	if err != nil {
		return nil, nil, err
	}
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
	// so: the cache may not have seen another take them. Settled or not:
	// its work goes on where it was.
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

	keep = make([]string, 0, len(mine))
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
	if v.disagree != nil {
		// Replicas that would divide the items otherwise: nothing moves
		// until they are gone.
		s.freeSince = nil
		return keep, drop, v.disagree
	}
	share := (len(buckets) + len(v.live) - 1) / len(v.live)
	step := max(1, share/takeFraction)
	// Over its share (a replica joined): give some back, once the joiner
	// settled and can take them, a step at a time.
	if over := len(keep) - share; over > 0 && v.stable {
		n := min(over, step)
		for _, bucket := range keep[len(keep)-n:] {
			s.forget(bucket)
			drop = append(drop, bucket)
		}
		keep = keep[:len(keep)-n]
	}
	if !v.settled {
		// Free work is timed anew once it settled.
		s.freeSince = nil
		return keep, drop, nil
	}
	// Under it: take the buckets of replicas that died since this one
	// settled, and those given back (while no member is new), all at
	// once; then free ones, a step at a time (while no member is new), in
	// an order of this replica's own so that replicas do not all go for
	// the same ones.
	held := map[string]bool{}
	for _, bucket := range keep {
		held[bucket] = true
	}
	for _, bucket := range drop {
		held[bucket] = true
	}
	// A bucket free for longer than twice the settle time (overdue) is
	// taken, a step at a time, even while a member is new and past this
	// replica's share: a member whose membership keeps lapsing and coming
	// back counts in the share but takes nothing, and would otherwise
	// leave it to no one. Once the members are stable, the shares even
	// out again.
	now, since := s.now(), s.freeSince
	s.freeSince = map[string]time.Time{}
	var vacated, free, overdue []string
	for _, bucket := range buckets {
		l := byBucket[bucket]
		if held[bucket] || l != nil && v.live[holder(l)] {
			continue
		}
		s.freeSince[bucket] = now
		if at, ok := since[bucket]; ok {
			s.freeSince[bucket] = at
		}
		switch {
		case l != nil && v.diedAfterSettling(holder(l)), l != nil && holder(l) == "" && v.stable:
			vacated = append(vacated, bucket)
		case v.stable:
			free = append(free, bucket)
		case now.Sub(s.freeSince[bucket]) >= 2*s.settleTime():
			overdue = append(overdue, bucket)
		}
	}
	shuffle := func(b []string) {
		rand.Shuffle(len(b), func(i, j int) { b[i], b[j] = b[j], b[i] }) //nolint:gosec // spreading replicas, not a secret
	}
	shuffle(vacated)
	shuffle(free)
	shuffle(overdue)
	taken := 0
	for i, bucket := range slices.Concat(vacated, free, overdue) {
		isFree, isOverdue := i >= len(vacated), i >= len(vacated)+len(free)
		if len(keep) >= share && !isOverdue || isFree && taken >= step {
			continue
		}
		switch err := s.take(ctx, bucket, byBucket[bucket]); {
		case err == nil:
			keep = append(keep, bucket)
			if isFree {
				taken++
			}
		case isLost(err):
		default:
			return keep, drop, err
		}
	}
	slices.Sort(keep)
	return keep, drop, nil
}

// view is the members as a sync sees them.
type view struct {
	// live is the replicas whose membership is live, this one included.
	live map[string]bool
	// settled: this replica's membership began a settle time ago or more,
	// at settledAt; stable: every live member's did too.
	settled, stable bool
	settledAt       time.Time
	// expired is when each membership that was not renewed expired, by
	// replica.
	expired map[string]time.Time
	// disagree is live members that would divide the items otherwise
	// (they count buckets otherwise, or are of an earlier version).
	disagree error
}

// diedAfterSettling says who's membership expired after this replica
// settled: its buckets are taken at once, a failover, not a start.
func (v *view) diedAfterSettling(who string) bool {
	at, ok := v.expired[who]
	return ok && !at.Before(v.settledAt)
}

// view reads the member Leases, as the cache has them.
func (s *Shard) view(ctx context.Context) (*view, error) {
	var list coordinationv1.LeaseList
	if err := s.Cache.List(ctx, &list, client.InNamespace(s.Namespace), client.HasLabels{LabelMember}); err != nil {
		return nil, err
	}
	now, settle := s.now(), s.settleTime()
	_, since, _ := s.members().state()
	v := &view{live: map[string]bool{s.Identity: true}, expired: map[string]time.Time{}, settledAt: since.Add(settle)}
	v.settled = !now.Before(v.settledAt)
	v.stable = v.settled
	mine := strconv.Itoa(s.buckets())
	for i := range list.Items {
		l := &list.Items[i]
		who := holder(l)
		switch {
		case who == "" || who == s.Identity:
			// This replica's own (it knows its state better than the
			// cache), or one naming none.
			continue
		case s.expired(l):
			v.expired[who] = s.expiry(l)
			continue
		case l.Labels[LabelMember] != memberShared:
			// Its replicas do not see this version's members: both would
			// run the same items.
			v.disagree = fmt.Errorf("%w: %s", errEarlierVersion, who)
		case l.Annotations[annotationBuckets] != mine:
			// Items would fall into other buckets there: both could run
			// one.
			v.disagree = fmt.Errorf("%w: %s here, %q at %s", errBucketsDiffer, mine, l.Annotations[annotationBuckets], who)
		}
		v.live[who] = true
		if a := l.Spec.AcquireTime; a == nil || now.Before(a.Add(settle)) {
			v.stable = false
		}
	}
	return v, nil
}

// liveMembers names the replicas whose membership is live, as the cache
// has them (this one included); it fails while replicas disagree.
func (s *Shard) liveMembers(ctx context.Context) (map[string]bool, error) {
	v, err := s.view(ctx)
	if err != nil {
		return nil, err
	}
	return v.live, v.disagree
}

// release gives bucket back: its Lease, if it still names this replica,
// names none, for another to take at once.
func (s *Shard) release(ctx context.Context, bucket string) error {
	lease := &coordinationv1.Lease{}
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.leaseName(bucket)}, lease); err != nil {
		return client.IgnoreNotFound(err)
	}
	if holder(lease) != s.Identity {
		return nil
	}
	lease.Spec.HolderIdentity = nil
	// On the version read: one that took it meanwhile keeps it.
	if err := s.Client.Update(ctx, lease); !apierrors.IsConflict(err) {
		return client.IgnoreNotFound(err)
	}
	return nil
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
// work (not in busy) and whose holder is not live; a member's expired a
// lease duration ago or more (a replica that died: one that comes back
// makes it again); and those of single items, which earlier versions
// wrote.
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
	var memberLeases coordinationv1.LeaseList
	if err := s.Cache.List(ctx, &memberLeases, client.InNamespace(s.Namespace), client.HasLabels{LabelMember}); err != nil {
		return err
	}
	var errs []error
	remove := func(l *coordinationv1.Lease) {
		// Unless renewed (or taken) since the cache saw it.
		errs = append(errs, client.IgnoreNotFound(s.Client.Delete(ctx, l, client.Preconditions{ResourceVersion: &l.ResourceVersion})))
	}
	for i := range buckets {
		if l := &buckets[i]; !busy[l.Annotations[annotationBucket]] && !members[holder(l)] {
			remove(l)
		}
	}
	for i := range memberLeases.Items {
		if l := &memberLeases.Items[i]; !s.now().Before(s.expiry(l).Add(s.duration())) {
			remove(l)
		}
	}
	for i := range items {
		errs = append(errs, client.IgnoreNotFound(s.Client.Delete(ctx, &items[i])))
	}
	for i, err := range errs {
		if apierrors.IsConflict(err) {
			errs[i] = nil
		}
	}
	return errors.Join(errs...)
}

// list is the Leases of this kind labelled label, as the cache has them.
func (s *Shard) list(ctx context.Context, label string) ([]coordinationv1.Lease, error) {
	var leases coordinationv1.LeaseList
	err := s.Cache.List(ctx, &leases, client.InNamespace(s.Namespace), client.MatchingLabels{label: s.Kind})
	return leases.Items, err
}

// Leave gives back every bucket this replica holds, and its membership if
// it is the Shard's own, for a replica stopping on purpose: its items move
// at once, not after a lease duration. A shared membership is left by
// whoever runs it, once every kind left.
func (s *Shard) Leave(ctx context.Context) error {
	s.mu.Lock()
	buckets := slices.Collect(maps.Keys(s.held))
	s.held, s.given = map[string]bool{}, nil
	s.mu.Unlock()
	var errs []error
	for _, b := range buckets {
		errs = append(errs, s.release(ctx, b))
	}
	if m := s.members(); s.own {
		errs = append(errs, m.Leave(ctx))
	}
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

// errBucketsDiffer is live replicas that count buckets otherwise;
// errEarlierVersion is a live replica of a version with a member Lease
// per kind, which does not see this version's.
var (
	errBucketsDiffer  = errors.New("the replicas count buckets differently (--lease-buckets); none takes work until they agree")
	errEarlierVersion = errors.New("a replica of an earlier version is live; none takes work until it is gone")
)

func (s *Shard) leaseName(bucket string) string { return s.Kind + "-bucket-" + bucket }

// forget drops bucket from what this replica holds.
func (s *Shard) forget(bucket string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.held, bucket)
}

// Renew renews this replica's membership now, if it is the Shard's own
// (a shared one is renewed by Membership.Run). Run it every third of the
// lease duration apart from Sync, whose work (stopping tasks that store
// what they hold) may take longer: a membership renewed late lapses.
func (s *Shard) Renew(ctx context.Context) error {
	if m := s.members(); s.own {
		return m.Renew(ctx)
	}
	return nil
}

// spec is what a bucket's Lease says: who holds it, since when.
func (s *Shard) spec(now metav1.MicroTime) coordinationv1.LeaseSpec {
	return coordinationv1.LeaseSpec{HolderIdentity: ptr.To(s.Identity), LeaseDurationSeconds: ptr.To(int32(s.duration().Seconds())),
		AcquireTime: &now, RenewTime: &now}
}

// expiry is when l's holder's hold ends unless renewed.
func (s *Shard) expiry(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime == nil {
		return time.Time{}
	}
	d := s.duration()
	if l.Spec.LeaseDurationSeconds != nil {
		d = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return l.Spec.RenewTime.Add(d)
}

// expired reports whether l's holder stopped renewing it.
func (s *Shard) expired(l *coordinationv1.Lease) bool { return !s.now().Before(s.expiry(l)) }

// holder is who l names ("" for none).
func holder(l *coordinationv1.Lease) string { return ptr.Deref(l.Spec.HolderIdentity, "") }

// errLost is an item another replica holds now.
var errLost = errors.New("another replica holds it")

func isLost(err error) bool {
	return errors.Is(err, errLost) || apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err)
}

// adopt holds bucket if its Lease, read at the API server, names this
// replica: renewed on the resourceVersion read, so that a replica that
// took it over since (its update made on the same version) leaves it
// to one of the two, never both.
func (s *Shard) adopt(ctx context.Context, bucket string) error {
	l := &coordinationv1.Lease{}
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.leaseName(bucket)}, l); err != nil {
		return client.IgnoreNotFound(err)
	}
	if holder(l) != s.Identity {
		return nil
	}
	now := metav1.NewMicroTime(s.now())
	l.Spec.RenewTime = &now
	if err := s.Client.Update(ctx, l); err != nil {
		if isLost(err) {
			return nil
		}
		return err
	}
	s.mu.Lock()
	s.held[bucket] = true
	s.mu.Unlock()
	return nil
}

// alive says whether who's membership is live at the API server: its
// member Lease, or one of an earlier version's for this kind.
func (s *Shard) alive(ctx context.Context, who string) (bool, error) {
	for _, name := range []string{memberName(who), s.Kind + "-member-" + who} {
		member := &coordinationv1.Lease{}
		err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, member)
		switch {
		case err == nil:
			return !s.expired(member), nil
		case !apierrors.IsNotFound(err):
			return false, err
		}
	}
	return false, nil
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
			switch alive, err := s.alive(ctx, was); {
			case err != nil:
				return err
			case alive:
				return fmt.Errorf("taking %s: %w", bucket, errLost)
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
