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

func retryAfterSeconds(d time.Duration) string { return strconv.Itoa(int(max(d.Seconds(), 1))) }
