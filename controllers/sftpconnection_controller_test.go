package controllers_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
)

func passwordSecret(ns, name, password string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeBasicAuth,
		StringData: map[string]string{v1alpha1.SecretKeyPassword: password},
	}
}

func keySecret(ns, name string, key []byte, passphrase string) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeSSHAuth,
		Data:       map[string][]byte{v1alpha1.SecretKeyPrivateKey: key},
	}
	if passphrase != "" {
		s.Data[v1alpha1.SecretKeyPassphrase] = []byte(passphrase)
	}
	return s
}

// connection builds an SftpConnection whose slug, unlike its name, is
// unique across the tests: slugs are cluster-wide.
func connection(ns, name, host string, port int32, user, secret string) *v1alpha1.SftpConnection {
	return &v1alpha1.SftpConnection{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.SftpConnectionSpec{
			Slug:        name + "-" + ns,
			Host:        host,
			Port:        port,
			Username:    user,
			Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.LocalSecretReference{Name: secret}},
		},
	}
}

func sshdConnection(ns, name string, s *testsshd.Server, secret string) *v1alpha1.SftpConnection {
	c := connection(ns, name, s.Host, s.Port, testsshd.User, secret)
	c.Spec.RootPath = s.Dir
	return c
}

func inProcessConnection(ns, name string, s *testsftp.Server, secret string) *v1alpha1.SftpConnection {
	return connection(ns, name, s.Host, s.Port, s.User, secret)
}

// requestTest asks the controller to test again, as the web UI does.
func requestTest(t *testing.T, conn *v1alpha1.SftpConnection) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		v1alpha1.AnnotationTestRequestedAt: time.Now().UTC().Format(time.RFC3339Nano)}}})
	if err := k8s.Patch(context.Background(), conn, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
}

// waitForEvent waits for an event about obj with the given reason and
// returns its note.
func waitForEvent(t *testing.T, obj client.Object, eventType, reason string) string {
	t.Helper()
	var note string
	testkit.Eventually(t, fmt.Sprintf("a %s event %q for %s", eventType, reason, obj.GetName()), func() bool {
		var list eventsv1.EventList
		if err := k8s.List(context.Background(), &list, client.InNamespace(obj.GetNamespace())); err != nil {
			t.Fatal(err)
		}
		for _, e := range list.Items {
			if e.Regarding.UID == obj.GetUID() && e.Type == eventType && e.Reason == reason {
				note = e.Note
				return true
			}
		}
		return false
	})
	return note
}

// assertNoSecret fails if a secret value shows in the object's status, the
// events of its namespace or the manager's logs.
func assertNoSecret(t *testing.T, obj client.Object, secret string) {
	t.Helper()
	status, _ := json.Marshal(obj)
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(obj.GetNamespace())); err != nil {
		t.Fatal(err)
	}
	events, _ := json.Marshal(list.Items)
	for where, text := range map[string]string{"object": string(status), "events": string(events), "logs": managerLogs.String()} {
		if strings.Contains(text, secret) {
			t.Fatalf("a secret value appears in the %s of %s", where, obj.GetName())
		}
	}
}

