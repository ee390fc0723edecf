package worker_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsink"
	"github.com/sftpgate/sftpgate/worker"
)

// TestTotals: past the cluster's totals (--max-watches-total,
// --max-account-watches-total, --max-account-transfers-total) the newer
// of strangers' (web UI accounts') watches and transfers wait, OverQuota,
// saying which total holds them, while the operator's run: an operator's
// new watch takes a stranger's place, never the other way round; once
// places free, those waiting run at once. Not parallel: the totals count
// every watch and transfer of the cluster, and its replica must be the
// only one.
func TestTotals(t *testing.T) {
	ctx := context.Background()
	srv, sink := testsftp.Start(t), testsink.Start(t)
	must(t, os.Mkdir(filepath.Join(srv.Dir, "in"), 0o755))
	tenant := func(prefix string, stranger bool) string {
		ns := testkit.Namespace(t, k8s, prefix)
		if stranger {
			var n corev1.Namespace
			must(t, k8s.Get(ctx, client.ObjectKey{Name: ns}, &n))
			metav1.SetMetaDataLabel(&n.ObjectMeta, v1alpha1.LabelAccount, "account-"+ns)
			must(t, k8s.Update(ctx, &n))
		}
		testkit.ReadyConnection(t, k8s, ns, "box", srv.Login())
		return ns
	}
	ops, alice, bob := tenant("totals-ops-", false), tenant("totals-alice-", true), tenant("totals-bob-", true)

	// What other tests left counts too: the totals are set above it.
	var accounts metav1.PartialObjectMetadataList
	accounts.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	must(t, k8s.List(ctx, &accounts, client.HasLabels{v1alpha1.LabelAccount}))
	stranger := map[string]bool{}
	for _, n := range accounts.Items {
		stranger[n.Name] = true
	}
	var watchList v1alpha1.SftpWatchList
	must(t, k8s.List(ctx, &watchList))
	strangersWatches := 0
	for _, w := range watchList.Items {
		if stranger[w.Namespace] {
			strangersWatches++
		}
	}
	var transferList v1alpha1.TransferList
	must(t, k8s.List(ctx, &transferList))
	strangersTransfers := 0
	for _, tr := range transferList.Items {
		if stranger[tr.Namespace] && !tr.Finished() {
			strangersTransfers++
		}
	}
	const ns = "sftpgate-totals-test"
	must(t, testcluster.EnsureNamespace(ctx, restConfig, ns))
	stop := runWorker(t, "totals", func(o *worker.Options) {
		o.Namespace = ns
		o.Limits.MaxWatchesTotal, o.Limits.MaxAccountWatchesTotal = len(watchList.Items)+4, strangersWatches+2
		o.Transfers.MaxAccountRunningTotal = strangersTransfers + 1
	})
	defer stop()

	// Names in the order made: objects made in one second take places by
	// name.
	watch := func(ns, name string) *v1alpha1.SftpWatch {
		w := &v1alpha1.SftpWatch{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.SftpWatchSpec{
			ConnectionRef: v1alpha1.ConnectionReference{Name: "box"}, Path: "/in", Sink: &v1alpha1.Destination{URI: sink.URL},
			PollInterval: &metav1.Duration{Duration: 5 * time.Second}}}
		must(t, k8s.Create(ctx, w))
		t.Cleanup(func() { _ = k8s.Delete(ctx, w) })
		return w
	}
	says := func(obj interface {
		client.Object
		GetConditions() *[]metav1.Condition
	}, reason, message string) {
		t.Helper()
		eventually(t, obj.GetName()+" says "+reason, func() bool {
			must(t, k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj))
			c := meta.FindStatusCondition(*obj.GetConditions(), v1alpha1.ConditionReady)
			return c != nil && c.ObservedGeneration == obj.GetGeneration() && c.Reason == reason && strings.Contains(c.Message, message)
		})
	}
	watching := func(ws ...*v1alpha1.SftpWatch) {
		t.Helper()
		for _, w := range ws {
			says(w, v1alpha1.ReasonWatching, "")
		}
	}

	// Alice's two take the strangers' places; Bob's waits.
	w1, w2 := watch(alice, "w1"), watch(alice, "w2")
	watching(w1, w2)
	w3 := watch(bob, "w3")
	says(w3, v1alpha1.ReasonOverQuota, "web UI accounts run 2 watches")
	// The operator's take what is left of the cluster's, then one more:
	// Alice's newer leaves its place to it.
	w4, w5 := watch(ops, "w4"), watch(ops, "w5")
	watching(w4, w5)
	w6 := watch(ops, "w6")
	watching(w6, w4, w5, w1)
	says(w2, v1alpha1.ReasonOverQuota, "the cluster runs")
	says(w3, v1alpha1.ReasonOverQuota, "the cluster runs")
	// Once the operator's goes, Alice's runs again at once.
	must(t, k8s.Delete(ctx, w6))
	watching(w2)
	says(w3, v1alpha1.ReasonOverQuota, "web UI accounts run 2 watches")

	// Transfers from a connection not made yet run (and wait for it) until
	// they are deleted: Alice's takes the strangers' one place, Bob's
	// waits for it, the operator's runs.
	transfer := func(ns, name string) *v1alpha1.Transfer {
		tr := &v1alpha1.Transfer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.TransferSpec{
			Source: v1alpha1.TransferSource{ConnectionRef: v1alpha1.ConnectionReference{Name: "later"}, Path: "/in"},
			TransferOptions: v1alpha1.TransferOptions{
				Destination: v1alpha1.TransferDestination{ConnectionRef: v1alpha1.ConnectionReference{Name: "box"}, Path: "/out"}}}}
		must(t, k8s.Create(ctx, tr))
		t.Cleanup(func() { _ = k8s.Delete(ctx, tr) })
		return tr
	}
	t1 := transfer(alice, "t1")
	says(t1, v1alpha1.ReasonConnectionNotReady, "")
	t2, t3 := transfer(bob, "t2"), transfer(ops, "t3")
	says(t2, v1alpha1.ReasonOverQuota, "web UI accounts run 1 transfers")
	says(t3, v1alpha1.ReasonConnectionNotReady, "")
	must(t, k8s.Delete(ctx, t1))
	says(t2, v1alpha1.ReasonConnectionNotReady, "")
	watching(w4, w5)
}
