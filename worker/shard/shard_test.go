package shard_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testleases"
	"github.com/sftpgate/sftpgate/worker/shard"
)

// The test kit's, as every test package has them.
var must = testkit.Must

var k8s client.Client

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, testcluster.Client(&k8s)))
}

// settle is the replicas' SettleTime here: less than a third of their
// lease duration, so that a step of the clock by it settles them and
// lapses none.
const settle = 5 * time.Second

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
			LeaseDuration: 15 * time.Second, SettleTime: settle, Clock: clk})
	}
	return out
}

// syncAll has each replica sync once, in turn, and returns who keeps what.
func syncAll(t *testing.T, items []string, shards ...*shard.Shard) map[string][]string {
	t.Helper()
	held := map[string][]string{}
	for _, s := range shards {
		keep, _, err := s.Sync(context.Background(), items)
		if err != nil {
			t.Fatalf("%s: %v", s.Identity, err)
		}
		must(t, s.Settle(context.Background()))
		for _, item := range keep {
			held[item] = append(held[item], s.Identity)
		}
	}
	return held
}

// join has the replicas join (each syncs once, taking nothing), then
// settle: the clock moves on by the settle time.
func join(t *testing.T, clk *clocktesting.FakeClock, items []string, shards ...*shard.Shard) {
	t.Helper()
	if held := syncAll(t, items, shards...); len(held) > 0 {
		t.Errorf("replicas took %v as they joined", held)
	}
	clk.Step(settle)
}

// syncRounds has the replicas sync in turns until every item is held and
// a round moves nothing, and says how many each holds.
func syncRounds(t *testing.T, items []string, shards ...*shard.Shard) map[string]int {
	t.Helper()
	var last map[string]int
	for range 50 {
		syncAll(t, items, shards...)
		counts := holders(t, items, shards...)
		total := 0
		for _, n := range counts {
			total += n
		}
		if total == len(items) && maps.Equal(counts, last) {
			return counts
		}
		last = counts
	}
	t.Fatalf("after 50 rounds the replicas hold %v of %d items", last, len(items))
	return nil
}