func TestPasswordAuthAgainstOpenSSH(t *testing.T) {
	t.Parallel()
	server := testsshd.Start(t)
	ns := newNamespace(t)
	create(t, passwordSecret(ns, "creds", server.Password))
	conn := sshdConnection(ns, "box", server, "creds")
	create(t, conn)

	got := waitForReady(t, conn, metav1.ConditionTrue, v1alpha1.ReasonConnected)
	if want := ssh.FingerprintSHA256(server.HostKey); got.Status.HostKeyFingerprint != want {
		t.Errorf("hostKeyFingerprint = %q, want %q", got.Status.HostKeyFingerprint, want)
	}
	if got.Status.HostKey != server.HostKeyLine {
		t.Errorf("hostKey = %q, want %q", got.Status.HostKey, server.HostKeyLine)
	}
	if !strings.HasPrefix(got.Status.ServerVersion, "SSH-2.0-OpenSSH") {
		t.Errorf("serverVersion = %q, want OpenSSH's", got.Status.ServerVersion)
	}
	if got.Status.Slug != conn.Spec.Slug || got.Status.RootPath != server.Dir ||
		got.Status.ObservedGeneration != got.Generation || got.Status.LastTestTime == nil ||
		!strings.HasPrefix(got.Status.CredentialsHash, "sha256:") {
		t.Errorf("status = %+v", got.Status)
	}
	// Defaults come from the CRD schema, so what Git holds and what the
	// server returns agree.
	if got.Spec.Limits.MaxConnections != 4 || got.Spec.Limits.ConnectTimeout == nil || got.Spec.Limits.ConnectTimeout.Duration != 10*time.Second {
		t.Errorf("limits not defaulted: %+v", got.Spec.Limits)
	}
	waitForEvent(t, conn, corev1.EventTypeNormal, v1alpha1.ReasonConnected)
	assertNoSecret(t, got, server.Password)
}

func TestKeyAuthAgainstOpenSSH(t *testing.T) {
	t.Parallel()
	server := testsshd.Start(t)
	ns := newNamespace(t)

	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	openssh := func(key any, passphrase string) []byte {
		var block *pem.Block
		var err error
		if passphrase == "" {
			block, err = ssh.MarshalPrivateKey(key, "")
		} else {
			block, err = ssh.MarshalPrivateKeyWithPassphrase(key, "", []byte(passphrase))
		}
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(block)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(ecKey)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		key        any
		pem        []byte
		passphrase string
	}{
		{"ed25519-openssh", edKey, openssh(edKey, ""), ""},
		{"rsa-pem-pkcs1", rsaKey, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)}), ""},
		{"ecdsa-pkcs8", ecKey, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), ""},
		{"ed25519-encrypted", edKey, openssh(edKey, "open sesame"), "open sesame"},
	}
	for _, tc := range cases {
		signer, err := ssh.NewSignerFromKey(tc.key)
		if err != nil {
			t.Fatal(err)
		}
		server.AuthorizeKey(t, signer.PublicKey())
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			create(t, keySecret(ns, tc.name, tc.pem, tc.passphrase))
			conn := sshdConnection(ns, tc.name, server, tc.name)
			create(t, conn)
			got := waitForReady(t, conn, metav1.ConditionTrue, v1alpha1.ReasonConnected)
			if tc.passphrase != "" {
				assertNoSecret(t, got, tc.passphrase)
			}
		})
	}
}

func TestWrongPassword(t *testing.T) {
	t.Parallel()
	server := testsshd.Start(t)
	ns := newNamespace(t)
	create(t, passwordSecret(ns, "creds", "not-the-password"))
	conn := sshdConnection(ns, "box", server, "creds")
	create(t, conn)

	got := waitForReady(t, conn, metav1.ConditionFalse, v1alpha1.ReasonAuthenticationFailed)
	if msg := readyCondition(got).Message; !strings.Contains(msg, testsshd.User) {
		t.Errorf("message %q does not name the user", msg)
	}
	waitForEvent(t, conn, corev1.EventTypeWarning, v1alpha1.ReasonAuthenticationFailed)
	assertNoSecret(t, got, "not-the-password")
}

