package webui

// The file browser calls the gateway as the account: with an API key of
// the account's own, sftpgate-webui-files, which the UI makes in the
// account's namespace when first needed. Its token never leaves the UI:
// it is derived from the UI's secret (every replica derives the same) and
// the namespace, and the ApiKey holds only its hash. So the gateway bounds
// and rates an account's browsing as any key of its namespace, never
// another account's, and a browser holds nothing but its session cookie:
// logging out ends its access at once.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/apitoken"
)

// filesKeyName names the file browser's key in each account's namespace;
// LabelFilesKey marks it, and the keys page leaves it out.
const (
	filesKeyName  = "sftpgate-webui-files"
	LabelFilesKey = "sftpgate.dev/webui-files"
)

// filesCommands are what the file browser runs.
var filesCommands = []v1alpha1.Command{"list", "stat", "read", "write", "mkdir", "rename", "unlink", "rmdir"}

// filesToken is the file browser's token for namespace: sgk_, a key id and
// 256 bits, all derived from the UI's secret.
func (u *ui) filesToken(namespace string) (token, keyID string) {
	derive := func(purpose string) []byte {
		mac := hmac.New(sha256.New, u.filesSecret)
		mac.Write([]byte(purpose + "\x00" + namespace))
		return mac.Sum(nil)
	}
	b32 := base32.StdEncoding.WithPadding(base32.NoPadding)
	keyID = strings.ToLower(b32.EncodeToString(derive("key id"))[:8])
	return apitoken.Prefix + keyID + "_" + b32.EncodeToString(derive("token")), keyID
}

// keyWait bounds how long a request waits for a key just made or changed
// to be issued (the ApiKey controller's status, which the gateway reads).
const keyWait = 10 * time.Second

// errFilesKey is a file browser key that did not become ready.
var errFilesKey = errors.New("the file browser's API key is not ready")

// filesKey makes sure namespace has the file browser's key, with the
// token's hash, and returns the token once the key is issued.
func (u *ui) filesKey(ctx context.Context, namespace string) (string, error) {
	token, keyID := u.filesToken(namespace)
	hash := apitoken.Hash(token)
	key := &v1alpha1.ApiKey{}
	err := u.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: filesKeyName}, key)
	switch {
	case apierrors.IsNotFound(err):
		key = &v1alpha1.ApiKey{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: filesKeyName, Labels: map[string]string{LabelFilesKey: "true"}},
			Spec: v1alpha1.ApiKeySpec{Commands: filesCommands,
				Token: v1alpha1.TokenSource{SHA256: hash, KeyID: keyID}},
		}
		err = u.client.Create(ctx, key)
	case err == nil && (key.Spec.Token.SHA256 != hash || key.Spec.Disabled || key.Spec.ExpiresAt != nil):
		// Made with another secret (--session-key-file changed), or
		// changed by hand: the UI's own again.
		key.Spec = v1alpha1.ApiKeySpec{Commands: filesCommands, Token: v1alpha1.TokenSource{SHA256: hash, KeyID: keyID}}
		err = u.client.Update(ctx, key)
	}
	if err != nil {
		return "", err
	}
	for deadline := time.Now().Add(keyWait); !issued(key, hash); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			return "", errFilesKey
		}
		if err := u.client.Get(ctx, client.ObjectKeyFromObject(key), key); err != nil {
			return "", err
		}
	}
	return token, nil
}

// issued says the key holds hash and is ready.
func issued(key *v1alpha1.ApiKey, hash string) bool {
	ready := meta.FindStatusCondition(key.Status.Conditions, v1alpha1.ConditionReady)
	return key.Status.TokenSHA256 == hash && ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == key.Generation
}
