package lastuse

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

func key(uid string) *v1alpha1.ApiKey {
	return &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "key-" + uid, UID: types.UID(uid)}}
}

// TestAtMostOnceAMinute: a key's uses within a minute are written once;
// a use after it again.
func TestAtMostOnceAMinute(t *testing.T) {
	now := time.Now()
	r := New(nil)
	r.now = func() time.Time { return now }
	for range 5 {
		r.Used(key("a"))
	}
	r.Used(key("b"))
	now = now.Add(Every)
	r.Used(key("a"))
	if n := len(r.queue); n != 3 {
		t.Errorf("%d writes queued, want 3: a, b, and a a minute later", n)
	}
	now = now.Add(Every)
	r.forget()
	if len(r.noted) != 0 {
		t.Errorf("%d keys still noted a minute after their last use", len(r.noted))
	}
}

// TestUseNeverWaits: with the queue full (the API server slow or away),
// a use is dropped rather than waited for.
func TestUseNeverWaits(t *testing.T) {
	r := New(nil)
	for i := range 2 * queueSize {
		r.Used(key(string(rune('a'+i%26)) + time.Duration(i).String()))
	}
	if len(r.queue) != queueSize {
		t.Errorf("%d queued, want the queue's %d", len(r.queue), queueSize)
	}
}
