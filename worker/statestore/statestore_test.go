package statestore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/internal/storedbytes"
	"github.com/sftpgate/sftpgate/worker/statestore"
)

var k8s client.Client

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, 0, func(c client.Client) { k8s = c }))
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
	var other statestore.Version
	if err := s.Save(ctx, "w2", "tenant", make([]byte, 2*statestore.PartSize), &other); err != nil {
		t.Fatal(err)
	}
	// Keys lists, once a sweep (every minute), not per write.
	lists := &statestore.Store{Client: k8s, Namespace: ns.Name, Kind: "sftpwatch"}
	if keys, err := lists.Keys(ctx); err != nil || !slices.Equal(slices.Sorted(slices.Values(keys)), []string{"w1", "w2"}) {
		t.Errorf("keys %v %v, want w1 and w2 once each", keys, err)
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
