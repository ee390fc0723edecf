package shard_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/hack/testcluster"
	"github.com/sftpgate/sftpgate/worker/shard"
)

var k8s client.Client

func TestMain(m *testing.M) {
	env, c, err := testcluster.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s = c
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// replicas are shards of one kind of work in one namespace, sharing a
// fake clock.
func replicas(t *testing.T, clk *clocktesting.FakeClock, names ...string) []*shard.Shard {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "shard-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	var out []*shard.Shard
	for _, name := range names {
		out = append(out, &shard.Shard{Cache: k8s, Client: k8s, Namespace: ns.Name, Kind: "watch", Identity: name,
			LeaseDuration: 15 * time.Second, Clock: clk})
	}
	return out
}

// syncAll has each replica sync once, in turn, and returns who keeps what.
func syncAll(t *testing.T, items []string, shards ...*shard.Shard) map[string][]string {
	t.Helper()
	held := map[string][]string{}
	for _, s := range shards {
		keep, drop, err := s.Sync(context.Background(), items)
		if err != nil {
			t.Fatalf("%s: %v", s.Identity, err)
		}
		for _, item := range drop {
			if err := s.Release(context.Background(), item); err != nil {
				t.Fatal(err)
			}
		}
		for _, item := range keep {
			held[item] = append(held[item], s.Identity)
		}
	}
	return held
}

// holders checks that each item is held by one replica at most, and
// counts each replica's items.
func holders(t *testing.T, items []string, shards ...*shard.Shard) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for _, item := range items {
		var by []string
		for _, s := range shards {
			if s.Holds(item) {
				by = append(by, s.Identity)
			}
		}
		if len(by) > 1 {
			t.Errorf("%s is held by %v at once", item, by)
		}
		for _, b := range by {
			counts[b]++
		}
	}
	return counts
}

// TestItemsAreDividedAndTakenOver: replicas divide the items evenly, each
// item held by one; a replica that stops renewing has its items taken by
// the others once its Leases expire, and not before; one that joins gets
// its share from the others; one that leaves gives its items back at once.
func TestItemsAreDividedAndTakenOver(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	s := replicas(t, clk, "a", "b", "c", "d")
	a, b, c, d := s[0], s[1], s[2], s[3]
	items := make([]string, 10)
	for i := range items {
		items[i] = fmt.Sprintf("item-%d", i)
	}
	// Until each has joined, the first take more than their share; a
	// few rounds settle it.
	for range 3 {
		syncAll(t, items, a, b, c)
	}
	counts := holders(t, items, a, b, c)
	if counts["a"]+counts["b"]+counts["c"] != 10 || counts["a"] > 4 || counts["b"] > 4 || counts["c"] > 4 {
		t.Fatalf("three replicas hold %v of 10 items, want all, at most 4 each", counts)
	}

	// c stops renewing. Before its Leases expire nobody takes its items.
	gone := counts["c"]
	clk.Step(10 * time.Second)
	syncAll(t, items, a, b)
	if counts := holders(t, items, a, b); counts["a"]+counts["b"] != 10-gone {
		t.Errorf("before c's Leases expire, a and b hold %v", counts)
	}
	clk.Step(6 * time.Second)
	for range 2 {
		syncAll(t, items, a, b)
	}
	if counts := holders(t, items, a, b); counts["a"]+counts["b"] != 10 || counts["a"] != 5 {
		t.Errorf("after c's Leases expired, a and b hold %v, want 5 each", counts)
	}

	// d joins: the others give it its share.
	for range 3 {
		clk.Step(time.Second)
		syncAll(t, items, a, b, d)
	}
	if counts := holders(t, items, a, b, d); counts["a"]+counts["b"]+counts["d"] != 10 || counts["d"] < 2 || counts["a"] > 4 || counts["b"] > 4 {
		t.Errorf("after d joined: %v, want at most a share of 4 each, and d the rest", counts)
	}

	// b leaves on purpose: its items move at the next sync, not after a
	// lease duration.
	if err := b.Leave(context.Background()); err != nil {
		t.Fatal(err)
	}
	syncAll(t, items, a, d)
	syncAll(t, items, a, d)
	if counts := holders(t, items, a, b, d); counts["a"]+counts["d"] != 10 || counts["b"] != 0 {
		t.Errorf("after b left: %v", counts)
	}

	// An item that is gone is dropped and its Lease removed.
	keep, drop, err := a.Sync(context.Background(), items[1:])
	if err != nil {
		t.Fatal(err)
	}
	if a.Holds(items[0]) && !slices.Contains(drop, items[0]) || slices.Contains(keep, items[0]) {
		t.Errorf("a keeps %v and drops %v; item-0 is gone", keep, drop)
	}
}
