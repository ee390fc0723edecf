// Package ends is what the worker's watches and transfers work on: the
// SftpConnection, FtpConnection or ObjectStore of their namespace that a
// ConnectionReference names, resolved, and its files, through the
// session pools.
package ends

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/pool"
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
	// Object is what Ref names, of its kind's type.
	Object client.Object
	kind   *kind
}

// kind is a kind of end: what differs between them, in one row each of
// kinds (a new backend is a row).
type kind struct {
	// resource names the kind in an event's source.
	resource string
	// object is an empty object of the kind, to read into.
	object func() client.Object
	// end is the end of obj; why says why it cannot be used now ("" when
	// it can).
	end func(obj client.Object) (e *End, why string)
	// do runs fn on e's files; abort ends what fn has running.
	do func(x *Ends, ctx context.Context, e *End, op pool.Op, fn func(f files.FS, abort func()) error) error
	// warm readies e's first session, where it has sessions.
	warm func(x *Ends, ctx context.Context, e *End)
	// slug is e's path at the gateway, where the gateway serves it.
	slug func(e *End) string
	writes
}

// writes is how a kind's files are written.
type writes struct {
	// partialFiles: a copy cut off leaves its temporary file in the
	// folder, for someone to remove (a store's upload never shows).
	partialFiles bool
	// anyOffset: a file can be written at any offset, so a large one in
	// ranges at once (SFTP; FTP writes only at a file's end).
	anyOffset bool
}

// kinds are the kinds of end, by the kind a ConnectionReference names.
var kinds = map[string]*kind{
	v1alpha1.KindSftpConnection: pooled("sftpconnections", func() client.Object { return &v1alpha1.SftpConnection{} },
		func(obj client.Object) (*End, string) {
			c := obj.(*v1alpha1.SftpConnection) //nolint:forcetypeassert // the row's type
			return &End{UID: c.UID, Root: c.Status.RootPath, OperationTimeout: c.Spec.Limits.OperationTimeoutOrDefault(), Object: c}, c.Unusable()
		},
		func(e *End) string { return e.Object.(*v1alpha1.SftpConnection).Status.Slug }, //nolint:forcetypeassert // the row's type
		writes{partialFiles: true, anyOffset: true}),
	v1alpha1.KindFtpConnection: pooled("ftpconnections", func() client.Object { return &v1alpha1.FtpConnection{} },
		func(obj client.Object) (*End, string) {
			c := obj.(*v1alpha1.FtpConnection) //nolint:forcetypeassert // the row's type
			return &End{UID: c.UID, Root: c.Status.RootPath, OperationTimeout: c.Spec.Limits.OperationTimeoutOrDefault(), Object: c}, c.Unusable()
		},
		func(*End) string { return "" }, writes{partialFiles: true}),
	v1alpha1.KindObjectStore: pooled("objectstores", func() client.Object { return &v1alpha1.ObjectStore{} },
		func(obj client.Object) (*End, string) {
			s := obj.(*v1alpha1.ObjectStore) //nolint:forcetypeassert // the row's type
			return &End{UID: s.UID, Root: "/", OperationTimeout: s.Spec.Limits.OperationTimeoutOrDefault(), Object: s}, s.Unusable()
		},
		func(*End) string { return "" }, writes{}),
}

// pooled is a kind whose ends' sessions are kept in pools and dialled by
// the Ends' dialer of the kind (a store's are its client's files).
func pooled(resource string, object func() client.Object, end func(client.Object) (*End, string), slug func(*End) string, w writes) *kind {
	get := func(x *Ends, ctx context.Context, e *End) (*pool.Pool, error) {
		return x.Pools.Get(ctx, x.Dialers[kindOf(e.Ref)], e.Object.(pool.Endpoint)) //nolint:forcetypeassert // a pooled kind's
	}
	return &kind{
		resource: resource, object: object, end: end, slug: slug, writes: w,
		do: func(x *Ends, ctx context.Context, e *End, op pool.Op, fn func(files.FS, func()) error) error {
			p, err := get(x, ctx, e)
			if err != nil {
				return err
			}
			return p.Do(ctx, op, func(s files.Session) error { return fn(s.FS(), func() { _ = s.Close() }) })
		},
		warm: func(x *Ends, ctx context.Context, e *End) {
			if p, err := get(x, ctx, e); err == nil {
				_ = p.Warm(ctx)
			}
		},
	}
}

// Get reads what ref names in namespace from cache; why says why it
// cannot be used now, and is "" when it can.
func Get(ctx context.Context, cache client.Reader, namespace string, ref v1alpha1.ConnectionReference) (e *End, why string) {
	k := kinds[kindOf(ref)]
	if k == nil {
		return nil, fmt.Sprintf("an end of kind %s cannot be used", ref.Kind)
	}
	obj := k.object()
	if err := cache.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, obj); err != nil {
		return nil, fmt.Sprintf("there is no %s %s in this namespace", kindOf(ref), ref.Name)
	}
	return Of(ref, obj)
}

// Object is an empty object of the kind ref names, to read into; false
// for a kind that is no end's.
func Object(ref v1alpha1.ConnectionReference) (client.Object, bool) {
	k := kinds[kindOf(ref)]
	if k == nil {
		return nil, false
	}
	return k.object(), true
}

// Of is the end of obj, which ref names (obj is of ref's kind): Get's,
// once it read obj.
func Of(ref v1alpha1.ConnectionReference, obj client.Object) (e *End, why string) {
	k := kinds[kindOf(ref)]
	e, why = k.end(obj)
	e.Ref, e.kind = ref, k
	return e, why
}

func kindOf(ref v1alpha1.ConnectionReference) string {
	return cmp.Or(ref.Kind, v1alpha1.KindSftpConnection)
}

// Resource names e's kind in an event's source ("sftpconnections").
func (e *End) Resource() string { return e.kind.resource }

// Slug is e's path at the gateway, where the gateway serves its kind
// ("" where not).
func (e *End) Slug() string { return e.kind.slug(e) }

// LeavesPartialFiles says whether a copy to e that was cut off leaves
// its temporary file there, for its runner to remove.
func (e *End) LeavesPartialFiles() bool { return e.kind.partialFiles }

// WritesAnywhere says whether a file on e can be written at any offset,
// as a copy in ranges writes it.
func (e *End) WritesAnywhere() bool { return e.kind.anyOffset }

// Ends runs operations on ends' files.
type Ends struct {
	Pools *pool.Pools
	// Dialers dial the kinds' sessions, by kind.
	Dialers map[string]pool.Dialer
}

// Do runs fn on e's files, on a session of its pool (a failure of the
// session's takes it out of the pool). abort ends what fn has running:
// it closes the session (a store's cancels its requests), as op.Timeout
// does.
func (x *Ends) Do(ctx context.Context, e *End, op pool.Op, fn func(f files.FS, abort func()) error) error {
	return e.kind.do(x, ctx, e, op, fn)
}

// Warm readies e's first session ahead of its use, where it has sessions.
func (x *Ends) Warm(ctx context.Context, e *End) { e.kind.warm(x, ctx, e) }
