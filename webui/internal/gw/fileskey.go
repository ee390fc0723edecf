package gw

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/apitoken"
	"github.com/sftpgate/sftpgate/webui/internal/web"
)

// The file browser calls the gateway as the account: with an API key of
// the account's own, sftpgate-webui-files, which the UI makes in the
// account's namespace when first needed. Its token never leaves the UI:
// it is derived from the UI's secret (every replica derives the same) and
// the namespace, and the ApiKey holds only its hash. So the gateway bounds
// and rates an account's browsing as any key of its namespace, never
// another account's, and a browser holds nothing but its session cookie:
// logging out ends its access at once.

// filesKeyName names the file browser's key in each account's namespace;
// LabelFilesKey marks it, and the keys page leaves it out.
const (
	filesKeyName  = "sftpgate-webui-files"
	LabelFilesKey = "sftpgate.dev/webui-files"
)

// filesCommands are what the file browser runs.
var filesCommands = []v1alpha1.Command{"list", "stat", "read", "write", "mkdir", "rename", "unlink", "rmdir"}

// DerivedToken is a token of the UI's own for scope (a namespace, for
// the file browser's key): sgk_, a key id and 256 bits, all derived from
// the UI's secret.
func (u *Gateway) DerivedToken(scope string) (token, keyID string) {
	derive := func(purpose string) []byte {
		mac := hmac.New(sha256.New, u.filesSecret)
		mac.Write([]byte(purpose + "\x00" + scope))
		return mac.Sum(nil)
	}
	b32 := base32.StdEncoding.WithPadding(base32.NoPadding)
	keyID = strings.ToLower(b32.EncodeToString(derive("key id"))[:8])
	return apitoken.Prefix + keyID + "_" + b32.EncodeToString(derive("token")), keyID
}

// keyWait bounds how long a request waits for a key just made or changed
// to be issued (the ApiKey controller's status, which the gateway reads).
const keyWait = 10 * time.Second

// errKeyNotReady is a key of the UI's that did not become ready.
var errKeyNotReady = errors.New("the web UI's API key is not ready")

// filesKeySpec is the spec of the file browser's key with the token's hash.
func filesKeySpec(hash, keyID string) v1alpha1.ApiKeySpec {
	return v1alpha1.ApiKeySpec{Commands: filesCommands, Token: v1alpha1.TokenSource{SHA256: hash, KeyID: keyID}}
}

// filesKeyOf is namespace's file browser key as it should be, and its
// token.
func (u *Gateway) filesKeyOf(namespace string) (*v1alpha1.ApiKey, string) {
	token, keyID := u.DerivedToken(namespace)
	return &v1alpha1.ApiKey{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: filesKeyName, Labels: map[string]string{LabelFilesKey: "true"}},
		Spec:       filesKeySpec(apitoken.Hash(token), keyID),
	}, token
}

// MakeFilesKey makes the account's file browser key at sign-up and log-in,
// so that it holds its place in the account's key quota (one more than
// the account's keys); a failure is tried again when the browser is used.
func (u *Gateway) MakeFilesKey(ctx context.Context, namespace string) {
	want, _ := u.filesKeyOf(namespace)
	if _, err := u.ensureKey(ctx, want); err != nil {
		u.Log.Warn("making the file browser's key", "namespace", namespace, "error", err)
	}
}

// ensureKey makes the key want, or makes it the UI's own again (made
// with another secret, or changed by hand), and returns it.
func (u *Gateway) ensureKey(ctx context.Context, want *v1alpha1.ApiKey) (*v1alpha1.ApiKey, error) {
	for {
		key := &v1alpha1.ApiKey{}
		err := u.Client.Get(ctx, client.ObjectKeyFromObject(want), key)
		switch {
		case apierrors.IsNotFound(err):
			key = want.DeepCopy()
			err = u.Client.Create(ctx, key)
		case err == nil && !equality.Semantic.DeepEqual(key.Spec, want.Spec):
			key.Spec = want.Spec
			err = u.Client.Update(ctx, key)
		}
		// Another replica or tab made or changed it meanwhile: look again.
		if !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) {
			return key, err
		}
	}
}

// FilesKey returns namespace's file browser token once its key is issued.
func (u *Gateway) FilesKey(ctx context.Context, namespace string) (string, error) {
	want, token := u.filesKeyOf(namespace)
	err := u.ReadyKey(ctx, want, token)
	if apierrors.IsForbidden(err) {
		return "", &web.PersonError{Msg: "the file browser needs one of your account's API key places: revoke a key, then try again"}
	}
	return token, err
}

// ReadyKey makes the key want, of token, and waits until it is issued. A
// key found issued is trusted for a minute before it is looked at again,
// as long as its spec is still the one wanted: a changed one (a share
// link narrowed) is written and waited for at once.
func (u *Gateway) ReadyKey(ctx context.Context, want *v1alpha1.ApiKey, token string) error {
	hash := apitoken.Hash(token)
	name, spec := want.Namespace+"/"+want.Name, SpecHash(want.Spec)
	if u.filesKeys.fresh(name, spec) {
		return nil
	}
	key, err := u.ensureKey(ctx, want)
	if err != nil {
		return err
	}
	ready, err := untilKnown(ctx, func() (bool, error) {
		if issued(key, hash) {
			return true, nil
		}
		err := u.Client.Get(ctx, client.ObjectKeyFromObject(key), key)
		return err == nil && issued(key, hash), err
	})
	switch {
	case err != nil:
		return err
	case !ready:
		return errKeyNotReady
	}
	u.filesKeys.issued(name, spec)
	return nil
}

// SpecHash is a key's spec in short: its token's hash, commands,
// connections, paths and expiry.
func SpecHash(spec v1alpha1.ApiKeySpec) string {
	b, _ := json.Marshal(spec) //nolint:errchkjson // a spec of plain fields always encodes
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// untilKnown calls try at once, then every 100 ms until it is done, fails
// or keyWait has passed, and reports whether it got done: a key just made
// or changed is issued by its controller, and known to the gateway's
// watch, a moment after it was written.
func untilKnown(ctx context.Context, try func() (done bool, err error)) (bool, error) {
	for deadline := time.Now().Add(keyWait); ; {
		done, err := try()
		if done || err != nil || time.Now().After(deadline) {
			return done, err
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// issued says the key holds hash and is ready.
func issued(key *v1alpha1.ApiKey, hash string) bool {
	ready := meta.FindStatusCondition(key.Status.Conditions, v1alpha1.ConditionReady)
	return key.Status.TokenSHA256 == hash && ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == key.Generation
}

// issuedKeys remembers, per key (namespace/name), the spec of the UI's
// key found issued (specHash) and when: a part of an upload need not ask
// the API server.
type issuedKeys struct {
	mu   sync.Mutex
	seen map[string]issuedKey
}

type issuedKey struct {
	spec string
	at   time.Time
}

// keyTrust is how long a key found issued is trusted; maxIssuedKeys bounds
// the namespaces remembered (past it, all are forgotten).
const (
	keyTrust      = time.Minute
	maxIssuedKeys = 10000
)

func (k *issuedKeys) fresh(key, spec string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	seen, ok := k.seen[key]
	return ok && seen.spec == spec && time.Since(seen.at) < keyTrust
}

func (k *issuedKeys) issued(key, spec string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.seen == nil || len(k.seen) >= maxIssuedKeys {
		k.seen = map[string]issuedKey{}
	}
	k.seen[key] = issuedKey{spec: spec, at: time.Now()}
}
