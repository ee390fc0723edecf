package worker_test

import (
	"context"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsink"
)

// TestWatchGoesOnWhenItsConnectionIsMadeAgain: a watch whose connection is
// deleted and made again under its name (another UID, as kubectl replace
// --force or an Argo CD Replace makes it) goes on from what it had seen:
// a file that landed while the connection was gone is reported once it is
// back, and the file reported before is not reported again.
func TestWatchGoesOnWhenItsConnectionIsMadeAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tn := newTenant(t)
	r := testsink.Start(t)
	startWorker(t)
	w := tn.watch(t, "incoming", r.URL)
	testkit.Polls(t, k8s, w)(1)
	tn.put(t, "in/before.csv", "reported before")
	eventually(t, "the first file is reported", func() bool { return len(r.Subjects()) >= 1 })

	var conn v1alpha1.SftpConnection
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: tn.ns, Name: "box"}, &conn))
	must(t, k8s.Delete(ctx, &conn))
	eventually(t, "the connection is gone", func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(&conn), &v1alpha1.SftpConnection{}))
	})
	eventually(t, "the watch says its connection is missing", func() bool {
		var got v1alpha1.SftpWatch
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(w), &got))
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == v1alpha1.ReasonConnectionNotReady
	})
	tn.put(t, "in/meanwhile.csv", "landed while the connection was gone")
	again := &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: conn.Namespace, Name: conn.Name}, Spec: conn.Spec}
	must(t, k8s.Create(ctx, again))
	if again.UID == conn.UID {
		t.Fatal("the connection made again has its old UID")
	}
	eventually(t, "the file that landed meanwhile is reported", func() bool { return len(r.Subjects()) >= 2 })
	testkit.Polls(t, k8s, w)(2) // no event comes twice
	want := []string{"dev.sftpgate.file.created /in/before.csv", "dev.sftpgate.file.created /in/meanwhile.csv"}
	if got := r.Subjects(); !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
}
