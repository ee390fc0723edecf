package statestore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/internal/storedbytes"
	"github.com/sftpgate/sftpgate/worker/statestore"
)

var (
	k8s client.Client
	// cfg makes the tests' caches.
	cfg *rest.Config
)

func TestMain(m *testing.M) {
	env, c, err := testcluster.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s, cfg = c, env.Config
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// storedCache is a cache of what is stored for tenants in ns, as the
// worker's is, synced.
func storedCache(t testing.TB, ns string) cache.Cache {
	t.Helper()
	stored, byObject, index := storedbytes.Watch(ns)
	c, err := cache.New(cfg, cache.Options{Scheme: k8s.Scheme(), ByObject: map[client.Object]cache.ByObject{stored: byObject}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := index(ctx, c); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetInformer(ctx, stored); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	return c
}

// noLists is a client whose lists fail the test: a state's writes name
// what they remove.
type noLists struct {
	client.Client
	t *testing.T
}

func (c noLists) List(context.Context, client.ObjectList, ...client.ListOption) error {
	c.t.Error("a state's write listed ConfigMaps")
	return errors.New("no lists")
}

// TestStates: a state comes back as it was saved, split over as many
// ConfigMaps as it needs and no more once it shrinks, with no list of
// ConfigMaps; a replica writing
// on a state someone else wrote since is refused; past MaxParts a state
// is refused rather than stored; Delete removes every part.
func TestStates(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "state-"}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	s := &statestore.Store{Client: noLists{k8s, t}, Namespace: ns.Name, Kind: "sftpwatch"}
	parts := func() int {
		var list corev1.ConfigMapList
		if err := k8s.List(ctx, &list, client.InNamespace(ns.Name)); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, cm := range list.Items {
			if cm.Name != "kube-root-ca.crt" {
				n++
			}
		}
		return n
	}
	if blob, _, err := s.Load(ctx, "w1"); blob != nil || err != nil {
		t.Fatalf("no state yet: %v %v", blob, err)
	}
	var v statestore.Version
	for _, size := range []int{10, 3*statestore.PartSize - 5, 2 * statestore.PartSize, 100} {
		blob := make([]byte, size)
		_, _ = rand.Read(blob)
		if err := s.Save(ctx, "w1", "tenant", blob, &v); err != nil {
			t.Fatalf("%d bytes: %v", size, err)
		}
		got, loaded, err := s.Load(ctx, "w1")
		if err != nil || !bytes.Equal(got, blob) || loaded != v {
			t.Fatalf("%d bytes: %d back, %v", size, len(got), err)
		}
		if want := max((size+statestore.PartSize-1)/statestore.PartSize, 1); parts() != want {
			t.Errorf("%d bytes take %d ConfigMaps, want %d", size, parts(), want)
		}
	}
	stale := v
	if err := s.Save(ctx, "w1", "tenant", []byte("mine"), &v); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(ctx, "w1", "tenant", []byte("theirs"), &stale); !errors.Is(err, statestore.ErrConflict) {
		t.Errorf("a write on a stale version: %v, want ErrConflict", err)
	}
	var fresh statestore.Version
	if err := s.Save(ctx, "w1", "tenant", []byte("a new replica's"), &fresh); !errors.Is(err, statestore.ErrConflict) {
		t.Errorf("a first write where one exists: %v, want ErrConflict", err)
	}
	if err := s.Save(ctx, "w1", "tenant", make([]byte, statestore.MaxParts*statestore.PartSize+1), &v); !errors.Is(err, statestore.ErrTooLarge) {
		t.Errorf("an oversized state: %v, want ErrTooLarge", err)
	}
	if got, _, _ := s.Load(ctx, "w1"); string(got) != "mine" {
		t.Errorf("after refused writes the state is %q", got)
	}
	// A replica that lost the item writes a large state of the same
	// generation as the new owner's: it never touches the owner's parts,
	// and leaves none of its own.
	stale = v
	mine := make([]byte, 2*statestore.PartSize)
	_, _ = rand.Read(mine)
	if err := s.Save(ctx, "w1", "tenant", mine, &v); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(ctx, "w1", "tenant", make([]byte, 2*statestore.PartSize), &stale); !errors.Is(err, statestore.ErrConflict) {
		t.Errorf("a large write on a stale version: %v, want ErrConflict", err)
	}
	if got, _, err := s.Load(ctx, "w1"); err != nil || !bytes.Equal(got, mine) {
		t.Errorf("after a stale large write the state is %d bytes (%v), not the owner's", len(got), err)
	}
	if parts() != 2 {
		t.Errorf("after a stale large write %d ConfigMaps, want the owner's 2", parts())
	}
	if err := s.Save(ctx, "w1", "tenant", []byte("mine"), &v); err != nil {
		t.Fatal(err)
	}
	var other statestore.Version
	if err := s.Save(ctx, "w2", "tenant", make([]byte, 2*statestore.PartSize), &other); err != nil {
		t.Fatal(err)
	}
	// Keys lists, once a sweep (every minute), not per write; from the
	// worker's cache, with no list at the API server.
	lists := &statestore.Store{Client: k8s, Namespace: ns.Name, Kind: "sftpwatch"}
	keys := func(s *statestore.Store) []string {
		keys, err := s.Keys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Sorted(slices.Values(keys))
	}
	if got := keys(lists); !slices.Equal(got, []string{"w1", "w2"}) {
		t.Errorf("keys %v, want w1 and w2 once each", got)
	}
	cached := &statestore.Store{Client: noLists{k8s, t}, Cache: storedCache(t, ns.Name), Namespace: ns.Name, Kind: "sftpwatch"}
	testkit.Eventually(t, "the cache has the states", func() bool { return slices.Equal(keys(cached), []string{"w1", "w2"}) })
	if got := keys(&statestore.Store{Client: noLists{k8s, t}, Cache: cached.Cache, Namespace: ns.Name, Kind: "transfer"}); len(got) != 0 {
		t.Errorf("keys of another kind: %v", got)
	}
	if err := s.Delete(ctx, "w2"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "w1"); err != nil || parts() != 0 {
		t.Errorf("delete: %v, %d ConfigMaps left", err, parts())
	}
}

// TestStatesWithinBudget: a state that would take its namespace past its
// budget is refused before anything is written, a state replacing its own
// older one counts only the difference, and another namespace is not
// held to the first one's budget.
func TestStatesWithinBudget(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "state-"}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	const limit = 3 * statestore.PartSize
	budget := &storedbytes.Budget{Client: k8s, Namespace: ns.Name, Limits: storedbytes.Limits{PerNamespace: limit}}
	s := &statestore.Store{Client: k8s, Namespace: ns.Name, Kind: "sftpwatch", Budget: budget}
	stored := func(tenant string) int64 {
		n, err := budget.Used(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	var first, second, other statestore.Version
	if err := s.Save(ctx, "w1", "tenant", make([]byte, 2*statestore.PartSize), &first); err != nil {
		t.Fatal(err)
	}
	err := s.Save(ctx, "w2", "tenant", make([]byte, 2*statestore.PartSize), &second)
	if _, ok := errors.AsType[*storedbytes.ExceededError](err); !ok {
		t.Fatalf("a second state past the budget: %v", err)
	}
	if blob, _, _ := s.Load(ctx, "w2"); blob != nil {
		t.Error("the refused state was stored")
	}
	if n := stored("tenant"); n > limit {
		t.Errorf("%d bytes stored for the tenant, past its budget of %d", n, limit)
	}
	if err := s.Save(ctx, "w1", "tenant", make([]byte, 5*statestore.PartSize/2), &first); err != nil {
		t.Errorf("a state replacing its own, within the budget: %v", err)
	}
	if err := s.Save(ctx, "w3", "other", make([]byte, 2*statestore.PartSize), &other); err != nil {
		t.Errorf("another namespace's state: %v", err)
	}
	t.Logf("at the bound: %d bytes stored for the namespace, budget %d", stored("tenant"), limit)
}

// BenchmarkTenThousandStates: with 10,000 states stored, what a sweep's
// Keys allocates, at the API server and from the worker's cache, and what
// a save's admission reads of the budget (the tenant's, and every ten
// seconds the total).
func BenchmarkTenThousandStates(b *testing.B) {
	const states = 10_000
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "state-"}}
	if err := k8s.Create(ctx, ns); err != nil {
		b.Fatal(err)
	}
	s := &statestore.Store{Client: k8s, Namespace: ns.Name, Kind: "sftpwatch"}
	var wg sync.WaitGroup
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				if err := s.Save(ctx, fmt.Sprintf("%08d-0000-4000-8000-000000000000", i), "tenant", make([]byte, 200), new(statestore.Version)); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for i := range states {
		next <- i
	}
	close(next)
	wg.Wait()
	cached := &statestore.Store{Client: k8s, Cache: storedCache(b, ns.Name), Namespace: ns.Name, Kind: "sftpwatch"}
	for name, s := range map[string]*statestore.Store{"APIServer": s, "Cache": cached} {
		b.Run("Keys/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if keys, err := s.Keys(ctx); err != nil || len(keys) != states {
					b.Fatalf("%d keys: %v", len(keys), err)
				}
			}
		})
	}
	budget := &storedbytes.Budget{Cache: cached.Cache, Namespace: ns.Name}
	b.Run("Budget/Cache", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if n, err := budget.Used(ctx, "tenant"); err != nil || n < states*200 {
				b.Fatalf("%d bytes stored: %v", n, err)
			}
		}
	})
}
