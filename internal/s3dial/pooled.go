package s3dial

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/s3fs"
)

// Target prepares pooled sessions of obj, an ObjectStore, with secret,
// so that a store is used as a connection is (package pool). A store has
// no session: each is the files of one client, made at the first dial
// and shared by all, whose transport keeps the store's maxConnections.
func (d *Dialer) Target(obj client.Object, secret *corev1.Secret) (files.Target, error) {
	store, ok := obj.(*v1alpha1.ObjectStore)
	if !ok {
		return nil, fmt.Errorf("s3dial cannot dial a %T", obj)
	}
	return &pooled{d: d, store: store, secret: secret}, nil
}

type pooled struct {
	d      *Dialer
	store  *v1alpha1.ObjectStore
	secret *corev1.Secret

	mu   sync.Mutex
	made *Store
}

// Dial makes the client the first time (the namespace's dial policy is
// known then), and files on it.
func (p *pooled) Dial(ctx context.Context) (files.Session, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.made == nil {
		s, err := p.d.Client(ctx, p.store, p.secret)
		if err != nil {
			return nil, err
		}
		if p.d.Memory != nil {
			s.Config.Memory = p.d.Memory(p.store.Namespace)
		}
		p.made = s
	}
	return session{p.made.FS()}, nil
}

// session is a store's files until closed: closing cancels what runs
// on them.
type session struct{ fs s3fs.FS }

func (s session) FS() files.FS { return s.fs }

// Keepalive has nothing to keep: the transport keeps its connections.
func (session) Keepalive() error { return nil }

func (s session) Close() error { return s.fs.Close() }

func (session) Version() string { return "S3" }
