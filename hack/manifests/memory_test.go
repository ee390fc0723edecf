package manifests

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// TestWorkerMemoryLimitIsGos: the worker's Go soft memory limit
// (GOMEMLIMIT) is its container's memory limit, read through the Downward
// API, so that changing the limit moves it too and the collector works
// harder before the replica is killed, not after.
func TestWorkerMemoryLimitIsGos(t *testing.T) {
	found := false
	for _, u := range render(t) {
		if u.GetKind() != "Deployment" || u.GetLabels()["app.kubernetes.io/component"] != "worker" {
			continue
		}
		for _, c := range convert[appsv1.Deployment](t, u).Spec.Template.Spec.Containers {
			if c.Resources.Limits.Memory().IsZero() {
				t.Errorf("%s: no memory limit", c.Name)
			}
			for _, e := range c.Env {
				if e.Name != "GOMEMLIMIT" {
					continue
				}
				found = true
				// A divisor would write a number GOMEMLIMIT reads as bytes.
				if r := e.ValueFrom; r == nil || r.ResourceFieldRef == nil || r.ResourceFieldRef.Resource != "limits.memory" ||
					r.ResourceFieldRef.ContainerName != "" && r.ResourceFieldRef.ContainerName != c.Name ||
					!r.ResourceFieldRef.Divisor.IsZero() && r.ResourceFieldRef.Divisor.Value() != 1 {
					t.Errorf("%s: GOMEMLIMIT is not its container's memory limit in bytes: %+v", c.Name, e)
				}
			}
		}
	}
	if !found {
		t.Error("the worker sets no GOMEMLIMIT")
	}
}