// distinct is n items that fall into n buckets: each item alone in its
// bucket, so that replicas share items as they share buckets.
func distinct(s *shard.Shard, n int) []string {
	var items []string
	seen := map[string]bool{}
	for i := 0; len(items) < n; i++ {
		item := fmt.Sprintf("item-%d", i)
		if b := s.Bucket(item); !seen[b] {
			seen[b] = true
			items = append(items, item)
		}
	}
	return items
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
// the others once its membership expires, not before, at their next sync;
// one that joins gets its share from the others, once it settled; one
// that leaves gives its items back at once.
func TestItemsAreDividedAndTakenOver(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	s := replicas(t, clk, "a", "b", "c", "d")
	a, b, c, d := s[0], s[1], s[2], s[3]
	items := distinct(a, 10)
	join(t, clk, items, a, b, c)
	counts := syncRounds(t, items, a, b, c)
	if counts["a"]+counts["b"]+counts["c"] != 10 || counts["a"] > 4 || counts["b"] > 4 || counts["c"] > 4 {
		t.Fatalf("three replicas hold %v of 10 items, want all, at most 4 each", counts)
	}

	// c stops renewing. Before its membership expires nobody takes its
	// items; after, the others take them all at their next sync.
	gone := counts["c"]
	clk.Step(10 * time.Second)
	syncAll(t, items, a, b)
	if counts := holders(t, items, a, b); counts["a"]+counts["b"] != 10-gone {
		t.Errorf("before c's membership expires, a and b hold %v", counts)
	}
	clk.Step(6 * time.Second)
	syncAll(t, items, a, b)
	if counts := holders(t, items, a, b); counts["a"]+counts["b"] != 10 || counts["a"] != 5 {
		t.Errorf("a sync after c's membership expired, a and b hold %v, want 5 each", counts)
	}

	// d joins: once it settled, the others give it its share, a step at a
	// time, and it takes it.
	for round := 0; ; round++ {
		clk.Step(time.Second)
		syncAll(t, items, a, b, d)
		counts := holders(t, items, a, b, d)
		if counts["a"]+counts["b"]+counts["d"] == 10 && counts["d"] >= 2 && counts["a"] <= 4 && counts["b"] <= 4 {
			break
		}
		if round == 30 {
			t.Fatalf("after d joined: %v, want at most a share of 4 each, and d the rest", counts)
		}
	}

	// b leaves on purpose: its items move at the next sync, not after a
	// lease duration.
	if err := b.Leave(context.Background()); err != nil {
		t.Fatal(err)
	}
	syncAll(t, items, a, d)
	if counts := holders(t, items, a, b, d); counts["a"]+counts["d"] != 10 || counts["b"] != 0 {
		t.Errorf("after b left: %v", counts)
	}

	// An item that is gone is dropped, and its bucket given back.
	keep, drop, err := a.Sync(context.Background(), items[1:])
	if err != nil {
		t.Fatal(err)
	}
	if a.Holds(items[0]) && !slices.Contains(drop, items[0]) || slices.Contains(keep, items[0]) {
		t.Errorf("a keeps %v and drops %v; item-0 is gone", keep, drop)
	}
}

// bucketVersions maps each bucket Lease of s's namespace to its
// resourceVersion.
func bucketVersions(t *testing.T, s *shard.Shard) map[string]string {
	t.Helper()
	var leases coordinationv1.LeaseList
	if err := k8s.List(context.Background(), &leases, client.InNamespace(s.Namespace), client.MatchingLabels{shard.LabelBucket: s.Kind}); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range leases.Items {
		out[l.Name] = l.ResourceVersion
	}
	return out
}

// TestRenewingWritesOnlyTheMembership: a replica keeps its items by
// renewing its own membership; their buckets' Leases are written when they
// change hands, not on every renewal.
func TestRenewingWritesOnlyTheMembership(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	s := replicas(t, clk, "a")
	a := s[0]
	items := distinct(a, 3)
	join(t, clk, items, a)
	syncRounds(t, items, a)
	before := bucketVersions(t, a)
	if len(before) != 3 {
		t.Fatalf("%d bucket Leases, want 3", len(before))
	}
	for range 5 {
		clk.Step(5 * time.Second)
		syncAll(t, items, a)
	}
	if after := bucketVersions(t, a); !maps.Equal(before, after) {
		t.Errorf("bucket Leases were written while nothing changed hands: %v, then %v", before, after)
	}
	if counts := holders(t, items, a); counts["a"] != 3 {
		t.Errorf("a holds %v", counts)
	}
}

// TestLapsedAndRestartedReplicas: a replica whose membership lapsed holds
// nothing until it syncs again, and then only what no one took meanwhile;
// a replica restarted under the same identity takes up at once the items
// still in its name, and gives the others their share once they settled.
func TestLapsedAndRestartedReplicas(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	s := replicas(t, clk, "a", "b")
	a, b := s[0], s[1]
	items := distinct(a, 2)
	join(t, clk, items, a)
	if counts := syncRounds(t, items, a); counts["a"] != 2 {
		t.Fatalf("a alone holds %v", counts)
	}
	// a is cut off for longer than a lease: it stops at once, and b takes
	// its items once a's membership has expired.
	clk.Step(16 * time.Second)
	if counts := holders(t, items, a); counts["a"] != 0 {
		t.Errorf("a, lapsed, still holds %v", counts)
	}
	join(t, clk, items, b)
	if counts := syncRounds(t, items, b); counts["b"] != 2 {
		t.Fatalf("b holds %v after a lapsed", counts)
	}
	// a comes back: it takes nothing b holds.
	_, drop, err := a.Sync(context.Background(), items)
	if err != nil {
		t.Fatal(err)
	}
	if counts := holders(t, items, a, b); counts["a"] != 0 || counts["b"] != 2 || len(drop) != 2 {
		t.Errorf("after a's return: %v, a dropped %v", counts, drop)
	}

	// b restarts (a new process, the same identity): its items are its
	// own at its first sync, before its old membership could expire; a
	// being back, it gives one back once a settled.
	restarted := &shard.Shard{Cache: k8s, Client: k8s, Namespace: b.Namespace, Kind: b.Kind, Identity: "b", LeaseDuration: 15 * time.Second,
		SettleTime: settle, Clock: clk}
	clk.Step(time.Second)
	keep, drop, err := restarted.Sync(context.Background(), items)
	if err != nil {
		t.Fatal(err)
	}
	if len(keep) != 2 || len(drop) != 0 {
		t.Errorf("the restarted b keeps %v and drops %v, want both and none", keep, drop)
	}
	must(t, restarted.Settle(context.Background()))
	clk.Step(settle)
	if counts := syncRounds(t, items, a, restarted); counts["a"] != 1 || counts["b"] != 1 {
		t.Errorf("a and the restarted b hold %v, want one each", counts)
	}
}

// takenMeanwhile is a client whose reads of a bucket's Lease let another
// replica ("c") take it first, on the version just read.
type takenMeanwhile struct {
	client.Client
	t *testing.T
}

func (c takenMeanwhile) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if l, ok := obj.(*coordinationv1.Lease); ok && l.Labels[shard.LabelBucket] != "" {
		theirs := l.DeepCopy()
		theirs.Spec.HolderIdentity = ptr.To("c")
		must(c.t, c.Update(ctx, theirs))
	}
	return nil
}

