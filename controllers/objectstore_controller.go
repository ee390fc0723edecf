package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/s3dial"
)

// +kubebuilder:rbac:groups=sftpgate.dev,resources=objectstores,verbs=get;list;watch
// +kubebuilder:rbac:groups=sftpgate.dev,resources=objectstores/status,verbs=get;update;patch

// objectStores is the tested kind ObjectStore: its test makes the
// store's client and lists one key of its prefix.
func objectStores(dialer *s3dial.Dialer) testedKind {
	return testedKind{
		kind: v1alpha1.KindObjectStore, what: "object store", name: "objectstore",
		object: func() testedObject { return &v1alpha1.ObjectStore{} },
		list:   func() client.ObjectList { return &v1alpha1.ObjectStoreList{} },
		test: func(ctx context.Context, obj testedObject, secret *corev1.Secret) testOutcome {
			store := obj.(*v1alpha1.ObjectStore) //nolint:forcetypeassert // the kind's
			client, err := dialer.Client(ctx, store, secret)
			if err == nil {
				err = client.Test(ctx, store)
			}
			return outcomeOf(err, v1alpha1.ReasonStoreUnavailable, func() string {
				return fmt.Sprintf("Listed %q in bucket %q at %s", store.Spec.Prefix, store.Spec.Bucket, client.Host)
			})
		},
	}
}
