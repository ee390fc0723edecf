// Package ends is what the worker's watches and transfers work on: the
// SftpConnection or ObjectStore of their namespace that a
// ConnectionReference names, resolved, and the files of either, through
// the SFTP session pools or a client per store.
package ends

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/pool"
	"github.com/sftpgate/sftpgate/internal/s3dial"
	"github.com/sftpgate/sftpgate/internal/sftpdial"
)

// End is a connection or a store, as the cache has it now.
type End struct {
	Ref v1alpha1.ConnectionReference
	UID types.UID
	// Root is the path on the server that is the end's /: a connection's
	// resolved rootPath; a store's prefix is its client's, so /.
	Root string
	// OperationTimeout bounds one operation on it.
	OperationTimeout time.Duration
	// Conn or Store is what Ref names.
	Conn  *v1alpha1.SftpConnection
	Store *v1alpha1.ObjectStore
}

// Get reads what ref names in namespace from cache; why says why it
// cannot be used now, and is "" when it can.
func Get(ctx context.Context, cache client.Reader, namespace string, ref v1alpha1.ConnectionReference) (e *End, why string) {
	key := client.ObjectKey{Namespace: namespace, Name: ref.Name}
	if ref.IsObjectStore() {
		var s v1alpha1.ObjectStore
		if err := cache.Get(ctx, key, &s); err != nil {
			return nil, fmt.Sprintf("there is no ObjectStore %s in this namespace", ref.Name)
		}
		return &End{Ref: ref, UID: s.UID, Root: "/", OperationTimeout: s.Spec.Limits.OperationTimeoutOrDefault(), Store: &s}, s.Unusable()
	}
	var c v1alpha1.SftpConnection
	if err := cache.Get(ctx, key, &c); err != nil {
		return nil, fmt.Sprintf("there is no SftpConnection %s in this namespace", ref.Name)
	}
	return &End{Ref: ref, UID: c.UID, Root: c.Status.RootPath, OperationTimeout: c.Spec.Limits.OperationTimeoutOrDefault(), Conn: &c}, c.Unusable()
}

// Ends runs operations on ends' files.
type Ends struct {
	Pools  *pool.Pools
	Stores *Stores
}

// Do runs fn on e's files: on a session of a connection's pool (a
// failure of the session's takes it out of the pool), or on a store's
// client. abort ends what fn has running: it closes the session, or
// cancels the store's requests, as op.Timeout does (a store's requests
// each have its operationTimeout too, but a listing is many).
func (x *Ends) Do(ctx context.Context, e *End, op pool.Op, fn func(f files.FS, abort func()) error) error {
	if e.Store != nil {
		s, err := x.Stores.Get(ctx, e.Store)
		if err != nil {
			return err
		}
		if op.Timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, op.Timeout)
			defer cancel()
		}
		f := s.FS()
		defer func() { _ = f.Close() }()
		abort := func() { _ = f.Close() }
		defer context.AfterFunc(ctx, abort)()
		return fn(f, abort)
	}
	p, err := x.Pools.Get(ctx, e.Conn)
	if err != nil {
		return err
	}
	return p.Do(ctx, op, func(s *sftpdial.Session) error { return fn(s.Files, func() { _ = s.Close() }) })
}

// Warm readies e's first session ahead of its use, where it has sessions.
func (x *Ends) Warm(ctx context.Context, e *End) {
	if e.Conn == nil {
		return
	}
	if p, err := x.Pools.Get(ctx, e.Conn); err == nil {
		_ = p.Warm(ctx)
	}
}

// Stores keeps a client per ObjectStore, made again when its spec or
// Secret changed, and forgotten once unused for idle.
type Stores struct {
	Dialer *s3dial.Dialer
	// Secrets reads a store's credentials when its client is made.
	Secrets client.Reader
	// Idle forgets a client unused this long (and its credentials).
	Idle time.Duration
	// Memory bounds the parts uploads hold.
	Memory *Memory

	mu      sync.Mutex
	clients map[types.UID]*storeClient
}

type storeClient struct {
	generation int64
	hash       string
	store      *s3dial.Store
	used       time.Time
}

// Get is the client of store, made (its Secret read) when it has none
// of its current spec and Secret.
func (s *Stores) Get(ctx context.Context, store *v1alpha1.ObjectStore) (*s3dial.Store, error) {
	now := time.Now()
	s.mu.Lock()
	if s.clients == nil {
		s.clients = map[types.UID]*storeClient{}
	}
	for uid, c := range s.clients {
		if now.Sub(c.used) > s.Idle {
			delete(s.clients, uid)
		}
	}
	c := s.clients[store.UID]
	if c != nil && c.generation == store.Generation && c.hash == store.Status.CredentialsHash {
		c.used = now
		s.mu.Unlock()
		return c.store, nil
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, store.Spec.Limits.ConnectTimeoutOrDefault())
	defer cancel()
	var secret corev1.Secret
	if err := s.Secrets.Get(ctx, client.ObjectKey{Namespace: store.Namespace, Name: store.Spec.Credentials.SecretRef.Name}, &secret); err != nil {
		return nil, fmt.Errorf("%w: %w", pool.ErrCredentials, err)
	}
	made, err := s.Dialer.Client(ctx, store, &secret)
	if err != nil {
		return nil, err
	}
	if s.Memory != nil {
		made.Config.Memory = s.Memory.Of(store.Namespace)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clients[store.UID] = &storeClient{generation: store.Generation, hash: store.Status.CredentialsHash, store: made, used: now}
	return made, nil
}
