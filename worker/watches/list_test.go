package watches

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/worker/tasks"
)

// BenchmarkList: what a replica's list of the watches allocates, at each
// sync (every few seconds), with 10,000 watches in its cache.
func BenchmarkList(b *testing.B) {
	const watches = 10_000
	objs := make([]client.Object, 0, watches)
	for i := range watches {
		objs = append(objs, &v1alpha1.SftpWatch{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("bench-%03d", i/100), Name: fmt.Sprintf("w-%03d", i%100)},
			Spec: v1alpha1.SftpWatchSpec{ConnectionRef: v1alpha1.ConnectionReference{Name: "box"}, Path: fmt.Sprintf("/in/%05d", i),
				PollInterval: &metav1.Duration{Duration: 5 * time.Minute}, Sink: &v1alpha1.Destination{URI: "http://sink.example/"}}})
	}
	r := &Runner{Env: tasks.Env{Cache: testcluster.Cached(b, objs)}}
	b.ReportAllocs()
	for b.Loop() {
		items, err := r.list(b.Context())
		if err != nil || len(items) != watches {
			b.Fatalf("%d watches listed: %v", len(items), err)
		}
	}
}
