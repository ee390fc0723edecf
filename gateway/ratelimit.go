package gateway

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
)

// keyLimiter holds a token bucket per API key (per gateway replica).
type keyLimiter struct {
	limit rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[types.UID]*rate.Limiter
}

func newKeyLimiter(perSecond float64, burst int) *keyLimiter {
	if perSecond <= 0 {
		return nil
	}
	return &keyLimiter{limit: rate.Limit(perSecond), burst: max(burst, 1), buckets: map[types.UID]*rate.Limiter{}}
}

// allow takes a request from key's bucket, or says how long to wait.
func (l *keyLimiter) allow(key types.UID) error {
	if l == nil {
		return nil
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
		return nil
	}
	r.Cancel()
	return &apiError{Status: http.StatusTooManyRequests, Code: "rate_limited",
		Message:    "this API key is over its rate limit; retry after the time in Retry-After",
		retryAfter: time.Duration(math.Ceil(delay.Seconds())) * time.Second}
}

// sweepAt is how many buckets may pile up before full ones are dropped.
const sweepAt = 1024

// sweep drops the buckets that are full again: a new bucket starts full,
// so nothing is lost, and keys that are gone (or idle) take no memory.
// l.mu is held.
func (l *keyLimiter) sweep(now time.Time) {
	for key, b := range l.buckets {
		if b.TokensAt(now) >= float64(l.burst) {
			delete(l.buckets, key)
		}
	}
}

func retryAfterSeconds(d time.Duration) string { return strconv.Itoa(int(max(d.Seconds(), 1))) }