func TestPinnedHostKeys(t *testing.T) {
	t.Parallel()
	server := testsshd.Start(t)
	other := testsftp.Start(t) // any other server's key is a wrong one
	ns := newNamespace(t)
	create(t, passwordSecret(ns, "creds", server.Password))

	cases := []struct {
		name    string
		trusted []string
		reason  string
	}{
		{"wrong-key", []string{other.HostKeyLine()}, v1alpha1.ReasonHostKeyMismatch},
		{"wrong-fingerprint", []string{ssh.FingerprintSHA256(other.HostKey())}, v1alpha1.ReasonHostKeyMismatch},
		{"right-key", []string{other.HostKeyLine(), server.HostKeyLine}, v1alpha1.ReasonConnected},
		{"right-fingerprint", []string{ssh.FingerprintSHA256(server.HostKey)}, v1alpha1.ReasonConnected},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn := sshdConnection(ns, tc.name, server, "creds")
			conn.Spec.HostKey.Trusted = tc.trusted
			create(t, conn)
			status := metav1.ConditionFalse
			if tc.reason == v1alpha1.ReasonConnected {
				status = metav1.ConditionTrue
			}
			got := waitForReady(t, conn, status, tc.reason)
			if tc.reason == v1alpha1.ReasonHostKeyMismatch {
				if msg := readyCondition(got).Message; !strings.Contains(msg, ssh.FingerprintSHA256(server.HostKey)) {
					t.Errorf("message %q does not name the presented key", msg)
				}
			}
		})
	}
}

func TestTrustOnFirstUseRecordsThenEnforces(t *testing.T) {
	t.Parallel()
	server := testsftp.Start(t)
	ns := newNamespace(t)
	create(t, passwordSecret(ns, "creds", server.Password))
	conn := inProcessConnection(ns, "tofu", server, "creds")
	create(t, conn)

	first := ssh.FingerprintSHA256(server.HostKey())
	got := waitForReady(t, conn, metav1.ConditionTrue, v1alpha1.ReasonConnected)
	if got.Status.HostKeyFingerprint != first || got.Status.HostKey != server.HostKeyLine() {
		t.Fatalf("recorded %q (%q), want %q", got.Status.HostKeyFingerprint, got.Status.HostKey, first)
	}

	server.RotateHostKey(t)
	requestTest(t, got)
	got = waitForReady(t, conn, metav1.ConditionFalse, v1alpha1.ReasonHostKeyMismatch)
	if got.Status.HostKeyFingerprint != first {
		t.Errorf("a mismatching key replaced the trusted one: %q", got.Status.HostKeyFingerprint)
	}
	waitForEvent(t, conn, corev1.EventTypeWarning, v1alpha1.ReasonHostKeyMismatch)
}

func TestInsecureSkipVerifyWarns(t *testing.T) {
	t.Parallel()
	server := testsftp.Start(t)
	ns := newNamespace(t)
	create(t, passwordSecret(ns, "creds", server.Password))
	conn := inProcessConnection(ns, "insecure", server, "creds")
	conn.Spec.HostKey.InsecureSkipVerify = true
	create(t, conn)

	got := waitForReady(t, conn, metav1.ConditionTrue, v1alpha1.ReasonConnected)
	if !strings.Contains(readyCondition(got).Message, "not verified") {
		t.Errorf("Ready message %q has no warning", readyCondition(got).Message)
	}
	waitForEvent(t, conn, corev1.EventTypeWarning, "HostKeyNotVerified")
}

func TestNetworkFailures(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	create(t, passwordSecret(ns, "creds", "irrelevant"))

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := int32(closed.Addr().(*net.TCPAddr).Port)
	_ = closed.Close()

	// A server that accepts and never speaks: the handshake must time out.
	silent := testsftp.Silent(t)

	cases := []struct {
		name   string
		host   string
		port   int32
		reason string
	}{
		{"closed-port", "127.0.0.1", closedPort, v1alpha1.ReasonConnectionRefused},
		{"unresolvable", "no-such-host.invalid", 22, v1alpha1.ReasonDNSError},
		{"metadata-endpoint", "169.254.169.254", 22, v1alpha1.ReasonDestinationNotAllowed},
		{"silent-server", "127.0.0.1", silent, v1alpha1.ReasonTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn := connection(ns, tc.name, tc.host, tc.port, "user", "creds")
			conn.Spec.Limits.ConnectTimeout = &metav1.Duration{Duration: time.Second}
			create(t, conn)
			waitForReady(t, conn, metav1.ConditionFalse, tc.reason)
		})
	}
}

