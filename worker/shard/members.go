package shard

import (
	"cmp"
	"context"
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

// memberPrefix starts the name of a replica's member Lease
// (worker-member-<replica>); the worker's service account owns it
// (config/rbac/worker/service_account.yaml).
const memberPrefix = "worker-member-"

// memberShared is LabelMember's value on a member Lease that serves every
// kind of work; earlier versions wrote one per kind, labelled with it.
const memberShared = "all"

// memberName is identity's member Lease.
func memberName(identity string) string { return memberPrefix + identity }

// Membership is one replica's member Lease, which says for every kind of
// work it runs (every Shard that shares it) that it is alive: renewed
// every third of the lease duration, from the version it last wrote, with
// no read first. Its AcquireTime is when the replica's membership began
// (after a lapse, anew): the others count it settled a settle time later.
type Membership struct {
	// Client writes the Lease at the API server.
	Client client.Client
	// Namespace holds the Lease; Identity is the replica's (its pod's
	// name).
	Namespace, Identity string
	// LeaseDuration is DefaultLeaseDuration when zero; Buckets is
	// DefaultBuckets when zero. Every Shard sharing the Membership counts
	// the same.
	LeaseDuration time.Duration
	Buckets       int
	Clock         clock.Clock

	// renewing serialises the writes.
	renewing sync.Mutex
	mu       sync.Mutex
	// last is the Lease as last written: the next renewal updates it.
	last *coordinationv1.Lease
	// renewed is when it was last renewed, since when the membership
	// began; epoch counts the memberships begun, so that a Shard drops
	// what it held before a lapse.
	renewed, since time.Time
	epoch          uint64
}

func (m *Membership) duration() time.Duration { return cmp.Or(m.LeaseDuration, DefaultLeaseDuration) }

func (m *Membership) now() time.Time {
	if m.Clock == nil {
		return time.Now()
	}
	return m.Clock.Now()
}

// liveAt says the membership holds at now; call with mu held.
func (m *Membership) liveAt(now time.Time) bool {
	return !m.renewed.IsZero() && now.Sub(m.renewed) < m.duration()
}

// state is whether the membership holds now, since when it has, and its
// epoch.
func (m *Membership) state() (live bool, since time.Time, epoch uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.liveAt(m.now()), m.since, m.epoch
}

// Live says whether the membership holds now: the replica counts in
// every kind's share of the work.
func (m *Membership) Live() bool {
	live, _, _ := m.state()
	return live
}

// Run renews the membership at once, then every third of the lease
// duration until ctx ends, whatever else the replica is doing (its caches
// syncing, its tasks stopping). Leave removes it once Run returned.
func (m *Membership) Run(ctx context.Context, onError func(error)) {
	tick := time.NewTicker(m.duration() / 3)
	defer tick.Stop()
	for {
		if err := m.Renew(ctx); err != nil && ctx.Err() == nil && onError != nil {
			onError(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Renew renews the membership now.
func (m *Membership) Renew(ctx context.Context) error {
	m.renewing.Lock()
	defer m.renewing.Unlock()
	return m.renew(ctx)
}

// renewIfDue renews the membership if a third of the lease duration
// passed since it was last renewed (or it never was).
func (m *Membership) renewIfDue(ctx context.Context) error {
	m.renewing.Lock()
	defer m.renewing.Unlock()
	m.mu.Lock()
	due := m.renewed.IsZero() || m.now().Sub(m.renewed) >= m.duration()/3
	m.mu.Unlock()
	if !due {
		return nil
	}
	return m.renew(ctx)
}

// renew writes the Lease; call with renewing held.
func (m *Membership) renew(ctx context.Context) error {
	now := m.now()
	m.mu.Lock()
	lapsed := !m.liveAt(now)
	since, last := m.since, m.last
	m.mu.Unlock()
	if lapsed {
		since = now
	}
	lease, err := m.write(ctx, last, now, since)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// Expired before, or while it was written (the others may have taken
	// its buckets meanwhile): a new membership, holding nothing of before.
	if lapsed || !m.liveAt(m.now()) {
		m.since = now
		m.epoch++
	}
	m.renewed, m.last = now, lease
	return nil
}

// write updates the Lease from last, as it was last written; it reads it
// first only when there is no last, or last is out of date (the Lease was
// removed, or written by another process of the same identity).
func (m *Membership) write(ctx context.Context, last *coordinationv1.Lease, now, since time.Time) (*coordinationv1.Lease, error) {
	if last != nil {
		l := last.DeepCopy()
		m.fill(l, now, since)
		err := m.Client.Update(ctx, l)
		if err == nil {
			return l, nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	key := client.ObjectKey{Namespace: m.Namespace, Name: memberName(m.Identity)}
	l := &coordinationv1.Lease{}
	err := m.Client.Get(ctx, key, l)
	switch {
	case apierrors.IsNotFound(err):
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		m.fill(l, now, since)
		err = m.Client.Create(ctx, l)
	case err == nil:
		m.fill(l, now, since)
		err = m.Client.Update(ctx, l)
	}
	if err != nil {
		return nil, err
	}
	return l, nil
}

// fill sets what a member Lease says: whose it is, how many buckets the
// replica counts, since when it is a member and when it renewed.
func (m *Membership) fill(l *coordinationv1.Lease, now, since time.Time) {
	l.Labels = map[string]string{LabelShard: memberShared, LabelMember: memberShared, v1alpha1.LabelManagedBy: v1alpha1.ManagedBy}
	metav1.SetMetaDataAnnotation(&l.ObjectMeta, annotationBuckets, strconv.Itoa(cmp.Or(m.Buckets, DefaultBuckets)))
	l.Spec.HolderIdentity = ptr.To(m.Identity)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(m.duration().Seconds()))
	l.Spec.AcquireTime, l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(since)), ptr.To(metav1.NewMicroTime(now))
}

// Leave removes the member Lease, for a replica stopping on purpose once
// every kind gave its buckets back (and Run returned): the others count
// it gone at once.
func (m *Membership) Leave(ctx context.Context) error {
	m.renewing.Lock()
	defer m.renewing.Unlock()
	m.mu.Lock()
	m.renewed, m.last = time.Time{}, nil
	m.mu.Unlock()
	member := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: memberName(m.Identity)}}
	return client.IgnoreNotFound(m.Client.Delete(ctx, member))
}
