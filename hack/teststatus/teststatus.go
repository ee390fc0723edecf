// Package teststatus computes an object's status as kstatus's own code
// does (sigs.k8s.io/cli-utils), for the tests of each kind's conditions.
package teststatus

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// KStatus is obj's kstatus.
func KStatus(t testing.TB, obj runtime.Object) status.Status {
	t.Helper()
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	res, err := status.Compute(&unstructured.Unstructured{Object: content})
	if err != nil {
		t.Fatal(err)
	}
	return res.Status
}