func TestSFTPSubsystemUnavailable(t *testing.T) {
	t.Parallel()
	server := testsftp.Start(t)
	server.NoSFTP.Store(true)
	ns := newNamespace(t)
	create(t, passwordSecret(ns, "creds", server.Password))
	conn := inProcessConnection(ns, "nosftp", server, "creds")
	create(t, conn)
	waitForReady(t, conn, metav1.ConditionFalse, v1alpha1.ReasonSFTPUnavailable)
}

func TestMissingRootPath(t *testing.T) {
	t.Parallel()
	server := testsshd.Start(t)
	ns := newNamespace(t)
	create(t, passwordSecret(ns, "creds", server.Password))
	conn := sshdConnection(ns, "box", server, "creds")
	conn.Spec.RootPath = server.Dir + "/does/not/exist"
	create(t, conn)
	waitForReady(t, conn, metav1.ConditionFalse, v1alpha1.ReasonRootPathNotFound)
}

func TestSecretThatAppearsLater(t *testing.T) {
	t.Parallel()
	server := testsftp.Start(t)
	ns := newNamespace(t)
	conn := inProcessConnection(ns, "early", server, "later")
	create(t, conn)
	waitForReady(t, conn, metav1.ConditionFalse, v1alpha1.ReasonSecretNotFound)

	create(t, passwordSecret(ns, "later", server.Password))
	got := waitForReady(t, conn, metav1.ConditionTrue, v1alpha1.ReasonConnected)
	if got.Generation != 1 {
		t.Errorf("the connection was edited (generation %d)", got.Generation)
	}
}

func TestInvalidCredentials(t *testing.T) {
	t.Parallel()
	server := testsftp.Start(t)
	ns := newNamespace(t)
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	encrypted, err := ssh.MarshalPrivateKeyWithPassphrase(key, "", []byte("secret words"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		secret  *corev1.Secret
		message string
	}{
		{"no-credentials", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-credentials"},
			StringData: map[string]string{"username": "x"}}, "has neither"},
		{"not-a-key", keySecret(ns, "not-a-key", []byte("hello"), ""), "not a private key"},
		{"no-passphrase", keySecret(ns, "no-passphrase", pem.EncodeToMemory(encrypted), ""), "encrypted"},
		{"wrong-passphrase", keySecret(ns, "wrong-passphrase", pem.EncodeToMemory(encrypted), "guess"), "does not decrypt"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			create(t, tc.secret)
			conn := inProcessConnection(ns, tc.name, server, tc.name)
			create(t, conn)
			got := waitForReady(t, conn, metav1.ConditionFalse, v1alpha1.ReasonInvalidCredentials)
			if msg := readyCondition(got).Message; !strings.Contains(msg, tc.message) {
				t.Errorf("message %q does not say %q", msg, tc.message)
			}
			assertNoSecret(t, got, "secret words")
			assertNoSecret(t, got, "guess")
		})
	}
}

func TestPasswordRotationRetests(t *testing.T) {
	t.Parallel()
	server := testsshd.Start(t)
	ns := newNamespace(t)
	secret := passwordSecret(ns, "creds", server.Password)
	create(t, secret)
	conn := sshdConnection(ns, "box", server, "creds")
	create(t, conn)
	before := waitForReady(t, conn, metav1.ConditionTrue, v1alpha1.ReasonConnected)

	secret.StringData = map[string]string{v1alpha1.SecretKeyPassword: "rotated-on-the-client-only"}
	if err := k8s.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	after := waitForReady(t, conn, metav1.ConditionFalse, v1alpha1.ReasonAuthenticationFailed)
	if after.Status.CredentialsHash == before.Status.CredentialsHash {
		t.Errorf("credentialsHash did not change with the Secret")
	}
	assertNoSecret(t, after, "rotated-on-the-client-only")
}

