package worker_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/internal/tempname"
	"github.com/sftpgate/sftpgate/internal/uploadrecord"
	"github.com/sftpgate/sftpgate/worker"
	"github.com/sftpgate/sftpgate/worker/shard"
)

// TestExpiredUploadsRemoved: of two replicas, the one holding the sweep
// removes an expired upload's partial file and record, and an upload
// still under way stays; once that replica stops, the other sweeps.
func TestExpiredUploadsRemoved(t *testing.T) {
	tn := newTenant(t)
	ctx := context.Background()
	var conn v1alpha1.SftpConnection
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: tn.ns, Name: "box"}, &conn))
	// A namespace of their own, where no other test's replica competes.
	const ns = "sftpgate-upload-expiry-test"
	must(t, testcluster.EnsureNamespace(ctx, restConfig, ns))
	records := &uploadrecord.Store{Client: k8s, Namespace: ns}
	// upload makes a record and its partial file, expired long ago or not.
	upload := func(expired bool) (*uploadrecord.Record, string) {
		id := uploadrecord.NewID()
		partial := tempname.For(filepath.Join(tn.sshd.Dir, "in"), "upload/"+id)
		must(t, os.WriteFile(partial, []byte("half of it"), 0o644))
		expires := time.Now().Add(time.Hour)
		if expired {
			expires = time.Now().Add(-time.Hour)
		}
		r := &uploadrecord.Record{ID: id, Namespace: tn.ns, Connection: "box", ConnectionUID: conn.UID, Owner: "someone",
			Target: filepath.Join(tn.sshd.Dir, "in", "file.bin"), Partial: partial, Size: 100,
			Created: time.Now().Add(-25 * time.Hour), Expires: expires}
		must(t, records.Create(ctx, r))
		return r, partial
	}
	gone := func(r *uploadrecord.Record, partial string) bool {
		_, statErr := os.Stat(partial)
		_, err := records.Get(ctx, r.ID)
		return os.IsNotExist(statErr) && errors.Is(err, uploadrecord.ErrNotFound)
	}
	inNamespace := func(o *worker.Options) { o.Namespace = ns }
	stops := map[string]func(){"sweeper-a": runWorker(t, "sweeper-a", inNamespace), "sweeper-b": runWorker(t, "sweeper-b", inNamespace)}
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()

	live, livePartial := upload(false)
	old, oldPartial := upload(true)
	eventually(t, "the expired upload is removed", func() bool { return gone(old, oldPartial) })
	if gone(live, livePartial) {
		t.Error("an upload under way was removed")
	}
	// Stop the replica that holds the sweep.
	var leases coordinationv1.LeaseList
	must(t, k8s.List(ctx, &leases, client.InNamespace(ns), client.MatchingLabels{shard.LabelBucket: "upload"}))
	if len(leases.Items) != 1 {
		t.Fatalf("%d Leases for the sweep's one item", len(leases.Items))
	}
	var holder string
	if h := leases.Items[0].Spec.HolderIdentity; h != nil {
		holder = *h
	}
	stop, ours := stops[holder]
	if !ours {
		t.Fatalf("the sweep is held by %q, not by this test's replicas", holder)
	}
	stop()
	old, oldPartial = upload(true)
	eventually(t, "the other replica removes the next", func() bool { return gone(old, oldPartial) })
	if gone(live, livePartial) {
		t.Error("an upload under way was removed")
	}
}
