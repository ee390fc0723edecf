package gateway

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/gateway/keyauth"
	"github.com/sftpgate/sftpgate/gateway/kubeauth"
	"github.com/sftpgate/sftpgate/internal/cacheindex"
	"github.com/sftpgate/sftpgate/internal/pool"
)

// endpoint is what the gateway serves at a slug: an object of one of the
// kinds servedKinds has a row for.
type endpoint interface {
	pool.Endpoint
	GetConditions() *[]metav1.Condition
	ServedSlug() *string
}

// servedKind is what differs between the kinds the gateway serves: a new
// kind is a row.
type servedKind struct {
	// name is the kind's, as an ApiKey's spec.connections names it
	// (Kind/name) but for SftpConnections (name alone).
	name string
	// object is an empty object of the kind, for its informer.
	object func() endpoint
	// resource is the kind's resource, whose commands subresource RBAC
	// grants ServiceAccounts.
	resource string
	// dialer dials its sessions.
	dialer pool.Dialer
	index  *cacheindex.Index[client.Object]
}

// served is an endpoint with its kind.
type served struct {
	endpoint
	kind *servedKind
}

// ref is e as ApiKeys, logs and audit records name it: its name, or
// Kind/name but for an SftpConnection.
func (e *served) ref() string {
	if e.kind.name == v1alpha1.KindSftpConnection {
		return e.GetName()
	}
	return e.kind.name + "/" + e.GetName()
}

// recordKind is e's kind as an upload's record keeps it: "" for an
// SftpConnection, as records before kinds.
func (e *served) recordKind() string {
	if e.kind.name == v1alpha1.KindSftpConnection {
		return ""
	}
	return e.kind.name
}

// keyTarget is e as ApiKeys name it.
func (e *served) keyTarget() *keyauth.Target {
	return &keyauth.Target{Namespace: e.GetNamespace(), Ref: e.ref()}
}

// rbacTarget is e as RBAC rules name it.
func (e *served) rbacTarget() kubeauth.Target {
	return kubeauth.Target{Namespace: e.GetNamespace(), Name: e.GetName(), Resource: e.kind.resource}
}

// indexServedSlug is the gateway's cache index of each kind by
// status.slug: only the object that holds a slug is served under it.
const indexServedSlug = "sftpgate.dev/served-slug"

// endpoints are the kinds the gateway serves.
type endpoints []*servedKind

// servedKinds are the rows of the kinds the gateway serves, dialled by
// the dialers given, their informers indexed in c.
func servedKinds(ctx context.Context, c cache.Informers, sftp, ftp, s3 pool.Dialer) (endpoints, error) {
	kinds := endpoints{
		{name: v1alpha1.KindSftpConnection, object: func() endpoint { return &v1alpha1.SftpConnection{} }, resource: "sftpconnections", dialer: sftp},
		{name: v1alpha1.KindFtpConnection, object: func() endpoint { return &v1alpha1.FtpConnection{} }, resource: "ftpconnections", dialer: ftp},
		{name: v1alpha1.KindObjectStore, object: func() endpoint { return &v1alpha1.ObjectStore{} }, resource: "objectstores", dialer: s3},
	}
	for _, k := range kinds {
		var err error
		k.index, err = cacheindex.New[client.Object](ctx, c, k.object(), indexServedSlug, func(o client.Object) []string {
			if slug := *o.(endpoint).ServedSlug(); slug != "" { //nolint:forcetypeassert // the kind's
				return []string{slug}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return kinds, nil
}

// bySlug is every object, of any kind, that the cache says serves slug:
// one, or for a moment while one hands it to another, two.
func (es endpoints) bySlug(slug string) ([]*served, error) {
	var all []*served
	for _, k := range es {
		objs, err := k.index.Get(slug)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			all = append(all, &served{endpoint: o.(endpoint), kind: k}) //nolint:forcetypeassert // the kind's
		}
	}
	return all, nil
}