// TestSlugStaysWithItsHolder: slugs are unique across namespaces; the
// connection serving a slug keeps it, even against an older object that
// switches to it; when it goes away, the slug is held for its namespace
// for the grace period, and then the oldest remaining claim gets it.
func TestSlugStaysWithItsHolder(t *testing.T) {
	t.Parallel()
	server := testsftp.Start(t)
	nsA, nsB := newNamespace(t), newNamespace(t)
	slug := "shared-" + strings.TrimPrefix(nsA, "test-") // unique, and not the namespace's name
	for _, ns := range []string{nsA, nsB} {
		create(t, passwordSecret(ns, "creds", server.Password))
	}
	start := func(ns, name, slug string) *v1alpha1.SftpConnection {
		conn := inProcessConnection(ns, name, server, "creds")
		conn.Spec.Slug = slug
		create(t, conn)
		// Creation times have a one-second resolution: keep them apart so
		// that "older" is well defined.
		time.Sleep(1100 * time.Millisecond)
		return conn
	}
	elder := start(nsB, "elder", "elder-"+nsB)
	holder := start(nsA, "holder", slug)
	late := start(nsB, "late", slug)
	waitForReady(t, holder, metav1.ConditionTrue, v1alpha1.ReasonConnected)
	got := waitForReady(t, late, metav1.ConditionFalse, v1alpha1.ReasonSlugConflict)
	if msg := readyCondition(got).Message; got.Status.Slug != "" || strings.Contains(msg, "holder") {
		t.Errorf("slug %q, message %q: want no slug, and no name from another namespace", got.Status.Slug, msg)
	}

	patch := client.MergeFrom(elder.DeepCopy())
	elder.Spec.Slug = slug
	if err := k8s.Patch(context.Background(), elder, patch); err != nil {
		t.Fatal(err)
	}
	waitForReady(t, elder, metav1.ConditionFalse, v1alpha1.ReasonSlugConflict)
	if got := waitForReady(t, holder, metav1.ConditionTrue, v1alpha1.ReasonConnected); got.Status.Slug != slug {
		t.Fatalf("the holder lost its slug to an older object: %+v", got.Status)
	}

	if err := k8s.Delete(context.Background(), holder); err != nil {
		t.Fatal(err)
	}
	held := waitFor(t, elder, "the slug held for the namespace that freed it", func(c *v1alpha1.SftpConnection) bool {
		return strings.Contains(readyCondition(c).Message, "held for it until")
	})
	if msg := readyCondition(held).Message; strings.Contains(msg, nsA) {
		t.Errorf("the reservation names the other namespace: %q", msg)
	}
	if got := waitForReady(t, elder, metav1.ConditionTrue, v1alpha1.ReasonConnected); got.Status.Slug != slug {
		t.Errorf("slug = %q, want %q", got.Status.Slug, slug)
	}
	waitForReady(t, late, metav1.ConditionFalse, v1alpha1.ReasonSlugConflict)

	// Reservations do not pile up: once no connection asks for the slug,
	// its reservation goes at the end of the grace period.
	for _, c := range []*v1alpha1.SftpConnection{elder, late} {
		must(t, k8s.Delete(context.Background(), c))
	}
	key := client.ObjectKey{Namespace: managerOptions.Namespace, Name: "slug-" + slug}
	testkit.Eventually(t, "the reservation of "+slug+" goes after its grace period", func() bool {
		err := k8s.Get(context.Background(), key, &coordinationv1.Lease{})
		if apierrors.IsNotFound(err) {
			return true
		}
		must(t, err)
		return false
	})
}

