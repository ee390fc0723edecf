package gateway

import (
	"net/http"

	"k8s.io/apimachinery/pkg/types"

	"github.com/sftpgate/sftpgate/gateway/ratelimit"
)

// rateLimited answers a key over its rate limit.
func rateLimited(limiter *ratelimit.Keyed[types.UID], key types.UID) error {
	ok, delay := limiter.Allow(key)
	if ok {
		return nil
	}
	return &apiError{Status: http.StatusTooManyRequests, Code: "rate_limited",
		Message:    "this API key is over its rate limit; retry after the time in Retry-After",
		retryAfter: delay}
}
