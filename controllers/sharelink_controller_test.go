package controllers_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// TestShareLinkReady: a link is ConnectionNotFound until its connection
// exists, then Active; UsedUp (Stalled) once its uses reach maxUses; and
// Expired (Stalled) once its time passes, without another change.
func TestShareLinkReady(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ctx := context.Background()
	hash := "5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef"
	link := &v1alpha1.ShareLink{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "report"},
		Spec: v1alpha1.ShareLinkSpec{Connection: "reports", Path: "/out", TokenSHA256: hash, MaxUses: ptr(int64(2)),
			ExpiresAt: &metav1.Time{Time: time.Now().Add(4 * time.Second)}}}
	create(t, link)
	waitForReady(t, link, metav1.ConditionFalse, v1alpha1.ReasonConnectionNotFound)
	create(t, &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reports"},
		Spec: v1alpha1.SftpConnectionSpec{Host: "127.0.0.1", Port: 9, Username: "u", HostKey: v1alpha1.HostKeyTrust{InsecureSkipVerify: true},
			Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.LocalSecretReference{Name: "reports-creds"}}}})
	link = waitForReady(t, link, metav1.ConditionTrue, v1alpha1.ReasonActive)

	link.Status.Uses = 2
	must(t, k8s.Status().Update(ctx, link))
	link = waitForReady(t, link, metav1.ConditionFalse, v1alpha1.ReasonUsedUp)
	if !meta.IsStatusConditionTrue(link.Status.Conditions, v1alpha1.ConditionStalled) {
		t.Errorf("a used-up link is not Stalled: %+v", link.Status.Conditions)
	}

	link.Spec.MaxUses = ptr(int64(10))
	must(t, k8s.Update(ctx, link))
	waitForReady(t, link, metav1.ConditionTrue, v1alpha1.ReasonActive)
	waitForReady(t, link, metav1.ConditionFalse, v1alpha1.ReasonExpired)
}
