package worker_test

import (
	"context"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/worker/shard"
)

// TestOneMemberLeasePerReplica: a worker replica renews one member Lease
// for every kind of work it runs (watches, transfers, audit sinks, the
// sweep of uploads), not one each.
func TestOneMemberLeasePerReplica(t *testing.T) {
	t.Parallel()
	startWorker(t)
	ns := workerNamespace(t)
	mine := func() int {
		var leases coordinationv1.LeaseList
		must(t, k8s.List(context.Background(), &leases, client.InNamespace(ns), client.HasLabels{shard.LabelMember}))
		n := 0
		for _, l := range leases.Items {
			if h := l.Spec.HolderIdentity; h != nil && *h == "w1" {
				n++
			}
		}
		return n
	}
	eventually(t, "the replica renews its membership", func() bool { return mine() > 0 })
	if n := mine(); n != 1 {
		t.Errorf("the replica has %d member Leases, want one", n)
	}
}
