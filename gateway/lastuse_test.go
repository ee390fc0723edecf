package gateway_test

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// TestLastUse: a key's use shows in its status, written by the gateway in
// the background.
func TestLastUse(t *testing.T) {
	before := time.Now().Add(-time.Second)
	f := newFixture(t) // its wait for the gateway uses the key
	var key v1alpha1.ApiKey
	eventually(t, "the key's last use is recorded", func() bool {
		must(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "key"}, &key))
		return key.Status.LastUsedTime != nil
	})
	if used := key.Status.LastUsedTime.Time; used.Before(before.Truncate(time.Second)) || used.After(time.Now()) {
		t.Errorf("last used %v, want since %v", used, before)
	}
}