// TestRestartedReplicaAdoptsOnlyWhatNoOneTook: a replica restarted under
// the same identity adopts its buckets by writing each Lease on the
// version it read: one another replica took meanwhile is not its own too.
func TestRestartedReplicaAdoptsOnlyWhatNoOneTook(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	b := replicas(t, clk, "b")[0]
	items := distinct(b, 2)
	join(t, clk, items, b)
	if counts := syncRounds(t, items, b); counts["b"] != 2 {
		t.Fatalf("b alone holds %v", counts)
	}
	restarted := &shard.Shard{Cache: k8s, Client: takenMeanwhile{k8s, t}, Namespace: b.Namespace, Kind: b.Kind, Identity: "b",
		LeaseDuration: 15 * time.Second, SettleTime: settle, Clock: clk}
	clk.Step(time.Second)
	keep, _, err := restarted.Sync(context.Background(), items)
	if err != nil {
		t.Fatal(err)
	}
	if len(keep) != 0 {
		t.Errorf("the restarted b keeps %v, which c took as it adopted them", keep)
	}
}

// TestFreeBucketsAreTakenWhileAMemberFlaps: a member whose membership
// keeps beginning anew (it lapses and comes back) keeps the members from
// being stable, when free buckets wait; past twice the settle time they
// are taken anyway, so that no item is left to no one.
func TestFreeBucketsAreTakenWhileAMemberFlaps(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now())
	s := replicas(t, clk, "a", "f")
	a, f := s[0], s[1]
	items := distinct(a, 2)
	join(t, clk, items, a)
	syncAll(t, items, f) // f joins, and then only flaps
	flap := func() {
		var list coordinationv1.LeaseList
		must(t, k8s.List(ctx, &list, client.InNamespace(f.Namespace), client.HasLabels{shard.LabelMember}))
		for i := range list.Items {
			if l := &list.Items[i]; ptr.Deref(l.Spec.HolderIdentity, "") == "f" {
				now := metav1.NewMicroTime(clk.Now())
				l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
				must(t, k8s.Update(ctx, l))
			}
		}
	}
	for range 2 * settle / time.Second {
		flap()
		if counts := holders(t, items, a); counts["a"] != 0 {
			t.Fatalf("a took free buckets while f was new, within twice the settle time: %v", counts)
		}
		syncAll(t, items, a)
		clk.Step(time.Second)
	}
	for range 10 {
		flap()
		syncAll(t, items, a)
		clk.Step(time.Second)
	}
	if counts := holders(t, items, a); counts["a"] != len(items) {
		t.Errorf("past twice the settle time of f flapping, a holds %v of %d items", counts, len(items))
	}
}