// TestSlugSurvivesDeleteAndRecreate: a connection deleted and made again
// (kubectl replace --force, an Argo CD Replace, a rename) keeps its slug,
// though another namespace's claim is older than the new object. The
// reservation is a Lease (hack/e2e restarts the manager in between).
func TestSlugSurvivesDeleteAndRecreate(t *testing.T) {
	t.Parallel()
	server := testsftp.Start(t)
	victim, squatter := newNamespace(t), newNamespace(t)
	slug := "reports-" + victim
	for _, ns := range []string{victim, squatter} {
		create(t, passwordSecret(ns, "creds", server.Password))
	}
	reports := inProcessConnection(victim, "reports", server, "creds")
	reports.Spec.Slug = slug
	create(t, reports)
	waitForReady(t, reports, metav1.ConditionTrue, v1alpha1.ReasonConnected)
	claim := inProcessConnection(squatter, "claim", server, "creds")
	claim.Spec.Slug = slug
	create(t, claim)
	waitForReady(t, claim, metav1.ConditionFalse, v1alpha1.ReasonSlugConflict)
	var lease coordinationv1.Lease
	must(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: managerOptions.Namespace, Name: "slug-" + slug}, &lease))
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != victim {
		t.Errorf("the reservation names %v, want %s", lease.Spec.HolderIdentity, victim)
	}

	time.Sleep(1100 * time.Millisecond) // the new object is newer than the claim
	must(t, k8s.Delete(context.Background(), reports))
	renamed := inProcessConnection(victim, "reports-renamed", server, "creds")
	renamed.Spec.Slug = slug
	create(t, renamed)
	if got := waitForReady(t, renamed, metav1.ConditionTrue, v1alpha1.ReasonConnected); got.Status.Slug != slug {
		t.Errorf("the new connection serves %q, want %s", got.Status.Slug, slug)
	}
	if got := waitForReady(t, claim, metav1.ConditionFalse, v1alpha1.ReasonSlugConflict); got.Status.Slug != "" {
		t.Errorf("the other namespace's claim serves %q", got.Status.Slug)
	}
}

func TestInvalidSpecsAreRejected(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cases := []struct {
		name    string
		mutate  func(*v1alpha1.SftpConnection)
		message string
	}{
		{"port-zero-is-defaulted-not-rejected", nil, ""},
		{"port-too-large", func(c *v1alpha1.SftpConnection) { c.Spec.Port = 70000 }, "spec.port"},
		{"negative-port", func(c *v1alpha1.SftpConnection) { c.Spec.Port = -1 }, "spec.port"},
		{"bad-slug", func(c *v1alpha1.SftpConnection) { c.Spec.Slug = "Not_A_Label" }, "spec.slug"},
		{"reserved-slug", func(c *v1alpha1.SftpConnection) { c.Spec.Slug = "metrics" }, "reserved"},
		{"name-defaults-slug", func(c *v1alpha1.SftpConnection) { c.Name, c.Spec.Slug = "defaults-"+ns, "" }, ""},
		{"reserved-name", func(c *v1alpha1.SftpConnection) { c.Name, c.Spec.Slug = "healthz", "" }, "reserved"},
		{"name-not-a-label", func(c *v1alpha1.SftpConnection) { c.Name, c.Spec.Slug = "has.dots", "" }, "set spec.slug"},
		{"empty-host", func(c *v1alpha1.SftpConnection) { c.Spec.Host = "" }, "spec.host"},
		{"host-with-spaces", func(c *v1alpha1.SftpConnection) { c.Spec.Host = "a b" }, "spec.host"},
		{"no-secret", func(c *v1alpha1.SftpConnection) { c.Spec.Credentials.SecretRef.Name = "" }, "secretRef.name"},
		{"pinned-and-insecure", func(c *v1alpha1.SftpConnection) {
			c.Spec.HostKey = v1alpha1.HostKeyTrust{Trusted: []string{"SHA256:" + strings.Repeat("A", 43)}, InsecureSkipVerify: true}
		}, "mutually exclusive"},
		{"bad-trusted-entry", func(c *v1alpha1.SftpConnection) {
			c.Spec.HostKey.Trusted = []string{"not a key at all"}
		}, "spec.hostKey.trusted[0]"},
		{"timeout-too-long", func(c *v1alpha1.SftpConnection) {
			c.Spec.Limits.ConnectTimeout = &metav1.Duration{Duration: time.Hour}
		}, "connectTimeout must be between"},
		{"too-many-connections", func(c *v1alpha1.SftpConnection) { c.Spec.Limits.MaxConnections = 1000 }, "maxConnections"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn := connection(ns, strings.ToLower(tc.name), "sftp.example.com", 0, "user", "creds")
			if tc.mutate != nil {
				tc.mutate(conn)
			}
			err := k8s.Create(context.Background(), conn)
			if tc.message == "" {
				if err != nil {
					t.Fatalf("valid spec rejected: %v", err)
				}
				if conn.Spec.Port != 22 {
					t.Errorf("port defaulted to %d, want 22", conn.Spec.Port)
				}
				return
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want Invalid, got %v", err)
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Errorf("error %q does not mention %q", err, tc.message)
			}
		})
	}
}

