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

	mu      sync.Mutex
	buckets map[K]*rate.Limiter
}

// New allows perSecond requests per key, burst at once; perSecond <= 0 is
// no limit (nil).
func New[K comparable](perSecond float64, burst int) *Keyed[K] {
	if perSecond <= 0 {
		return nil
	}
	return &Keyed[K]{limit: rate.Limit(perSecond), burst: max(burst, 1), buckets: map[K]*rate.Limiter{}}
}

// Allow takes a request from key's bucket. When the bucket is empty it
// takes nothing and says how long until it holds a request again.
func (l *Keyed[K]) Allow(key K) (ok bool, retryAfter time.Duration) {
	if l == nil {
		return true, 0
	}
	l.mu.Lock()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= sweepAt {
			l.sweep(time.Now())
		}
		b = rate.NewLimiter(l.limit, l.burst)
		l.buckets[key] = b
	}
	l.mu.Unlock()
	r := b.Reserve()
	delay := r.Delay()
	if delay == 0 {
		return true, 0
	}
	r.Cancel()
	return false, delay
}

// sweepAt is how many buckets may pile up before full ones are dropped.
const sweepAt = 1024

// sweep drops the buckets that are full again: a new bucket starts full,
// so nothing is lost, and keys that are gone (or idle) take no memory.
// l.mu is held.
func (l *Keyed[K]) sweep(now time.Time) {
	for key, b := range l.buckets {
		if b.TokensAt(now) >= float64(l.burst) {
			delete(l.buckets, key)
		}
	}
}

// RetryAfter is the Retry-After header's value for a wait of d: whole
// seconds, rounded up (a client that waits that long is let in), at least
// one.
func RetryAfter(d time.Duration) string {
	return strconv.Itoa(int(max(math.Ceil(d.Seconds()), 1)))
}
