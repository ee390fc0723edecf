package controllers_test

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/tests3"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
)

func storeSecret(ns, name, id, key string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		StringData: map[string]string{v1alpha1.SecretKeyAccessKeyID: id, v1alpha1.SecretKeySecretAccessKey: key}}
}

func objectStore(ns, name, endpoint, bucket, secret string) *v1alpha1.ObjectStore {
	return &v1alpha1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.ObjectStoreSpec{Endpoint: endpoint, Bucket: bucket, Prefix: "feeds/", Addressing: v1alpha1.AddressingPath,
			Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.LocalSecretReference{Name: secret}}}}
}

// TestObjectStoreIsTested: a store is tested on create and on change of
// its Secret, as a connection is, with the reasons of what failed; the
// dial policy holds for it too.
func TestObjectStoreIsTested(t *testing.T) {
	t.Parallel()
	s := tests3.Start(t)
	s.Bucket(t, "exchange")
	ns := newNamespace(t)
	create(t, storeSecret(ns, "creds", s.AccessKey, s.SecretKey))
	store := objectStore(ns, "bucket", "http://"+s.Endpoint, "exchange", "creds")
	create(t, store)
	got := waitForReady(t, store, metav1.ConditionTrue, v1alpha1.ReasonConnected)
	if got.Status.ObservedGeneration != got.Generation || got.Status.LastTestTime == nil || got.Status.CredentialsHash == "" {
		t.Errorf("status: %+v", got.Status)
	}
	if got.Spec.Limits.PartSizeMiB != 8 || got.Spec.Limits.PartsInFlight != 4 || got.Spec.Region != "us-east-1" {
		t.Errorf("defaults: %+v", got.Spec)
	}
	waitForEvent(t, store, corev1.EventTypeNormal, v1alpha1.ReasonConnected)
	assertNoSecret(t, got, s.SecretKey)

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	_ = closed.Close()
	create(t, storeSecret(ns, "wrong", s.AccessKey, "not-the-key"))
	create(t, storeSecret(ns, "incomplete", s.AccessKey, ""))
	silent := testsftp.Silent(t)
	for _, tc := range []struct {
		name, endpoint, bucket, secret, reason string
		stalled                                bool
	}{
		{"no-bucket", "http://" + s.Endpoint, "missing", "creds", v1alpha1.ReasonBucketNotFound, false},
		{"wrong-key", "http://" + s.Endpoint, "exchange", "wrong", v1alpha1.ReasonAuthenticationFailed, true},
		{"incomplete-secret", "http://" + s.Endpoint, "exchange", "incomplete", v1alpha1.ReasonInvalidCredentials, true},
		{"closed-port", "http://" + closedAddr, "exchange", "creds", v1alpha1.ReasonConnectionRefused, false},
		{"metadata-endpoint", "http://169.254.169.254", "exchange", "creds", v1alpha1.ReasonDestinationNotAllowed, true},
		{"silent-server", fmt.Sprintf("http://127.0.0.1:%d", silent), "exchange", "creds", v1alpha1.ReasonTimeout, false},
		{"tls-to-plain", "https://" + s.Endpoint, "exchange", "creds", v1alpha1.ReasonTLSHandshakeFailed, false},
		{"secret-later", "http://" + s.Endpoint, "exchange", "later", v1alpha1.ReasonSecretNotFound, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := objectStore(ns, tc.name, tc.endpoint, tc.bucket, tc.secret)
			st.Spec.Limits.ConnectTimeout = &metav1.Duration{Duration: time.Second}
			st.Spec.Limits.OperationTimeout = &metav1.Duration{Duration: 2 * time.Second}
			create(t, st)
			got := waitForReady(t, st, metav1.ConditionFalse, tc.reason)
			if stalled := meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionStalled); stalled != tc.stalled {
				t.Errorf("stalled = %v, want %v", stalled, tc.stalled)
			}
			assertNoSecret(t, got, s.SecretKey)
			if tc.reason == v1alpha1.ReasonSecretNotFound {
				create(t, storeSecret(ns, "later", s.AccessKey, s.SecretKey))
				waitForReady(t, st, metav1.ConditionTrue, v1alpha1.ReasonConnected)
			}
		})
	}
}

// TestInvalidObjectStoresAreRejected: the API server refuses what could
// never work, with the field named.
func TestInvalidObjectStoresAreRejected(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	for _, tc := range []struct {
		name    string
		mutate  func(*v1alpha1.ObjectStore)
		message string
	}{
		{"valid", nil, ""},
		{"endpoint-with-path", func(s *v1alpha1.ObjectStore) { s.Spec.Endpoint = "https://s3.example.com/bucket" }, "spec.endpoint"},
		{"endpoint-not-http", func(s *v1alpha1.ObjectStore) { s.Spec.Endpoint = "s3://bucket" }, "spec.endpoint"},
		{"endpoint-with-user", func(s *v1alpha1.ObjectStore) { s.Spec.Endpoint = "https://key:secret@s3.example.com" }, "spec.endpoint"},
		{"bucket-upper-case", func(s *v1alpha1.ObjectStore) { s.Spec.Bucket = "Reports" }, "spec.bucket"},
		{"prefix-absolute", func(s *v1alpha1.ObjectStore) { s.Spec.Prefix = "/reports/" }, "spec.prefix"},
		{"prefix-no-slash", func(s *v1alpha1.ObjectStore) { s.Spec.Prefix = "reports" }, "spec.prefix"},
		{"prefix-dot-dot", func(s *v1alpha1.ObjectStore) { s.Spec.Prefix = "a/../b/" }, "spec.prefix"},
		{"addressing", func(s *v1alpha1.ObjectStore) { s.Spec.Addressing = "Sideways" }, "spec.addressing"},
		{"part-too-small", func(s *v1alpha1.ObjectStore) { s.Spec.Limits.PartSizeMiB = 1 }, "partSizeMiB"},
		{"too-many-parts-in-flight", func(s *v1alpha1.ObjectStore) { s.Spec.Limits.PartsInFlight = 64 }, "partsInFlight"},
		{"timeout-too-long", func(s *v1alpha1.ObjectStore) {
			s.Spec.Limits.OperationTimeout = &metav1.Duration{Duration: 2 * time.Hour}
		}, "operationTimeout must be between"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := objectStore(ns, tc.name, "https://s3.example.com", "reports", "creds")
			if tc.mutate != nil {
				tc.mutate(store)
			}
			err := k8s.Create(t.Context(), store)
			switch {
			case tc.message == "" && err != nil:
				t.Fatalf("valid spec rejected: %v", err)
			case tc.message != "" && (err == nil || !strings.Contains(err.Error(), tc.message)):
				t.Fatalf("want a rejection naming %q, got %v", tc.message, err)
			}
		})
	}
}
