package transfers

import (
	"fmt"

	"github.com/sftpgate/sftpgate/worker/tasks"
)

// DefaultMaxAccountRunningTotal is --max-account-transfers-total's default:
// the transfers the scale bench runs at once at its default (10 namespaces
// of 5), ten accounts' worth. A running transfer writes its plan and
// status every few seconds, so strangers' together are bounded; they end,
// so the others wait their turn rather than keep accounts from signing up.
const DefaultMaxAccountRunningTotal = 50

// waiting records in f why a transfer waits for a place (w): its
// namespace's (Queued), or the accounts' total (OverQuota).
func (r *Runner) waiting(w tasks.Wait, f *facts) {
	if w == tasks.InNamespace {
		f.queued = fmt.Sprintf("the namespace runs %d transfers, the most it may; this one starts when one of them ends", r.Limits.MaxRunningPerNamespace)
		return
	}
	f.overQuota = r.kind.Totals.Why(w, "transfers") + "; this one starts when one of them ends"
}
