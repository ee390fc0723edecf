package gateway_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/gateway/lastuse"
	"github.com/sftpgate/sftpgate/internal/apitoken"
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

// TestAFailedLastUseFailsNothing: a write the API server refuses (the key
// is gone) is logged, and the recorder goes on to the next key.
func TestAFailedLastUseFailsNothing(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := lastuse.New(k8s, nil)
	go r.Run(ctx)
	// A key no gateway has seen used: only this recorder writes its use.
	token, keyID := apitoken.NewToken()
	unused := &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "unused"},
		Spec: v1alpha1.ApiKeySpec{Token: v1alpha1.TokenSource{SHA256: apitoken.Hash(token), KeyID: keyID}}}
	must(t, k8s.Create(ctx, unused))
	r.Used(&v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "gone", UID: "uid-of-a-deleted-key"}})
	r.Used(unused)
	eventually(t, "the key after a failed one is recorded", func() bool {
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(unused), unused))
		return unused.Status.LastUsedTime != nil
	})
}

// TestALastUseGoesToTheKeyThatWasUsed: a key deleted and made again under
// its name never gets its predecessor's use.
func TestALastUseGoesToTheKeyThatWasUsed(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := lastuse.New(k8s, nil)
	go r.Run(ctx)
	newKey := func(name string) *v1alpha1.ApiKey {
		token, keyID := apitoken.NewToken()
		k := &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
			Spec: v1alpha1.ApiKeySpec{Token: v1alpha1.TokenSource{SHA256: apitoken.Hash(token), KeyID: keyID}}}
		must(t, k8s.Create(ctx, k))
		eventually(t, "the key has a status", func() bool {
			must(t, k8s.Get(ctx, client.ObjectKeyFromObject(k), k))
			return k.Status.ObservedGeneration == k.Generation
		})
		return k
	}
	before := newKey("recreated")
	must(t, k8s.Delete(ctx, before))
	after := newKey("recreated")
	later := newKey("later")
	r.Used(before)
	r.Used(later)
	eventually(t, "the key used after it is recorded", func() bool {
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(later), later))
		return later.Status.LastUsedTime != nil
	})
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(after), after))
	if after.Status.LastUsedTime != nil {
		t.Errorf("the key made again under the name of a used one shows its use: %v", after.Status.LastUsedTime)
	}
}
