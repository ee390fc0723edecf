package lastuse

import (
	"fmt"
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
	r := New(nil, nil)
	r.now = func() time.Time { return now }
	for range 5 {
		r.Used(key("a"))
	}
	r.Used(key("b"))
	now = now.Add(Every)
	r.Used(key("a"))
	if n := r.queued; n != 3 {
		t.Errorf("%d writes queued, want 3: a, b, and a a minute later", n)
	}
	now = now.Add(Every)
	r.forget()
	if len(r.noted) != 0 {
		t.Errorf("%d keys still noted a minute after their last use", len(r.noted))
	}
}

// TestUseNeverWaits: with the queue full (the API server slow or away),
// a use is dropped rather than waited for; one namespace's keys take at
// most perNamespace of it, and the namespaces take turns.
func TestUseNeverWaits(t *testing.T) {
	r := New(nil, nil)
	for i := range 2 * queueSize {
		k := key(fmt.Sprint("flood-", i))
		k.Namespace = fmt.Sprint("flood-", i%(queueSize/perNamespace))
		r.Used(k)
	}
	if r.queued != queueSize {
		t.Errorf("%d queued, want the queue's %d", r.queued, queueSize)
	}
	r = New(nil, nil)
	for i := range 2 * perNamespace {
		r.Used(key(fmt.Sprint("team-", i)))
	}
	other := key("other")
	other.Namespace = "other"
	r.Used(other)
	if r.queued != perNamespace+1 {
		t.Errorf("%d queued, want team's %d and other's", r.queued, perNamespace)
	}
	first, _ := r.next()
	second, _ := r.next()
	if first.key.Namespace != "team" || second.key.Namespace != "other" {
		t.Errorf("written first %s, then %s: want the namespaces in turn", first.key, second.key)
	}
}
