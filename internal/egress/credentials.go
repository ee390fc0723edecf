package egress

import (
	"crypto/sha256"
	"encoding/hex"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CredentialsHash identifies one version of a tested endpoint's
// credentials Secret (an SftpConnection's, an ObjectStore's). It is made
// from the Secret's UID and resource version, never from its data, so it can
// be shown in status without helping anyone guess a password, and computed
// from the Secret's metadata alone.
func CredentialsHash(secret metav1.Object) string {
	sum := sha256.Sum256([]byte(string(secret.GetUID()) + "/" + secret.GetResourceVersion()))
	return "sha256:" + hex.EncodeToString(sum[:16])
}
