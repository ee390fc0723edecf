package tasks_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sftpgate/sftpgate/hack/fixtures/testleases"
	"github.com/sftpgate/sftpgate/worker/shard"
	"github.com/sftpgate/sftpgate/worker/tasks"
)

// counter is a task that counts its steps, and whether the kit told it
// if it waits before its first step.
type counter struct {
	by    string
	steps atomic.Int32
	told  atomic.Bool
	early atomic.Bool // stepped before it was told
	waits atomic.Bool
	stops atomic.Int32
}

func (c *counter) Step(context.Context) (time.Duration, bool) {
	if !c.told.Load() {
		c.early.Store(true)
	}
	c.steps.Add(1)
	return 50 * time.Millisecond, false
}

func (c *counter) Stop(context.Context) { c.stops.Add(1) }

// counters are the tasks of every replica of a test, by item.
type counters struct {
	mu     sync.Mutex
	byItem map[string][]*counter
}

func (cs *counters) start(it tasks.Item, by string) *counter {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c := &counter{by: by}
	cs.byItem[it.UID] = append(cs.byItem[it.UID], c)
	return c
}

// all is every task made, of every item.
func (cs *counters) all() []*counter {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var out []*counter
	for _, list := range cs.byItem {
		out = append(out, list...)
	}
	return out
}

// runKind runs k until the test ends.
func runKind[T tasks.Task](t *testing.T, k *tasks.Kind[T]) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		must(t, <-done)
	})
}

// distinctItems is n items of namespace ns that fall into n buckets.
func distinctItems(n int, ns string) []tasks.Item {
	var items []tasks.Item
	seen := map[string]bool{}
	s := &shard.Shard{}
	for i := 0; len(items) < n; i++ {
		uid := fmt.Sprintf("item-%d", i)
		if b := s.Bucket(uid); !seen[b] {
			seen[b] = true
			items = append(items, tasks.Item{UID: uid, Namespace: ns})
		}
	}
	return items
}

// TestReplicasStartingTogether: three replicas started together, each
// joining when it can (a second or so apart, as their caches sync),
// start a third of the items each, and no item starts twice: no bucket
// changes hands (each bucket's Lease is written once).
func TestReplicasStartingTogether(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "tasks-"}}
	must(t, k8s.Create(context.Background(), ns))
	items := distinctItems(shard.DefaultBuckets, "team")
	writes := testleases.Wrap(k8s)
	clk := clocktesting.NewFakeClock(time.Now())
	cs := &counters{byItem: map[string][]*counter{}}
	kinds := map[string]*tasks.Kind[*counter]{}
	for _, name := range []string{"a", "b", "c"} {
		k := &tasks.Kind[*counter]{Name: "test", Interval: 100 * time.Millisecond,
			Shard: &shard.Shard{Cache: k8s, Client: writes, Namespace: ns.Name, Kind: "test", Identity: name, LeaseDuration: 15 * time.Second,
				SettleTime: 5 * time.Second, Clock: clk},
			List:  func(context.Context) ([]tasks.Item, error) { return items, nil },
			Start: func(it tasks.Item, _ func()) *counter { return cs.start(it, name) }}
		kinds[name] = k
		runKind(t, k)
		// The next starts once this one has renewed its membership a few
		// times: it has synced.
		eventually(t, name+" renews its membership", func() bool { return renewals(writes, name) >= 3 })
		clk.Step(time.Second)
	}
	clk.Step(5 * time.Second)
	share := (len(items) + 2) / 3
	eventually(t, "the replicas run every item, none more than its share", func() bool {
		total := 0
		for _, k := range kinds {
			n := 0
			k.Each(func(*counter) { n++ })
			if n > share {
				return false
			}
			total += n
		}
		return total == len(items)
	})
	buckets, total := 0, 0
	for name, n := range writes.Writes() {
		if strings.Contains(name, "-bucket-") {
			buckets, total = buckets+1, total+n
		}
	}
	started := len(cs.all())
	t.Logf("%d tasks started for %d items; %d bucket Leases written %d times", started, len(items), buckets, total)
	if started != len(items) {
		t.Errorf("%d tasks started for %d items, want one each", started, len(items))
	}
	if total != len(items) {
		t.Errorf("%d bucket Leases written %d times, want %d once each", buckets, total, len(items))
	}
}

