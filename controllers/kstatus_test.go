package controllers_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// TestNewObjectsAreInProgress: as the API server returns a new object,
// before the controller has seen it, kstatus reads it as in progress (its
// CRD defaults status.observedGeneration to 0), not as current.
func TestNewObjectsAreInProgress(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	watch := &v1alpha1.SftpWatch{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fresh"}, Spec: v1alpha1.SftpWatchSpec{
		ConnectionRef: v1alpha1.ConnectionReference{Name: "fresh"}, Sink: &v1alpha1.Destination{URI: "http://receiver.example"}}}
	sched := schedule(ns, "fresh", "@daily")
	transfer := &v1alpha1.Transfer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fresh"}, Spec: sched.Spec.TransferTemplate.Spec}
	for _, obj := range []client.Object{apiKey(ns, "fresh"), connection(ns, "fresh", "127.0.0.1", 22, "u", "missing"), watch, transfer, sched,
		objectStore(ns, "fresh", "http://127.0.0.1:9", "fresh", "missing"),
		&v1alpha1.FtpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fresh"}, Spec: v1alpha1.FtpConnectionSpec{
			Host: "127.0.0.1", Username: "u", Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.LocalSecretReference{Name: "missing"}}}},
		&v1alpha1.AuditSink{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v1alpha1.AuditSinkName},
			Spec: v1alpha1.AuditSinkSpec{Sink: v1alpha1.Destination{URI: "http://receiver.example"}}},
		&v1alpha1.ShareLink{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fresh"}, Spec: v1alpha1.ShareLinkSpec{Connection: "fresh",
			Path: "/out", TokenSHA256: "5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef"}},
		&v1alpha1.FileExpectation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fresh"}, Spec: v1alpha1.FileExpectationSpec{
			ConnectionRef: v1alpha1.ConnectionReference{Name: "fresh"}, Files: v1alpha1.ExpectedFiles{Include: []string{"*.csv"}},
			Schedule: v1alpha1.ExpectationSchedule{Opens: "0 0 * * *", Deadline: metav1.Duration{Duration: 6 * time.Hour}}}}} {
		// As kstatus's users read it: the API server's JSON, untyped,
		// as its answer to the creation (a controller may have written
		// the status by the time of a later read).
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: content}
		gvk, err := apiutil.GVKForObject(obj, k8s.Scheme())
		if err != nil {
			t.Fatal(err)
		}
		u.SetGroupVersionKind(gvk)
		if err := k8s.Create(context.Background(), u); err != nil {
			t.Fatal(err)
		}
		if u.GetGeneration() == 0 {
			t.Fatal("no generation")
		}
		res, err := status.Compute(u)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != status.InProgressStatus {
			t.Errorf("a new %T: kstatus %s (%s), want InProgress", obj, res.Status, res.Message)
		}
	}
}
