package worker_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testgpg"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsink"
	"github.com/sftpgate/sftpgate/worker/watches"
)

// TestWatchTriggersTransfers: a watch of a partner's inbox makes one
// Transfer per file that arrives, which decrypts it and checks its
// signature; the original goes to done/ once its transfer succeeded, to
// failed/ if it failed or skipped it; both statuses say so, and the sink
// hears of every file besides.
func TestWatchTriggersTransfers(t *testing.T) {
	t.Parallel()
	src, dst := inProcessServer(testsftp.Start(t)), inProcessServer(testsftp.Start(t))
	ns := transferNamespace(t, map[string]server{"partner": src, "archive": dst})
	sink := testsink.Start(t)
	startWorker(t)
	ours := testgpg.Start(t, "ours", testgpg.Curve25519)
	partner := testgpg.Start(t, "partner", testgpg.Curve25519)
	stranger := testgpg.Start(t, "stranger", testgpg.Curve25519)
	partner.Trust(t, ours)
	stranger.Trust(t, ours)
	keySecret(t, ns, "our-key", ours.Private(t), testgpg.Passphrase)
	keySecret(t, ns, "partner-key", partner.Public(t, false), "")
	src.file(t, "inbox/.keep", nil)

	w := &v1alpha1.SftpWatch{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "inbox"}, Spec: v1alpha1.SftpWatchSpec{
		ConnectionRef: v1alpha1.ConnectionReference{Name: "partner"}, Path: "/inbox", Include: []string{"*.pgp"},
		PollInterval: &metav1.Duration{Duration: 5 * time.Second}, Stability: v1alpha1.Stability{MinAge: &metav1.Duration{}},
		Sink: &v1alpha1.Destination{URI: sink.URL},
		Transfer: &v1alpha1.TransferOptions{
			Destination: v1alpha1.TransferDestination{ConnectionRef: v1alpha1.ConnectionReference{Name: "archive"}, Path: "/clear"},
			Retry:       v1alpha1.TransferRetry{Limit: new(int32)},
			OpenPGP: &v1alpha1.TransferOpenPGP{Decrypt: &v1alpha1.OpenPGPDecrypt{
				KeySecretRef: v1alpha1.OpenPGPKeyRef{Name: "our-key"}, VerifyWith: []v1alpha1.OpenPGPKeyRef{{Name: "partner-key"}}}}},
		AfterDelivery: v1alpha1.AfterDelivery{Action: v1alpha1.AfterDeliveryMove, MoveTo: "/done", FailedTo: "/failed"}}}
	must(t, k8s.Create(context.Background(), w))
	testkit.Polls(t, k8s, w)(1)

	payroll := []byte("employee,net\n1,3100.00\n")
	src.file(t, "inbox/payroll.csv.pgp", partner.EncryptSign(t, payroll, []*testgpg.Home{ours}))
	src.file(t, "inbox/forged.csv.pgp", stranger.EncryptSign(t, payroll, []*testgpg.Home{ours}))
	// A copy already there, which overwrite Never keeps: the Transfer
	// skips the file, and the watch files it as failed, never as done.
	dst.file(t, "clear/again.csv", []byte("the earlier copy"))
	src.file(t, "inbox/again.csv.pgp", partner.EncryptSign(t, payroll, []*testgpg.Home{ours}))

	var got v1alpha1.SftpWatch
	defer func() {
		if t.Failed() {
			var list v1alpha1.TransferList
			_ = k8s.List(context.Background(), &list, client.InNamespace(ns))
			t.Logf("the watch: %+v", got.Status)
			for _, tr := range list.Items {
				t.Logf("%s: %s %+v", tr.Name, readyReason(&tr), tr.Status.Failures)
			}
		}
	}()
	eventually(t, "the transfers finish and the files are filed", func() bool {
		must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(w), &got))
		c := got.Status.Transfers
		return c.Succeeded == 1 && c.Failed == 2 && c.Running == 0 && src.has("done/payroll.csv.pgp") && src.has("failed/forged.csv.pgp") &&
			src.has("failed/again.csv.pgp")
	})
	if c := got.Status.Transfers; c.Started != 3 || c.Last == "" {
		t.Errorf("the watch's transfers: %+v", c)
	}
	if !bytes.Equal(dst.read(t, "clear/payroll.csv"), payroll) || dst.has("clear/forged.csv") {
		t.Error("the clear files are not what was sent and verified")
	}
	if src.has("inbox/payroll.csv.pgp") || src.has("inbox/forged.csv.pgp") {
		t.Error("an original is left in the inbox")
	}
	var list v1alpha1.TransferList
	must(t, k8s.List(context.Background(), &list, client.InNamespace(ns)))
	if string(dst.read(t, "clear/again.csv")) != "the earlier copy" {
		t.Error("the copy already there was replaced")
	}
	if len(list.Items) != 3 {
		t.Fatalf("%d Transfers, want one per file", len(list.Items))
	}
	for _, tr := range list.Items {
		by := tr.Status.TriggeredBy
		if by == nil || by.Watch != "inbox" || tr.Name != watches.TransferName("inbox", by.EventID) || tr.Labels[v1alpha1.LabelWatch] != "inbox" {
			t.Errorf("%s: triggered by %+v, labels %v", tr.Name, by, tr.Labels)
		}
		if *tr.Spec.TTLSecondsAfterFinished != 3600 {
			t.Errorf("%s: ttl %d", tr.Name, *tr.Spec.TTLSecondsAfterFinished)
		}
	}
	if n := len(sink.Subjects()); n != 3 {
		t.Errorf("the sink got %d events, want 3", n)
	}
}
