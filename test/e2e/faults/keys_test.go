package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
)

// TestKeysDecidedByTheGateway: the gateway decides the tokens of the keys
// the manager issues from what the manager wrote (the token's hash in the
// key's status, Ready for its generation) and the key's scope: a scoped key
// runs its commands on its connections and is refused others (403), a
// connection of another namespace is none to it (404), a token no key
// holds is unknown (401); after a rotation the old token is unknown and
// the new one works; a disabled key is refused as such.
func TestKeysDecidedByTheGateway(t *testing.T) {
	ctx := context.Background()
	srv := testsftp.Start(t)
	must(t, os.WriteFile(filepath.Join(srv.Dir, "report.csv"), []byte("a,b"), 0o644))
	ns, other := testkit.Namespace(t, k8s, "keys-"), testkit.Namespace(t, k8s, "keys-other-")
	reports := testkit.ReadyConnection(t, k8s, ns, "reports", srv.Login())
	archive := testkit.ReadyConnection(t, k8s, ns, "archive", srv.Login())
	theirs := testkit.ReadyConnection(t, k8s, other, "reports", srv.Login())
	scoped, token := issuedKey(t, ns, "scoped", func(k *v1alpha1.ApiKey) {
		k.Spec.Connections = []string{"reports"}
		k.Spec.Commands = []v1alpha1.Command{v1alpha1.CommandRead, v1alpha1.CommandList}
	})
	_, reader := issuedKey(t, ns, "reader", func(k *v1alpha1.ApiKey) { k.Spec.ReadOnly = true })

	const read, list, exists = `{"path": "report.csv"}`, `{"path": "/"}`, `{"path": "/"}`
	// Each key's first request waits until the gateway's cache has it:
	// the refusals after are its scope's, not a key unknown yet.
	decided(t, token, reports, "read", read, http.StatusOK, "")
	decided(t, token, reports, "list", list, http.StatusOK, "")
	decided(t, token, reports, "write", `{"path": "new", "file": {"text": "x"}}`, http.StatusForbidden, "may not run this command")
	decided(t, token, archive, "read", read, http.StatusForbidden, "may not use this connection")
	decided(t, token, theirs, "read", read, http.StatusNotFound, "no such connection")
	decided(t, reader, archive, "exists", exists, http.StatusOK, "")
	decided(t, reader, archive, "mkdir", `{"path": "new"}`, http.StatusForbidden, "may not run this command")
	decided(t, "sgk_nonsense", reports, "read", read, http.StatusUnauthorized, "unknown API key")
	decided(t, "", reports, "read", read, http.StatusUnauthorized, "")

	// A rotation: the new token works, and then the old one is unknown.
	patch := client.MergeFrom(scoped.DeepCopy())
	metav1.SetMetaDataAnnotation(&scoped.ObjectMeta, v1alpha1.AnnotationRotateRequestedAt, "2026-11-21T10:00:00Z")
	must(t, k8s.Patch(ctx, scoped, patch))
	eventually(t, "the key is rotated", func() bool {
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(scoped), scoped))
		return scoped.Status.LastHandledRotateRequest == "2026-11-21T10:00:00Z"
	})
	fresh := tokenIn(t, ns, scoped.Status.SecretName)
	if fresh == token {
		t.Fatal("the rotation issued no new token")
	}
	decided(t, fresh, reports, "read", read, http.StatusOK, "")
	decided(t, token, reports, "read", read, http.StatusUnauthorized, "unknown API key")

	// Disabled: refused as such, though its token is known.
	patch = client.MergeFrom(scoped.DeepCopy())
	scoped.Spec.Disabled = true
	must(t, k8s.Patch(ctx, scoped, patch))
	decided(t, fresh, reports, "read", read, http.StatusUnauthorized, "disabled")
}

// issuedKey makes a key whose token the manager generates into a Secret,
// and returns it once Ready with its token.
func issuedKey(t *testing.T, ns, name string, mutate func(*v1alpha1.ApiKey)) (*v1alpha1.ApiKey, string) {
	t.Helper()
	ctx := context.Background()
	key := &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	mutate(key)
	must(t, k8s.Create(ctx, key))
	eventually(t, "the key "+name+" is issued", func() bool {
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(key), key))
		return meta.IsStatusConditionTrue(key.Status.Conditions, v1alpha1.ConditionReady)
	})
	return key, tokenIn(t, ns, key.Status.SecretName)
}

// tokenIn is the token a key's Secret holds, as a client reads it.
func tokenIn(t *testing.T, ns, secret string) string {
	t.Helper()
	var s corev1.Secret
	must(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: secret}, &s))
	return strings.TrimSpace(string(s.Data[v1alpha1.SecretKeyToken]))
}

// decided waits until the gateway answers command, sent with token to
// conn, with status, and an error whose message says says.
func decided(t *testing.T, token string, conn *v1alpha1.SftpConnection, command, body string, status int, says string) {
	t.Helper()
	testkit.EventuallyFound(t, fmt.Sprintf("%s on %s/%s answered %d %q", command, conn.Namespace, conn.Name, status, says), func() (bool, string) {
		req, err := http.NewRequest(http.MethodPost, baseURL+"/"+conn.Spec.Slug+"/"+command, strings.NewReader(body))
		must(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := httpClient.Do(req)
		must(t, err)
		defer func() { _ = resp.Body.Close() }()
		raw, err := io.ReadAll(resp.Body)
		must(t, err)
		var answer struct {
			Error *struct{ Message string } `json:"error"`
		}
		_ = json.Unmarshal(raw, &answer)
		ok := resp.StatusCode == status
		if status == http.StatusOK {
			ok = ok && answer.Error == nil
		} else {
			ok = ok && answer.Error != nil && strings.Contains(answer.Error.Message, says)
		}
		return ok, fmt.Sprintf("%d %.200s", resp.StatusCode, raw)
	})
}
