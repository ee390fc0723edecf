// Package ratelimit holds a token bucket per key (an API key, a client
// address), in memory: limits are per replica.
package ratelimit

import (
	"math"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Keyed is a token bucket per key. A nil *Keyed allows everything.
type Keyed[K comparable] struct {
	limit rate.Limit
	burst int
	// maxKeys bounds the buckets held at once; 0 leaves it to the keys
	// (API keys, which must exist).
	maxKeys int

	mu      sync.Mutex
	buckets map[K]*rate.Limiter
	// sweepNext is the number of buckets at which to sweep next; swept,
	// when it last did.
	sweepNext int
	swept     time.Time
}

// New allows perSecond requests per key, burst at once; perSecond <= 0 is
// no limit (nil).
func New[K comparable](perSecond float64, burst int) *Keyed[K] {
	if perSecond <= 0 {
		return nil
	}
	return &Keyed[K]{limit: rate.Limit(perSecond), burst: max(burst, 1), buckets: map[K]*rate.Limiter{}, sweepNext: sweepAt}
}

// WithMaxKeys bounds the buckets held at once to n, for keys a client
// chooses (an address, an email): a new key that finds n buckets still
// refilling is refused, not given memory.
func (l *Keyed[K]) WithMaxKeys(n int) *Keyed[K] {
	if l != nil {
		l.maxKeys, l.sweepNext = n, min(l.sweepNext, n)
	}
	return l
}

// Allow takes a request from key's bucket. When the bucket is empty it
// takes nothing and says how long until it holds a request again.
func (l *Keyed[K]) Allow(key K) (ok bool, retryAfter time.Duration) {
	if l == nil {
		return true, 0
	}
	l.mu.Lock()
	b := l.bucket(key, time.Now())
	l.mu.Unlock()
	if b == nil {
		return false, time.Second
	}
	r := b.Reserve()
	delay := r.Delay()
	if delay == 0 {
		return true, 0
	}
	r.Cancel()
	return false, delay
}

// Reserve takes a request from key's bucket, now or when it holds one
// again, and says how long until then; false, taking nothing, when key
// has no bucket and there is no room for one.
func (l *Keyed[K]) Reserve(key K) (time.Duration, bool) {
	if l == nil {
		return 0, true
	}
	l.mu.Lock()
	b := l.bucket(key, time.Now())
	l.mu.Unlock()
	if b == nil {
		return 0, false
	}
	return b.Reserve().Delay(), true
}

// sweepAt is how many buckets may pile up before full ones are dropped.
const sweepAt = 1024

// bucket returns key's bucket, making it if there is room; nil if not.
// l.mu is held.
func (l *Keyed[K]) bucket(key K, now time.Time) *rate.Limiter {
	if b := l.buckets[key]; b != nil {
		return b
	}
	full := l.maxKeys > 0 && len(l.buckets) >= l.maxKeys
	// Sweeps cost a pass over every bucket: they come as the buckets
	// double, and when full, once a second at most.
	if len(l.buckets) >= l.sweepNext && (!full || now.Sub(l.swept) >= time.Second) {
		l.sweep(now)
	}
	if l.maxKeys > 0 && len(l.buckets) >= l.maxKeys {
		return nil
	}
	b := rate.NewLimiter(l.limit, l.burst)
	l.buckets[key] = b
	return b
}

// sweep drops the buckets that are full again: a new bucket starts full,
// so nothing is lost, and keys that are gone (or idle) take no memory.
// l.mu is held.
func (l *Keyed[K]) sweep(now time.Time) {
	for key, b := range l.buckets {
		if b.TokensAt(now) >= float64(l.burst) {
			delete(l.buckets, key)
		}
	}
	l.swept, l.sweepNext = now, max(sweepAt, 2*len(l.buckets))
	if l.maxKeys > 0 {
		l.sweepNext = min(l.sweepNext, l.maxKeys)
	}
}

// RetryAfter is the Retry-After header's value for a wait of d: whole
// seconds, rounded up (a client that waits that long is let in), at least
// one.
func RetryAfter(d time.Duration) string {
	return strconv.Itoa(int(max(math.Ceil(d.Seconds()), 1)))
}
