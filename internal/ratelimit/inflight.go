package ratelimit

import "sync"

// InFlight bounds the requests in flight per key (an API key, a
// namespace). It holds an entry only for keys with requests in flight, so
// it never holds more entries than requests.
type InFlight[K comparable] struct {
	limit int
	mu    sync.Mutex
	n     map[K]int
}

// NewInFlight bounds each key to limit requests at once; 0 or less is no
// bound.
func NewInFlight[K comparable](limit int) *InFlight[K] {
	return &InFlight[K]{limit: limit, n: map[K]int{}}
}

// Limit is the bound.
func (f *InFlight[K]) Limit() int { return f.limit }

// Enter counts a request of key in, unless key is at its limit. Each
// Enter that returns true is matched by a Leave.
func (f *InFlight[K]) Enter(key K) bool {
	if f.limit <= 0 {
		return true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n[key] >= f.limit {
		return false
	}
	f.n[key]++
	return true
}

// Leave counts a request of key out.
func (f *InFlight[K]) Leave(key K) {
	if f.limit <= 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n[key] <= 1 {
		delete(f.n, key)
		return
	}
	f.n[key]--
}
