package s3dial

import (
	"context"
	"sync"

	"golang.org/x/sync/semaphore"

	"github.com/sftpgate/sftpgate/internal/s3fs"
)

// Memory bounds the parts that uploads to object stores hold in memory:
// on the replica, and for one namespace within it, so that a tenant's
// stores of large parts wait for room rather than take the replica's.
type Memory struct {
	total        *semaphore.Weighted
	perNamespace int64

	mu sync.Mutex
	ns map[string]*semaphore.Weighted
}

// NewMemory bounds parts to total bytes, and perNamespace of them for one
// namespace.
func NewMemory(total, perNamespace int64) *Memory {
	return &Memory{total: semaphore.NewWeighted(total), perNamespace: min(perNamespace, total), ns: map[string]*semaphore.Weighted{}}
}

// Of is the memory namespace's uploads share.
func (m *Memory) Of(namespace string) s3fs.Memory {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.ns[namespace]
	if s == nil {
		s = semaphore.NewWeighted(m.perNamespace)
		m.ns[namespace] = s
	}
	return &namespaceMemory{m: m, own: s}
}

type namespaceMemory struct {
	m   *Memory
	own *semaphore.Weighted
}

func (n *namespaceMemory) Acquire(ctx context.Context, size int64) error {
	if err := n.own.Acquire(ctx, size); err != nil {
		return err
	}
	if err := n.m.total.Acquire(ctx, size); err != nil {
		n.own.Release(size)
		return err
	}
	return nil
}

func (n *namespaceMemory) Release(size int64) {
	n.m.total.Release(size)
	n.own.Release(size)
}

func (n *namespaceMemory) Size() int64 { return n.m.perNamespace }
