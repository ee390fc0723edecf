// Package cacheindex looks objects up in an informer's own index, by a key
// of our choosing. A controller-runtime List with MatchingFields builds a
// list object through reflection on every call, which the gateway makes
// twice per request (the connection by slug, the key by token hash).
package cacheindex

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Index finds objects of type T by key. The objects are the informer's
// own: callers only read them.
type Index[T client.Object] struct {
	name    string
	indexer toolscache.Indexer
}

// New adds an index called name to c's informer of obj's type; keys gives
// an object's keys.
func New[T client.Object](ctx context.Context, c cache.Informers, obj T, name string, keys func(T) []string) (*Index[T], error) {
	informer, err := c.GetInformer(ctx, obj)
	if err != nil {
		return nil, err
	}
	err = informer.AddIndexers(toolscache.Indexers{name: func(o any) ([]string, error) {
		if t, ok := o.(T); ok {
			return keys(t), nil
		}
		return nil, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("indexing %T by %s: %w", obj, name, err)
	}
	shared, ok := informer.(interface{ GetIndexer() toolscache.Indexer })
	if !ok {
		return nil, fmt.Errorf("the informer of %T is a %T, which has no index to read", obj, informer)
	}
	return &Index[T]{name: name, indexer: shared.GetIndexer()}, nil
}

// Get returns the objects with key.
func (i *Index[T]) Get(key string) ([]T, error) {
	objs, err := i.indexer.ByIndex(i.name, key)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out, nil
}
