package controllers_test

import (
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testftpd"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
)

// TestFtpConnectionIsTested: an FTP connection is tested as the other
// kinds are (the same path), with a reason for each step that failed,
// and the certificate the server presented in status.
func TestFtpConnectionIsTested(t *testing.T) {
	t.Parallel()
	ftpd := testftpd.Start(t)
	ns := newNamespace(t)
	conn, secret := ftpd.Connection(ns, "partner")
	create(t, secret)
	create(t, conn)
	got := waitForReady(t, conn, metav1.ConditionTrue, v1alpha1.ReasonConnected)
	if got.Status.RootPath != ftpd.Dir || got.Status.ObservedGeneration != got.Generation || got.Status.CredentialsHash == "" ||
		!strings.EqualFold(strings.ReplaceAll(got.Status.CertificateSHA256, ":", ""), ftpd.Fingerprint) {
		t.Errorf("status: %+v", got.Status)
	}
	waitForEvent(t, conn, corev1.EventTypeNormal, v1alpha1.ReasonConnected)
	assertNoSecret(t, got, ftpd.Password)

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := closed.Addr().(*net.TCPAddr).Port //nolint:forcetypeassert // a TCP listener's
	_ = closed.Close()
	wrong := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wrong"}, StringData: map[string]string{v1alpha1.SecretKeyPassword: "not-it"}}
	create(t, wrong)
	account := newNamespace(t)
	labelled := &corev1.Namespace{}
	if err := k8s.Get(t.Context(), client.ObjectKey{Name: account}, labelled); err != nil {
		t.Fatal(err)
	}
	labelled.Labels = map[string]string{v1alpha1.LabelAccount: "someone"}
	if err := k8s.Update(t.Context(), labelled); err != nil {
		t.Fatal(err)
	}
	_, accountSecret := ftpd.Connection(account, "partner")
	create(t, accountSecret)
	silent := testsftp.Silent(t)
	for _, tc := range []struct {
		name    string
		ns      string
		mutate  func(*v1alpha1.FtpConnectionSpec)
		reason  string
		stalled bool
	}{
		{"wrong-password", ns, func(s *v1alpha1.FtpConnectionSpec) { s.Credentials.SecretRef.Name = "wrong" }, v1alpha1.ReasonAuthenticationFailed, true},
		{"other-certificate", ns, func(s *v1alpha1.FtpConnectionSpec) { s.CertificateSHA256 = strings.Repeat("ab", 32) }, v1alpha1.ReasonCertificateNotTrusted, true},
		{"unknown-ca", ns, func(s *v1alpha1.FtpConnectionSpec) { s.CertificateSHA256 = "" }, v1alpha1.ReasonCertificateNotTrusted, true},
		{"implicit-to-explicit", ns, func(s *v1alpha1.FtpConnectionSpec) { s.TLS = v1alpha1.FTPTLSImplicit }, v1alpha1.ReasonTLSHandshakeFailed, false},
		{"plaintext-refused-by-server", ns, func(s *v1alpha1.FtpConnectionSpec) { s.TLS, s.CertificateSHA256 = v1alpha1.FTPTLSNone, "" }, v1alpha1.ReasonAuthenticationFailed, true},
		{"plaintext-in-account", account, func(s *v1alpha1.FtpConnectionSpec) { s.TLS, s.CertificateSHA256 = v1alpha1.FTPTLSNone, "" }, v1alpha1.ReasonPlaintextNotAllowed, true},
		{"missing-root", ns, func(s *v1alpha1.FtpConnectionSpec) { s.RootPath = ftpd.Dir + "/none" }, v1alpha1.ReasonRootPathNotFound, false},
		{"closed-port", ns, func(s *v1alpha1.FtpConnectionSpec) { s.Port = int32(closedPort) }, v1alpha1.ReasonConnectionRefused, false},
		{"metadata-address", ns, func(s *v1alpha1.FtpConnectionSpec) { s.Host, s.Port = "169.254.169.254", 21 }, v1alpha1.ReasonDestinationNotAllowed, true},
		{"silent-server", ns, func(s *v1alpha1.FtpConnectionSpec) { s.Port = silent }, v1alpha1.ReasonTimeout, false},
		{"secret-later", ns, func(s *v1alpha1.FtpConnectionSpec) { s.Credentials.SecretRef.Name = "later" }, v1alpha1.ReasonSecretNotFound, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, _ := ftpd.Connection(tc.ns, tc.name)
			c.Spec.Credentials.SecretRef.Name = "partner-credentials"
			// vsftpd (with PAM) answers a wrong password after 3 seconds.
			c.Spec.Limits.ConnectTimeout = &metav1.Duration{Duration: 6 * time.Second}
			c.Spec.Limits.OperationTimeout = &metav1.Duration{Duration: 2 * time.Second}
			tc.mutate(&c.Spec)
			create(t, c)
			got := waitForReady(t, c, metav1.ConditionFalse, tc.reason)
			if stalled := meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionStalled); stalled != tc.stalled {
				t.Errorf("stalled = %v, want %v (%s)", stalled, tc.stalled, readyCondition(got).Message)
			}
			assertNoSecret(t, got, ftpd.Password)
			if tc.reason == v1alpha1.ReasonSecretNotFound {
				_, later := ftpd.Connection(tc.ns, "later")
				later.Name = "later"
				create(t, later)
				waitForReady(t, c, metav1.ConditionTrue, v1alpha1.ReasonConnected)
			}
		})
	}
}

