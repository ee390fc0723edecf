package tasks

import (
	"context"
	"fmt"
	"sync/atomic"
)

// Totals bound the items of a kind that run on all the replicas together,
// beside each namespace's quota (Kind.PerNamespace): what the control
// plane was measured to hold, and the share of it strangers (web UI
// accounts) may take. Zero is no bound. Each kind strangers run has its
// own: watches (--max-watches-total, --max-account-watches-total),
// transfers (--max-account-transfers-total); expectations, once they are
// a kind, take a --max-account-expectations-total here the same way.
type Totals struct {
	// All is the most items that run in all namespaces. The operator's
	// namespaces take its places first, so strangers never push their
	// items out.
	All int
	// Strangers is the most items of web UI accounts' namespaces that run,
	// set below All.
	Strangers int
	// IsStranger says whether a namespace is a web UI account's
	// (tenants.Kinds.IsAccount); nil takes none for one.
	IsStranger func(ctx context.Context, namespace string) bool
}

// Wait says whether an item runs or waits for a place, and which bound
// holds it back.
type Wait uint32

const (
	// Runs says the item has its place.
	Runs Wait = iota
	// InNamespace says its namespace runs Kind.PerNamespace items.
	InNamespace
	// Strangers says web UI accounts run Totals.Strangers items in all.
	Strangers
	// Total says all namespaces run Totals.All items.
	Total
)

// Why says, in a status message, why an item waits for a total (w is
// Strangers or Total); noun names the kind's items ("watches").
func (t Totals) Why(w Wait, noun string) string {
	if w == Strangers {
		return fmt.Sprintf("web UI accounts run %d %s in all, the most this cluster lets them; the oldest run first", t.Strangers, noun)
	}
	return fmt.Sprintf("the cluster runs %d %s, the most it holds; the operator's run first, then web UI accounts', the oldest first", t.All, noun)
}

// Place is what Queue last told a task, read by its steps while syncs
// write it.
type Place struct{ w atomic.Uint32 }

// Set records w and says what it was.
func (p *Place) Set(w Wait) (was Wait) { return Wait(p.w.Swap(uint32(w))) }

// Get is the Wait last set (Runs before any).
func (p *Place) Get() Wait { return Wait(p.w.Load()) }

// places says which items wait for a place, and for which bound, from
// items in List's order (the oldest first): the items past their
// namespace's PerNamespace wait; of the others, the operator's namespaces'
// take the Totals.All places first, then the web UI accounts' take what
// is left, up to Totals.Strangers. Idle and Free items take no place.
// Every replica computes it from the same list (its cache's), so all
// agree on which items run, whichever replica holds them. Items that
// run are not in the map.
func (k *Kind[T]) places(ctx context.Context, items []Item) map[string]Wait {
	waits := map[string]Wait{}
	inNamespace := map[string]int{}
	stranger := map[string]bool{}
	isStranger := func(ns string) bool {
		s, ok := stranger[ns]
		if !ok {
			s = k.Totals.IsStranger != nil && k.Totals.IsStranger(ctx, ns)
			stranger[ns] = s
		}
		return s
	}
	all, strangers := 0, 0
	// The operator's items first, then the strangers': a namespace is all
	// one or the other, so each keeps its own order.
	for _, strangersPass := range []bool{false, true} {
		for _, it := range items {
			if it.Idle || it.Free || isStranger(it.Namespace) != strangersPass {
				continue
			}
			inNamespace[it.Namespace]++
			switch {
			case k.PerNamespace > 0 && inNamespace[it.Namespace] > k.PerNamespace:
				waits[it.UID] = InNamespace
			case strangersPass && k.Totals.Strangers > 0 && strangers >= k.Totals.Strangers:
				waits[it.UID] = Strangers
			case k.Totals.All > 0 && all >= k.Totals.All:
				waits[it.UID] = Total
			default:
				all++
				if strangersPass {
					strangers++
				}
			}
		}
	}
	return waits
}
