package transfers

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/sftpgate/sftpgate/api"
	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/worker/shard"
	"github.com/sftpgate/sftpgate/worker/statestore"
	"github.com/sftpgate/sftpgate/worker/tasks"
	"github.com/sftpgate/sftpgate/worker/transfer"
)

// The test kit's, as every test package has them.
var must = testkit.Must

// TestAnEndNotStoredIsStoredByTheNextStep: a transfer whose last file
// ended while the API server refused the plan's write stores its end at
// the next step and finishes, rather than waiting for a write nothing
// makes (found by the chaos soak, seed 3). On a real API server; the one
// refused write is the interceptor's.
func TestAnEndNotStoredIsStoredByTheNextStep(t *testing.T) {
	env, _, err := testcluster.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := t.Context()
	real, err := client.NewWithWatch(env.Config, client.Options{Scheme: api.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"a", "w"} {
		if err := testcluster.EnsureNamespace(ctx, env.Config, ns); err != nil {
			t.Fatal(err)
		}
	}
	conn := &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "c"}, Spec: v1alpha1.SftpConnectionSpec{
		Host: "sftp.example.com", Username: "u", Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.LocalSecretReference{Name: "c"}}}}
	must(t, real.Create(ctx, conn))
	conn.Status = v1alpha1.SftpConnectionStatus{RootPath: "/", Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady,
		Status: metav1.ConditionTrue, Reason: "Connected", ObservedGeneration: conn.Generation, LastTransitionTime: metav1.Now()}}}
	must(t, real.Status().Update(ctx, conn))
	ref := v1alpha1.ConnectionReference{Name: "c"}
	tr := &v1alpha1.Transfer{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "t"},
		Spec: v1alpha1.TransferSpec{Source: v1alpha1.TransferSource{ConnectionRef: ref, Path: "/in"},
			TransferOptions: v1alpha1.TransferOptions{Destination: v1alpha1.TransferDestination{ConnectionRef: ref, Path: "/out"}}}}
	must(t, real.Create(ctx, tr))

	refused := 0
	c := interceptor.NewClient(real, interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if _, ok := obj.(*corev1.ConfigMap); ok && refused == 0 {
			refused++
			return errors.New("the API server is restarting")
		}
		return c.Create(ctx, obj, opts...)
	}})
	states := &statestore.Store{Client: c, Namespace: "w", Kind: "transfer"}
	r := &Runner{Env: tasks.Env{Cache: c, Client: c, Recorder: events.NewFakeRecorder(10), States: states,
		Shard: &shard.Shard{Identity: "w-0"}}}
	r.init()
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
	must(t, real.Get(ctx, run.key, &got))
	if got.Status.CompletionTime == nil || !got.Finished() {
		t.Fatalf("the status is not finished: %+v", got.Status)
	}
	blob, _, err := states.Load(ctx, string(tr.UID))
	must(t, err)
	if blob != nil {
		t.Error("the finished transfer's plan is still stored")
	}
}