// TestLeasesAreBoundedByBuckets: however many items, the Leases are the
// buckets' and the replicas'; every item is held by exactly one replica,
// and each replica's share is within a bucket or two of the others'.
func TestLeasesAreBoundedByBuckets(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	s := replicas(t, clk, "a", "b", "c")
	for _, r := range s {
		r.Buckets = 16
	}
	items := make([]string, 3000)
	for i := range items {
		items[i] = fmt.Sprintf("watch-%d", i)
	}
	join(t, clk, items, s...)
	counts := syncRounds(t, items, s...)
	if counts["a"]+counts["b"]+counts["c"] != len(items) {
		t.Errorf("the replicas hold %v of %d items", counts, len(items))
	}
	for name, n := range counts {
		if n < len(items)/3-2*len(items)/16 || n > len(items)/3+2*len(items)/16 {
			t.Errorf("%s holds %d of %d items: %v", name, n, len(items), counts)
		}
	}
	var leases coordinationv1.LeaseList
	must(t, k8s.List(context.Background(), &leases, client.InNamespace(s[0].Namespace)))
	if len(leases.Items) > 16+3 {
		t.Errorf("%d Leases for %d items in 16 buckets and 3 replicas", len(leases.Items), len(items))
	}
}

// TestReplicasThatCountBucketsOtherwise: while a live replica counts
// buckets otherwise (a rollout that changed --lease-buckets, or a replica
// of a version before buckets), no replica takes an item, so none is
// run twice.
func TestReplicasThatCountBucketsOtherwise(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	s := replicas(t, clk, "a", "b")
	a, b := s[0], s[1]
	b.Buckets = 32
	items := distinct(a, 4)
	if _, _, err := a.Sync(context.Background(), items); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Sync(context.Background(), items); err == nil {
		t.Error("b took items beside a replica that counts buckets otherwise")
	}
	if counts := holders(t, items, b); counts["b"] != 0 {
		t.Errorf("b holds %v", counts)
	}
	// Once b's membership expired, a goes on alone (its own lapsed too:
	// it settles anew).
	clk.Step(16 * time.Second)
	join(t, clk, items, a)
	if counts := syncRounds(t, items, a); counts["a"] != len(items) {
		t.Errorf("a alone holds %v", counts)
	}

	// A live replica of an earlier version, with a member Lease per kind,
	// does not see this version's members: while it lives a takes
	// nothing more, and what it holds goes on.
	now := metav1.NewMicroTime(clk.Now())
	must(t, k8s.Create(context.Background(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: "watch-member-old",
		Labels:      map[string]string{shard.LabelShard: "watch", shard.LabelMember: "watch"},
		Annotations: map[string]string{"sftpgate.dev/shard-buckets": "64"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("old"), LeaseDurationSeconds: ptr.To(int32(15)), RenewTime: &now}}))
	more := distinct(a, 2*len(items))
	keep, drop, err := a.Sync(context.Background(), more)
	if err == nil || len(keep) != len(items) || len(drop) != 0 {
		t.Errorf("beside a replica of an earlier version, a keeps %v and drops %v (%v), want what it held and an error", keep, drop, err)
	}
}

// bucketWrites is the bucket Leases among writes, and their writes in all.
func bucketWrites(writes map[string]int) (buckets, total int) {
	for name, n := range writes {
		if strings.Contains(name, "-bucket-") {
			buckets++
			total += n
		}
	}
	return buckets, total
}