// TestInvalidFtpConnectionsAreRejected: the API server refuses what
// could never work, with the field named.
func TestInvalidFtpConnectionsAreRejected(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	for _, tc := range []struct {
		name    string
		mutate  func(*v1alpha1.FtpConnectionSpec)
		message string
	}{
		{"valid", nil, ""},
		{"tls-unknown", func(s *v1alpha1.FtpConnectionSpec) { s.TLS = "Sometimes" }, "spec.tls"},
		{"pin-and-ca", func(s *v1alpha1.FtpConnectionSpec) { s.CABundle = "x" }, "mutually exclusive"},
		{"pin-without-tls", func(s *v1alpha1.FtpConnectionSpec) { s.TLS = v1alpha1.FTPTLSNone }, "need tls Explicit or Implicit"},
		{"pin-not-hex", func(s *v1alpha1.FtpConnectionSpec) { s.CertificateSHA256 = "SHA256:abc" }, "spec.certificateSHA256"},
		{"user-two-lines", func(s *v1alpha1.FtpConnectionSpec) { s.Username = "a\r\nDELE x" }, "one line"},
		{"root-two-lines", func(s *v1alpha1.FtpConnectionSpec) { s.RootPath = "/a\nb" }, "one line"},
		{"host-with-space", func(s *v1alpha1.FtpConnectionSpec) { s.Host = "a b" }, "spec.host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1alpha1.FtpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.name}, Spec: v1alpha1.FtpConnectionSpec{
				Host: "ftp.example.com", TLS: v1alpha1.FTPTLSExplicit, CertificateSHA256: strings.Repeat("AB:", 31) + "AB",
				Username: "partner", Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.LocalSecretReference{Name: "creds"}}}}
			if tc.mutate != nil {
				tc.mutate(&c.Spec)
			}
			err := k8s.Create(t.Context(), c)
			switch {
			case tc.message == "" && err != nil:
				t.Fatalf("valid spec rejected: %v", err)
			case tc.message != "" && (err == nil || !strings.Contains(err.Error(), tc.message)):
				t.Fatalf("want a rejection naming %q, got %v", tc.message, err)
			}
		})
	}
}

// TestSlugsAreUniqueAcrossKinds: an FtpConnection or an ObjectStore that
// asks for a slug an SftpConnection serves is not Ready (SlugConflict),
// naming the holder only to its own namespace; without spec.slug they
// claim none.
func TestSlugsAreUniqueAcrossKinds(t *testing.T) {
	t.Parallel()
	ns, other := newNamespace(t), newNamespace(t)
	slug := "across-" + ns
	holder := connection(ns, "holder", "127.0.0.1", 9, "u", "missing")
	holder.Spec.Slug = slug
	create(t, holder)
	waitFor(t, holder, "serving its slug", func(c *v1alpha1.SftpConnection) bool { return c.Status.Slug == slug })

	ftp := &v1alpha1.FtpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ftp"}, Spec: v1alpha1.FtpConnectionSpec{
		Host: "127.0.0.1", Username: "u", Slug: slug, Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.LocalSecretReference{Name: "missing"}}}}
	create(t, ftp)
	got := waitForReady(t, ftp, metav1.ConditionFalse, v1alpha1.ReasonSlugConflict)
	if !strings.Contains(readyCondition(got).Message, `SftpConnection "holder"`) || got.Status.Slug != "" {
		t.Errorf("the same namespace's conflict: %+v", got.Status)
	}
	store := objectStore(other, "store", "http://127.0.0.1:9", "bucket", "missing")
	store.Spec.Slug = slug
	create(t, store)
	gotStore := waitForReady(t, store, metav1.ConditionFalse, v1alpha1.ReasonSlugConflict)
	if msg := readyCondition(gotStore).Message; !strings.Contains(msg, "another SftpConnection") || strings.Contains(msg, "holder") {
		t.Errorf("another namespace's conflict names the holder: %q", msg)
	}
	unslugged := &v1alpha1.FtpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "holder"}, Spec: v1alpha1.FtpConnectionSpec{
		Host: "127.0.0.1", Username: "u", Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.LocalSecretReference{Name: "missing"}}}}
	create(t, unslugged)
	if got := waitForReady(t, unslugged, metav1.ConditionFalse, v1alpha1.ReasonSecretNotFound); got.Status.Slug != "" {
		t.Errorf("an FtpConnection without spec.slug serves %q", got.Status.Slug)
	}
}
