package transfers

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/worker/tasks"
)

// BenchmarkList: what a replica's list of the transfers allocates, at
// each sync (every few seconds), with 1,000 in its cache.
func BenchmarkList(b *testing.B) {
	const transfers = 1000
	objs := make([]client.Object, 0, transfers)
	for i := range transfers {
		objs = append(objs, &v1alpha1.Transfer{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("bench-%03d", i/100), Name: fmt.Sprintf("t-%03d", i%100)},
			Spec: v1alpha1.TransferSpec{
				Source: v1alpha1.TransferSource{ConnectionRef: v1alpha1.ConnectionReference{Name: "box"}, Path: "/in"},
				TransferOptions: v1alpha1.TransferOptions{
					Destination: v1alpha1.TransferDestination{ConnectionRef: v1alpha1.ConnectionReference{Name: "box"}, Path: "/out"}}}})
	}
	r := &Runner{Env: tasks.Env{Cache: testcluster.Cached(b, objs)}}
	b.ReportAllocs()
	for b.Loop() {
		items, err := r.list(b.Context())
		if err != nil || len(items) != transfers {
			b.Fatalf("%d transfers listed: %v", len(items), err)
		}
	}
}
