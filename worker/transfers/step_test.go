package transfers

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/worker/shard"
	"github.com/sftpgate/sftpgate/worker/statestore"
	"github.com/sftpgate/sftpgate/worker/tasks"
	"github.com/sftpgate/sftpgate/worker/transfer"
)

// TestAnEndNotStoredIsStoredByTheNextStep: a transfer whose last file
// ended while the API server refused the plan's write stores its end at
// the next step and finishes, rather than waiting for a write nothing
// makes (found by the chaos soak, seed 3).
func TestAnEndNotStoredIsStoredByTheNextStep(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	ref := v1alpha1.ConnectionReference{Name: "c"}
	tr := &v1alpha1.Transfer{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "t", UID: "u1"},
		Spec: v1alpha1.TransferSpec{Source: v1alpha1.TransferSource{ConnectionRef: ref, Path: "/in"},
			TransferOptions: v1alpha1.TransferOptions{Destination: v1alpha1.TransferDestination{ConnectionRef: ref, Path: "/out"}}}}
	conn := &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "c"},
		Status: v1alpha1.SftpConnectionStatus{RootPath: "/", Conditions: []metav1.Condition{
			{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Connected"}}}}
	refused := 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tr, conn).
		WithStatusSubresource(&v1alpha1.Transfer{}).
		WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*corev1.ConfigMap); ok && refused == 0 {
				refused++
				return errors.New("the API server is restarting")
			}
			return c.Create(ctx, obj, opts...)
		}}).Build()
	r := &Runner{Env: tasks.Env{Cache: c, Client: c, Recorder: events.NewFakeRecorder(10),
		States: &statestore.Store{Client: c, Namespace: "w", Kind: "transfer"},
		Shard:  &shard.Shard{Identity: "w-0"}}}
	r.init()
	ctx := t.Context()
	run := &run{r: r, uid: tr.UID, key: client.ObjectKeyFromObject(tr), cancel: func() {},
		plan: &transfer.Plan{Files: []transfer.File{{Path: "/in/a", Size: 1, State: transfer.Done}}}, dirty: true}

	if _, done := run.step(ctx); done || refused != 1 {
		t.Fatalf("first step: done %v, writes refused %d; want not done, 1", done, refused)
	}
	if run.plan.Outcome != v1alpha1.ReasonSucceeded || !run.dirty {
		t.Fatalf("after the refused write: outcome %q, dirty %v", run.plan.Outcome, run.dirty)
	}
	if _, done := run.step(ctx); !done {
		t.Fatal("the second step did not finish the transfer: its end was never stored")
	}
	var got v1alpha1.Transfer
	if err := c.Get(ctx, run.key, &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.CompletionTime == nil {
		t.Fatalf("the status has no completion time: %+v", got.Status)
	}
}
