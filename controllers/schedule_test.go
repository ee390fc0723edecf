package controllers

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// TestNextTest covers when a connection is tested again: on changes, on
// request, and at the interval, but not on restarts and re-syncs.
func TestNextTest(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tested := func(ago time.Duration, reason string, mutate ...func(*v1alpha1.SftpConnection)) *v1alpha1.SftpConnection {
		c := &v1alpha1.SftpConnection{}
		c.Generation = 3
		c.Status.CredentialsHash = "sha256:a"
		c.Status.LastTestTime = &metav1.Time{Time: now.Add(-ago)}
		meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{
			Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: reason, ObservedGeneration: 3})
		for _, m := range mutate {
			m(c)
		}
		return c
	}
	r := &SftpConnectionReconciler{TestInterval: 5 * time.Minute}
	cases := []struct {
		name     string
		conn     *v1alpha1.SftpConnection
		hash     string
		interval time.Duration
		due      bool
		wait     time.Duration
	}{
		{"never tested", &v1alpha1.SftpConnection{}, "sha256:a", 5 * time.Minute, true, 0},
		{"tested recently", tested(time.Minute, v1alpha1.ReasonConnected), "sha256:a", 5 * time.Minute, false, 4 * time.Minute},
		{"interval passed", tested(6*time.Minute, v1alpha1.ReasonConnected), "sha256:a", 5 * time.Minute, true, 0},
		{"interval off", tested(time.Hour, v1alpha1.ReasonConnected), "sha256:a", 0, false, 0},
		{"Secret changed", tested(time.Minute, v1alpha1.ReasonConnected), "sha256:b", 5 * time.Minute, true, 0},
		{"spec changed", tested(time.Minute, v1alpha1.ReasonConnected, func(c *v1alpha1.SftpConnection) { c.Generation = 4 }), "sha256:a", 5 * time.Minute, true, 0},
		{"slug freed", tested(time.Minute, v1alpha1.ReasonSlugConflict), "sha256:a", 5 * time.Minute, true, 0},
		{"test requested", tested(time.Minute, v1alpha1.ReasonConnected, func(c *v1alpha1.SftpConnection) {
			c.Annotations = map[string]string{v1alpha1.AnnotationTestRequestedAt: "2"}
			c.Status.LastHandledTestRequest = "1"
		}), "sha256:a", 0, true, 0},
		{"request answered", tested(time.Minute, v1alpha1.ReasonConnected, func(c *v1alpha1.SftpConnection) {
			c.Annotations = map[string]string{v1alpha1.AnnotationTestRequestedAt: "2"}
			c.Status.LastHandledTestRequest = "2"
		}), "sha256:a", 0, false, 0},
	}
	for _, tc := range cases {
		r.TestInterval = tc.interval
		wait, due := r.nextTest(tc.conn, tc.hash, now)
		if due != tc.due || (!due && wait != tc.wait) {
			t.Errorf("%s: nextTest = (%s, %v), want (%s, %v)", tc.name, wait, due, tc.wait, tc.due)
		}
	}
}
