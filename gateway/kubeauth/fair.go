package kubeauth

import (
	"container/list"
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/sftpgate/sftpgate/internal/ratelimit"
)

// fairCache is a cache whose entries each belong to a party (a
// ServiceAccount's namespace): it holds at most size entries, the least
// recently used going first, and at most perParty of one party, whose own
// least recently used go first. So one party cannot push the others out.
type fairCache[K comparable, V any] struct {
	size, perParty int
	clock          clock.Clock

	mu      sync.Mutex
	entries map[K]*list.Element // of all, most recently used first
	all     *list.List
	parties map[string]*list.List // of each party, most recently used first
}

type cached[K comparable, V any] struct {
	key     K
	party   string
	value   V
	expires time.Time
	// inParty is the entry's element in its party's list.
	inParty *list.Element
}

func newFairCache[K comparable, V any](size, perParty int, clk clock.Clock) *fairCache[K, V] {
	return &fairCache[K, V]{size: size, perParty: perParty, clock: clk,
		entries: map[K]*list.Element{}, all: list.New(), parties: map[string]*list.List{}}
}

// Get returns key's value while it has not expired.
func (c *fairCache[K, V]) Get(key K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var zero V
	e, ok := c.entries[key]
	if !ok {
		return zero, false
	}
	entry := e.Value.(*cached[K, V]) //nolint:forcetypeassert // the list holds only these
	if !c.clock.Now().Before(entry.expires) {
		c.remove(e)
		return zero, false
	}
	c.all.MoveToFront(e)
	c.parties[entry.party].MoveToFront(entry.inParty)
	return entry.value, true
}

// Add keeps value for key, of party, for ttl.
func (c *fairCache[K, V]) Add(key K, party string, value V, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		c.remove(e)
	}
	mine := c.parties[party]
	if mine == nil {
		mine = list.New()
		c.parties[party] = mine
	}
	if mine.Len() >= c.perParty {
		c.remove(c.entries[mine.Back().Value.(K)]) //nolint:forcetypeassert // party lists hold keys
	} else if c.all.Len() >= c.size {
		c.remove(c.all.Back())
	}
	entry := &cached[K, V]{key: key, party: party, value: value, expires: c.clock.Now().Add(ttl)}
	entry.inParty = c.parties[party].PushFront(key)
	c.entries[key] = c.all.PushFront(entry)
}

// Len is the number of entries held, expired ones included.
func (c *fairCache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.all.Len()
}

// remove drops e; c.mu is held.
func (c *fairCache[K, V]) remove(e *list.Element) {
	entry := e.Value.(*cached[K, V]) //nolint:forcetypeassert // the list holds only these
	c.all.Remove(e)
	delete(c.entries, entry.key)
	mine := c.parties[entry.party]
	mine.Remove(entry.inParty)
	if mine.Len() == 0 {
		delete(c.parties, entry.party)
	}
}

// party is one side of a review's cost: a client address, a
// ServiceAccount's namespace, a ServiceAccount. Each has its own rate and
// its own reviews in flight, so that no one of them can spend the
// replica's.
type share struct {
	rate     *ratelimit.Keyed[string]
	inFlight *ratelimit.InFlight[string]
}

func newShare(perSecond float64, burst, inFlight, maxKeys int) share {
	return share{rate: ratelimit.New[string](perSecond, burst).WithMaxKeys(maxKeys), inFlight: ratelimit.NewInFlight[string](inFlight)}
}

// who names one party of a review: which bound, and whose share of it.
type who struct {
	share *share
	key   string
}

// admit lets a review in if each of its parties is within its rate and
// its reviews in flight, and the replica within its own: then release
// counts it out. Past a party's bound it answers ErrBusy at once; for a
// slot of the replica's it waits up to reviewWait.
func (r *Reviewer) admit(ctx context.Context, parties ...who) (release func(), err error) {
	for _, p := range parties {
		if ok, _ := p.share.rate.Allow(p.key); !ok {
			return nil, ErrBusy
		}
	}
	entered := 0
	leave := func() {
		for _, p := range parties[:entered] {
			p.share.inFlight.Leave(p.key)
		}
	}
	for _, p := range parties {
		if !p.share.inFlight.Enter(p.key) {
			leave()
			return nil, ErrBusy
		}
		entered++
	}
	if !r.reviews.Allow() {
		leave()
		return nil, ErrBusy
	}
	slot, err := r.slot(ctx)
	if err != nil {
		leave()
		return nil, err
	}
	return func() { slot(); leave() }, nil
}
