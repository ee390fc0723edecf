// Package tenants says which kind of tenant a namespace is: a web UI
// account (a stranger who signed up, whose namespace carries
// v1alpha1.LabelAccount) or the operator's own. Strangers get the
// smaller budgets and the stricter dial policy.
package tenants

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// Kinds reads namespaces' labels through Reader: a component's cache,
// which then keeps the namespaces' metadata alone (no spec, no status).
type Kinds struct {
	Reader client.Reader
}

// IsAccount says whether namespace is a web UI account's. A namespace
// that cannot be read is taken for one: the stricter rules apply until it
// can.
func (k Kinds) IsAccount(ctx context.Context, namespace string) bool {
	if k.Reader == nil {
		return false
	}
	var ns metav1.PartialObjectMetadata
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	err := k.Reader.Get(ctx, client.ObjectKey{Name: namespace}, &ns)
	if apierrors.IsNotFound(err) {
		return false // gone: nothing of it is served or stored any more
	}
	if err != nil {
		return true
	}
	_, ok := ns.Labels[v1alpha1.LabelAccount]
	return ok
}