// TestReplicasStartingTogetherTakeThirds: three replicas that start
// together, each syncing as soon as it can, take a third of the buckets
// each, and no bucket changes hands: each bucket's Lease is written once.
func TestReplicasStartingTogetherTakeThirds(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	s := replicas(t, clk, "a", "b", "c")
	writes := testleases.Wrap(k8s)
	for _, r := range s {
		r.Client = writes
	}
	items := distinct(s[0], shard.DefaultBuckets)
	// They come up a second apart, each syncing at once.
	for _, r := range s {
		syncAll(t, items, r)
		clk.Step(time.Second)
	}
	var counts map[string]int
	for round := 0; ; round++ {
		syncAll(t, items, s...)
		counts = holders(t, items, s...)
		if counts["a"]+counts["b"]+counts["c"] == len(items) {
			break
		}
		if round == 100 {
			t.Fatalf("after %d rounds the replicas hold %v of %d", round, counts, len(items))
		}
		clk.Step(time.Second)
	}
	// And then, for a while, nothing moves.
	for range 30 {
		clk.Step(time.Second)
		syncAll(t, items, s...)
	}
	buckets, total := bucketWrites(writes.Writes())
	t.Logf("%d bucket Leases written %d times; held %v", buckets, total, counts)
	if after := holders(t, items, s...); !maps.Equal(after, counts) {
		t.Errorf("the replicas held %v once every item was taken, then %v", counts, after)
	}
	for name, n := range counts {
		if share := (len(items) + 2) / 3; n > share || n < len(items)-2*share {
			t.Errorf("%s holds %d of %d items: %v", name, n, len(items), counts)
		}
	}
	if buckets != len(items) || total != len(items) {
		t.Errorf("%d bucket Leases were written %d times, want %d once each", buckets, total, len(items))
	}
}

// TestOneMembershipForEveryKind: the kinds of work of a replica share its
// one member Lease, renewed with one write each time, from the version it
// last wrote (read once, when it began); a kind that leaves gives its
// buckets back and leaves the membership to the others.
func TestOneMembershipForEveryKind(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "shard-"}}
	must(t, k8s.Create(context.Background(), namespace))
	leases := testleases.Wrap(k8s)
	m := &shard.Membership{Client: leases, Namespace: namespace.Name, Identity: "a", LeaseDuration: 15 * time.Second, Clock: clk}
	var kinds []*shard.Shard
	for _, kind := range []string{"sftpwatch", "transfer", "audit", "upload"} {
		kinds = append(kinds, &shard.Shard{Cache: k8s, Client: leases, Namespace: namespace.Name, Kind: kind, Identity: "a",
			Membership: m, LeaseDuration: 15 * time.Second, SettleTime: settle, Clock: clk})
	}
	items := distinct(kinds[0], 3)
	renewals := 0
	renew := func() {
		must(t, m.Renew(context.Background()))
		renewals++
	}
	renew()
	if held := syncAll(t, items, kinds...); len(held) > 0 {
		t.Errorf("the kinds took %v as they joined", held)
	}
	clk.Step(settle)
	renew()
	for _, k := range kinds {
		if counts := syncRounds(t, items, k); counts["a"] != len(items) {
			t.Errorf("%s holds %v", k.Kind, counts)
		}
	}
	for range 6 {
		clk.Step(5 * time.Second)
		renew()
		syncAll(t, items, kinds...)
	}
	must(t, kinds[0].Leave(context.Background()))

	var members coordinationv1.LeaseList
	must(t, k8s.List(context.Background(), &members, client.InNamespace(namespace.Name), client.HasLabels{shard.LabelMember}))
	if len(members.Items) != 1 {
		t.Errorf("%d member Leases for one replica of four kinds, want one", len(members.Items))
	}
	for _, l := range members.Items {
		name := l.Name
		if w, r := leases.Writes()[name], leases.Reads()[name]; w != renewals || r != 1 {
			t.Errorf("%s written %d times and read %d times in %d renewals, want one write each and one read", name, w, r, renewals)
		}
	}
	for i, k := range kinds {
		if counts := holders(t, items, k); counts["a"] != len(items) && i > 0 || counts["a"] != 0 && i == 0 {
			t.Errorf("after %s left, %s holds %v", kinds[0].Kind, k.Kind, counts)
		}
	}
}
