package watches

import (
	"context"
	"strings"
	"testing"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// TestSettingsRefuse: what the API server's schema cannot check is
// refused with the field's name, for the watch's InvalidSpec message.
func TestSettingsRefuse(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		spec       func(*v1alpha1.SftpWatchSpec)
	}{
		{"bad glob", "[", func(s *v1alpha1.SftpWatchSpec) { s.Include = []string{"["} }},
		{"backoff not ISO 8601", "delivery.backoffDelay", func(s *v1alpha1.SftpWatchSpec) { s.Delivery.BackoffDelay = "1s" }},
		{"timeout past the bound", "delivery.timeout", func(s *v1alpha1.SftpWatchSpec) { s.Delivery.Timeout = "PT10M" }},
		{"timeout zero", "delivery.timeout", func(s *v1alpha1.SftpWatchSpec) { s.Delivery.Timeout = "PT0S" }},
		{"moved into the watched folder", "inside the watched folder", func(s *v1alpha1.SftpWatchSpec) {
			s.AfterDelivery = v1alpha1.AfterDelivery{Action: v1alpha1.AfterDeliveryMove, MoveTo: "/in/done"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &v1alpha1.SftpWatch{Spec: v1alpha1.SftpWatchSpec{Path: "/in"}}
			tc.spec(&w.Spec)
			_, err := readSettings(context.Background(), nil, w)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
	w := &v1alpha1.SftpWatch{Spec: v1alpha1.SftpWatchSpec{Path: "/in", Delivery: v1alpha1.DeliverySpec{Timeout: "PT1M"},
		AfterDelivery: v1alpha1.AfterDelivery{Action: v1alpha1.AfterDeliveryMove, MoveTo: "/include"}}}
	if _, err := readSettings(context.Background(), nil, w); err != nil {
		t.Fatalf("a valid spec: %v", err)
	}
}
