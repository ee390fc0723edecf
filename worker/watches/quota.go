package watches

import (
	"fmt"

	"github.com/sftpgate/sftpgate/worker/tasks"
)

// The defaults of --max-watches-total and --max-account-watches-total.
// The control plane holds 10,000 watches (the scale bench settles them on
// a small one, docs/benchmarks.md); the default is what the default
// deployment holds when one of its two worker replicas is lost and the
// other runs every watch within its 256Mi. Strangers take a third of it
// at most: with --max-watches-per-account (10) that is 100 web UI
// accounts, and the operator's own watches keep 2,000 places strangers
// never reach.
const (
	DefaultMaxWatchesTotal        = 3000
	DefaultMaxAccountWatchesTotal = 1000
)

// CheckTotals refuses totals that would let strangers take every place;
// zero is no bound.
func (l Limits) CheckTotals() error {
	all, strangers := l.MaxWatchesTotal, l.MaxAccountWatchesTotal
	switch {
	case all < 0 || strangers < 0:
		return fmt.Errorf("--max-watches-total (%d) and --max-account-watches-total (%d) are counts, 0 for no bound", all, strangers)
	case all > 0 && (strangers == 0 || strangers >= all):
		return fmt.Errorf("--max-account-watches-total (%d) must be set below --max-watches-total (%d)", strangers, all)
	}
	return nil
}

// queue tells w whether it waits for a place, and why; told anything
// new, it looks at once: one that stops waiting polls, one that starts
// stops polling, and its status says so.
func (r *Runner) queue(w *watcher, p tasks.Wait) {
	if w.place.Set(p) != p {
		r.kind.Wake(string(w.uid))
	}
}

// overQuota says why a watch waits for a place (w), for its OverQuota.
func (r *Runner) overQuota(w tasks.Wait) string {
	if w == tasks.InNamespace {
		return fmt.Sprintf("the namespace has more than %d watches; only its oldest run", r.Limits.MaxWatchesPerNamespace)
	}
	return r.kind.Totals.Why(w, "watches")
}