// renewals is how many times identity's member Lease was written.
func renewals(writes *testleases.Client, identity string) int {
	n := 0
	for name, w := range writes.Writes() {
		if strings.HasSuffix(name, "member-"+identity) {
			n += w
		}
	}
	return n
}

// TestQueuedTasksAreToldFirst: a task is told whether it waits for its
// namespace's quota before its first step, so that a queued item never
// runs first and is queued after.
func TestQueuedTasksAreToldFirst(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "tasks-"}}
	must(t, k8s.Create(context.Background(), ns))
	// Many: the kit starts them in a row, and a task's loop that ran
	// before it was told would be seen.
	items := distinctItems(shard.DefaultBuckets, "team")
	cs := &counters{byItem: map[string][]*counter{}}
	runKind(t, &tasks.Kind[*counter]{Name: "test", Interval: 100 * time.Millisecond, PerNamespace: 2,
		Shard: &shard.Shard{Cache: k8s, Client: k8s, Namespace: ns.Name, Kind: "test", Identity: "a", LeaseDuration: 15 * time.Second,
			SettleTime: 100 * time.Millisecond},
		List:  func(context.Context) ([]tasks.Item, error) { return items, nil },
		Start: func(it tasks.Item, _ func()) *counter { return cs.start(it, "a") },
		Queue: func(c *counter, w tasks.Wait) { c.waits.Store(w != tasks.Runs); c.told.Store(true) }})
	eventually(t, "every item steps", func() bool {
		all := cs.all()
		for _, c := range all {
			if c.steps.Load() == 0 {
				return false
			}
		}
		return len(all) == len(items)
	})
	waiting := 0
	for uid, list := range cs.byItem {
		for _, c := range list {
			if c.early.Load() {
				t.Errorf("%s stepped before it was told whether it waits", uid)
			}
			if c.waits.Load() {
				waiting++
			}
		}
	}
	if waiting != len(items)-2 {
		t.Errorf("%d of %d items wait, want all but two", waiting, len(items))
	}
}

// TestStoppedWhenTheMembershipLapses: a replica whose membership lapses
// (its Lease writes fail, as with an API server too slow to answer) stops
// its tasks, each storing what it holds once, and cancels a step under
// way: another replica may take the items as soon as the lease ends, and
// two must never run one. Once it renews it starts them again.
func TestStoppedWhenTheMembershipLapses(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "tasks-"}}
	must(t, k8s.Create(context.Background(), ns))
	items := distinctItems(4, "team")
	clk := clocktesting.NewFakeClock(time.Now())
	cs := &counters{byItem: map[string][]*counter{}}
	leases := testleases.Wrap(k8s)
	a := &tasks.Kind[*counter]{Name: "test", Interval: 100 * time.Millisecond,
		Shard: &shard.Shard{Cache: k8s, Client: leases, Namespace: ns.Name, Kind: "test", Identity: "a", LeaseDuration: 15 * time.Second,
			SettleTime: time.Second, Clock: clk},
		List:  func(context.Context) ([]tasks.Item, error) { return items, nil },
		Start: func(it tasks.Item, _ func()) *counter { return cs.start(it, "a") }}
	runKind(t, a)
	running := func() int {
		n := 0
		a.Each(func(*counter) { n++ })
		return n
	}
	eventually(t, "a renews its membership", func() bool { return renewals(leases, "a") > 0 })
	clk.Step(2 * time.Second)
	eventually(t, "a runs every item", func() bool { return running() == len(items) })

	leases.Fail(true)
	clk.Step(16 * time.Second)
	eventually(t, "a's tasks stop", func() bool { return running() == 0 })
	for _, c := range cs.all() {
		if n := c.stops.Load(); n != 1 {
			t.Errorf("a task stopped %d times in a lapse, want once", n)
		}
	}
	leases.Fail(false)
	renewed := renewals(leases, "a")
	eventually(t, "a renews", func() bool { return renewals(leases, "a") > renewed })
	clk.Step(2 * time.Second)
	eventually(t, "a runs every item again", func() bool { return running() == len(items) })
}
