package tasks

import (
	"context"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestPlaces: which items wait, and for which bound, from the list in
// its order.
func TestPlaces(t *testing.T) {
	// Items are "namespace/uid"; namespaces starting "acct" are strangers'.
	list := func(names ...string) []Item {
		var items []Item
		for _, n := range names {
			ns, uid, _ := strings.Cut(n, "/")
			items = append(items, Item{UID: uid, Namespace: ns})
		}
		return items
	}
	stranger := func(_ context.Context, ns string) bool { return strings.HasPrefix(ns, "acct") }
	for _, tc := range []struct {
		name         string
		perNamespace int
		totals       Totals
		items        []Item
		want         map[string]Wait
	}{
		{name: "no bounds: everything runs", items: list("ops/a", "acct-1/b"), want: map[string]Wait{}},
		{name: "a namespace's newest past its quota", perNamespace: 2, items: list("ops/a", "ops/b", "acct-1/c", "ops/d"),
			want: map[string]Wait{"d": InNamespace}},
		{name: "the strangers' oldest take their total", totals: Totals{All: 10, Strangers: 2},
			items: list("acct-1/a", "ops/b", "acct-2/c", "acct-1/d", "acct-3/e"),
			want:  map[string]Wait{"d": Strangers, "e": Strangers}},
		{name: "the operator's newer watches before the strangers' older", totals: Totals{All: 3, Strangers: 2},
			items: list("acct-1/a", "acct-2/b", "ops/c", "ops/d", "other/e", "other/f"),
			want:  map[string]Wait{"a": Total, "b": Total, "f": Total}},
		{name: "the strangers get what the operator leaves", totals: Totals{All: 2, Strangers: 2},
			items: list("acct-1/a", "acct-2/b", "ops/c"),
			want:  map[string]Wait{"b": Total}},
		{name: "items past their namespace's quota take no total's place", perNamespace: 1, totals: Totals{All: 2},
			items: list("ops/a", "ops/b", "other/c", "other/d"),
			want:  map[string]Wait{"b": InNamespace, "d": InNamespace}},
		{name: "nor do they take the strangers'", perNamespace: 1, totals: Totals{All: 10, Strangers: 2},
			items: list("acct-1/a", "acct-1/b", "acct-2/c", "acct-3/d"),
			want:  map[string]Wait{"b": InNamespace, "d": Strangers}},
		{name: "idle and free items take no place", totals: Totals{All: 1, Strangers: 1},
			items: append([]Item{{UID: "idle", Namespace: "ops", Idle: true}, {UID: "free", Namespace: "acct-1", Free: true}}, list("acct-1/a", "acct-2/b")...),
			want:  map[string]Wait{"b": Strangers}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.totals.IsStranger = stranger
			k := &Kind[Task]{PerNamespace: tc.perNamespace, Totals: tc.totals}
			if got := k.places(context.Background(), tc.items); !maps.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestByAgeIsOneOrder: objects made in the same second, of the same name in
// different namespaces, sort the same whatever order a replica's cache
// lists them in, so that every replica gives the totals' places alike.
func TestByAgeIsOneOrder(t *testing.T) {
	at := metav1.NewTime(time.Unix(1700000000, 0))
	var objs []*metav1.ObjectMeta
	for _, ns := range []string{"acct-1", "acct-2", "ops", "other"} {
		for _, name := range []string{"in", "out"} {
			objs = append(objs, &metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name), CreationTimestamp: at})
		}
	}
	objs = append(objs, &metav1.ObjectMeta{Namespace: "late", Name: "a", UID: "0", CreationTimestamp: metav1.NewTime(at.Add(time.Second))})
	byAge := func(a, b *metav1.ObjectMeta) int { return ByAge(a, b) }
	want := slices.Clone(objs)
	slices.SortFunc(want, byAge)
	for range 20 {
		got := slices.Clone(objs)
		rand.Shuffle(len(got), func(i, j int) { got[i], got[j] = got[j], got[i] })
		slices.SortFunc(got, byAge)
		if !slices.Equal(got, want) {
			t.Fatalf("two orders of the same objects")
		}
	}
	if want[len(want)-1].Namespace != "late" || want[0].Name != "in" || want[len(want)-2].Name != "out" {
		t.Errorf("not oldest first, then by name: %v", want)
	}
}
