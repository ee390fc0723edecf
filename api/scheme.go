// Package api holds sftpgate's API types (in v1alpha1) and the runtime
// scheme every part of sftpgate reads and writes objects with.
package api

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// Scheme knows Kubernetes' built-in kinds and sftpgate's.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}
