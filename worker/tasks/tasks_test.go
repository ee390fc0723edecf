package tasks_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/worker/shard"
	"github.com/sftpgate/sftpgate/worker/statestore"
	"github.com/sftpgate/sftpgate/worker/tasks"
)

// The test kit's, as every test package has them.
var (
	must       = testkit.Must
	eventually = testkit.Eventually
)

var k8s client.Client

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, testcluster.Client(&k8s)))
}

// board records what the tasks of every replica do.
type board struct {
	mu      sync.Mutex
	running map[string]string // item: replica
	twice   []string
	stopped map[string]int
	waits   map[string]bool
}

// task is an item's work on one replica: it says it runs, and when it
// stops.
type task struct {
	b        *board
	item, by string
	steps    atomic.Int32
}

func (t *task) Step(context.Context) (time.Duration, bool) {
	t.b.mu.Lock()
	defer t.b.mu.Unlock()
	if by, ok := t.b.running[t.item]; ok && by != t.by {
		t.b.twice = append(t.b.twice, t.item)
	}
	t.b.running[t.item] = t.by
	t.steps.Add(1)
	return 50 * time.Millisecond, false
}

func (t *task) Stop(context.Context) {
	t.b.mu.Lock()
	defer t.b.mu.Unlock()
	if t.b.running[t.item] == t.by {
		delete(t.b.running, t.item)
	}
	t.b.stopped[t.item]++
}

func (b *board) owners() map[string]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]string{}
	for k, v := range b.running {
		out[k] = v
	}
	return out
}

// TestKind: two replicas run each item once between them, the newest of a
// namespace past its quota waiting; a replica that stops has its tasks
// store what they hold, and the other takes them up at once; the states
// of deleted items are removed.
func TestKind(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "tasks-"}}
	must(t, k8s.Create(context.Background(), ns))
	b := &board{running: map[string]string{}, stopped: map[string]int{}, waits: map[string]bool{}}
	var items atomic.Pointer[[]tasks.Item]
	set := func(n int) {
		var list []tasks.Item
		for i := range n {
			list = append(list, tasks.Item{UID: fmt.Sprintf("item-%d", i), Namespace: fmt.Sprintf("team-%d", i%2)})
		}
		items.Store(&list)
	}
	set(6)
	states := &statestore.Store{Client: k8s, Namespace: ns.Name, Kind: "test"}
	replica := func(name string) (*tasks.Kind[*task], context.CancelFunc, chan error) {
		k := &tasks.Kind[*task]{}
		*k = tasks.Kind[*task]{Name: "test", States: states, PerNamespace: 2, Interval: 100 * time.Millisecond,
			Shard: &shard.Shard{Cache: k8s, Client: k8s, Namespace: ns.Name, Kind: "test", Identity: name, LeaseDuration: 15 * time.Second,
				SettleTime: 200 * time.Millisecond},
			List:  func(context.Context) ([]tasks.Item, error) { return *items.Load(), nil },
			Start: func(it tasks.Item, _ func()) *task { return &task{b: b, item: it.UID, by: name} },
			Queue: func(t *task, w tasks.Wait) {
				b.mu.Lock()
				b.waits[t.item] = w != tasks.Runs
				b.mu.Unlock()
				// As a transfer that stops waiting does.
				k.Wake(t.item)
			}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- k.Run(ctx) }()
		return k, cancel, done
	}
	_, stopA, doneA := replica("a")
	_, stopB, doneB := replica("b")
	defer func() {
		stopB()
		must(t, <-doneB)
	}()
	eventually(t, "both replicas run the six items", func() bool {
		o := b.owners()
		n := map[string]int{}
		for _, by := range o {
			n[by]++
		}
		return len(o) == 6 && n["a"] > 0 && n["b"] > 0
	})
	b.mu.Lock()
	if len(b.twice) > 0 {
		t.Errorf("items run on two replicas at once: %v", b.twice)
	}
	// Of each namespace's three, the newest waits.
	if !b.waits["item-4"] || !b.waits["item-5"] || b.waits["item-0"] || b.waits["item-3"] {
		t.Errorf("waiting for the quota: %v", b.waits)
	}
	b.mu.Unlock()

	// a stops: its tasks store what they hold, b takes them at once (no
	// lease duration passes).
	must(t, states.Save(context.Background(), "item-9", "team-1", []byte("left by a deleted item"), new(statestore.Version)))
	stopA()
	must(t, <-doneA)
	eventually(t, "b runs every item", func() bool {
		o := b.owners()
		for _, by := range o {
			if by != "b" {
				return false
			}
		}
		return len(o) == 6
	})
	b.mu.Lock()
	stops := len(b.stopped)
	b.mu.Unlock()
	if stops == 0 {
		t.Error("a's tasks did not stop")
	}
	// Items deleted: their tasks stop, and what was stored for them goes.
	set(2)
	eventually(t, "the deleted items' tasks stop and their states go", func() bool {
		keys, err := states.Keys(context.Background())
		must(t, err)
		return len(b.owners()) == 2 && len(keys) == 0
	})
}