// TestTestsAreSharedFairly: a namespace with many connections to a host
// that accepts TCP and never speaks (each test waits its connectTimeout)
// tests a few at once; another namespace's new connection is tested, and
// Ready, while that backlog is still far from through.
func TestTestsAreSharedFairly(t *testing.T) {
	t.Parallel()
	silent := testsftp.Silent(t)
	busy, fresh := newNamespace(t), newNamespace(t)
	create(t, passwordSecret(busy, "creds", "x"))
	const backlog = 12
	var stuck []*v1alpha1.SftpConnection
	for i := range backlog {
		c := connection(busy, fmt.Sprintf("silent-%d", i), "127.0.0.1", silent, "u", "creds")
		c.Spec.Limits.ConnectTimeout = &metav1.Duration{Duration: 30 * time.Second}
		create(t, c)
		stuck = append(stuck, c)
	}

	server := testsftp.Start(t)
	create(t, passwordSecret(fresh, "creds", server.Password))
	mine := inProcessConnection(fresh, "mine", server, "creds")
	create(t, mine)
	waitForReady(t, mine, metav1.ConditionTrue, v1alpha1.ReasonConnected)
	tested := 0
	for _, c := range stuck {
		must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(c), c))
		if c.Status.LastTestTime != nil {
			tested++
		}
	}
	// Two at a time, each taking 30 seconds: the first two at most.
	if tested > 2 {
		t.Errorf("%d of the other namespace's %d tests ended before this one's, want at most 2", tested, backlog)
	}
}

// TestNewOrFailingTestsAreBudgeted: a namespace making connection after
// connection to probe a server gets testBudget tests a minute (retests of
// failures included), no more; another namespace's tests go ahead.
func TestNewOrFailingTestsAreBudgeted(t *testing.T) {
	t.Parallel()
	// The probed server: it counts connections, and hangs up at once.
	probed, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	t.Cleanup(func() { _ = probed.Close() })
	var attempts atomic.Int32
	go func() {
		for {
			c, err := probed.Accept()
			if err != nil {
				return
			}
			attempts.Add(1)
			_ = c.Close()
		}
	}()
	port := int32(probed.Addr().(*net.TCPAddr).Port) //nolint:forcetypeassert // a TCP listener
	prober, other := newNamespace(t), newNamespace(t)
	create(t, passwordSecret(prober, "creds", "x"))
	start := time.Now()
	for i := range 2 * testBudget {
		create(t, connection(prober, fmt.Sprintf("probe-%d", i), "127.0.0.1", port, "u", "creds"))
	}
	testkit.EventuallyFound(t, fmt.Sprintf("the budget of %d probes", testBudget), func() (bool, string) {
		n := attempts.Load()
		return n >= testBudget, fmt.Sprintf("%d probes", n)
	})

	server := testsftp.Start(t)
	create(t, passwordSecret(other, "creds", server.Password))
	mine := inProcessConnection(other, "mine", server, "creds")
	create(t, mine)
	waitForReady(t, mine, metav1.ConditionTrue, v1alpha1.ReasonConnected)
	// One more test each minute / testBudget: at most that many since.
	elapsed := time.Since(start)
	if n, most := int(attempts.Load()), testBudget+1+int(elapsed/(time.Minute/testBudget)); n > most {
		t.Errorf("%d probes in %s, want at most %d", n, elapsed.Round(time.Second), most)
	}
}
