package egress

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCredentialsHash: a Secret's version is named by its UID and
// resource version, never by its data, so that status shows no more of
// a password than that it changed.
func TestCredentialsHash(t *testing.T) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{UID: "u1", ResourceVersion: "7"}, Data: map[string][]byte{"password": []byte("hunter2")}}
	first := CredentialsHash(secret)
	secret.Data["password"] = []byte("other")
	if again := CredentialsHash(secret); again != first || !strings.HasPrefix(first, "sha256:") {
		t.Errorf("the hash follows the data, or is not sha256: %s, %s", first, again)
	}
	secret.ResourceVersion = "8"
	if CredentialsHash(secret) == first {
		t.Error("a new version of the Secret has the old hash")
	}
}
