package controllers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/internal/apitoken"
)

func apiKey(ns, name string, mutate ...func(*v1alpha1.ApiKey)) *v1alpha1.ApiKey {
	k := &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for _, m := range mutate {
		m(k)
	}
	return k
}

// tokenIn reads the token of a Secret, as `kubectl get secret -o jsonpath`
// would.
func tokenIn(t *testing.T, ns, name string) (string, *corev1.Secret) {
	t.Helper()
	var s corev1.Secret
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		t.Fatal(err)
	}
	return string(s.Data[v1alpha1.SecretKeyToken]), &s
}

// issuedKey creates a key whose token the controller generates, and waits
// until it is issued.
func issuedKey(t *testing.T, ns, name string, mutate ...func(*v1alpha1.ApiKey)) (*v1alpha1.ApiKey, string) {
	t.Helper()
	key := apiKey(ns, name, mutate...)
	create(t, key)
	got := waitForReady(t, key, metav1.ConditionTrue, v1alpha1.ReasonIssued)
	token, _ := tokenIn(t, ns, got.Status.SecretName)
	return got, token
}

// waitForHash waits until the key's status matches token.
func waitForHash(t *testing.T, key *v1alpha1.ApiKey, token string) *v1alpha1.ApiKey {
	t.Helper()
	return waitFor(t, key, "status.tokenSHA256 matches the token", func(k *v1alpha1.ApiKey) bool {
		return k.Status.TokenSHA256 == apitoken.Hash(token)
	})
}

// found is what a request with a token finds among ApiKeys, by the
// token's hash in their status (apitoken.TokenHashes, the index the
// gateway keeps of its cache), for a connection of a namespace: what the
// controller writes, from which the gateway decides (gateway/keyauth's
// tests decide from it, and test/e2e's through the gateway).
type found string

const (
	// unknown: no key holds the token (the gateway: unknown API key, 401).
	unknown found = "no key"
	// usable: one key holds it, of the connection's namespace, Ready for
	// its generation (the gateway: as its scope says).
	usable found = "a usable key of the namespace"
	// refused: one key holds it, not Ready: disabled, expired (the
	// gateway: 401, saying why).
	refused found = "a key not Ready"
	// elsewhere: one usable key holds it, of another namespace (the
	// gateway: no such connection, 404).
	elsewhere found = "a usable key of another namespace"
	// several: more than one key holds it (the gateway: not ready, 401).
	several found = "several keys"
)

// lookup waits until a request with token to a connection of ns finds
// want.
func lookup(t *testing.T, token, ns string, want found) {
	t.Helper()
	hash := apitoken.Hash(token)
	testkit.EventuallyFound(t, fmt.Sprintf("a token for %s finds %s", ns, want), func() (bool, string) {
		var keys v1alpha1.ApiKeyList
		must(t, k8s.List(context.Background(), &keys))
		var holders []*v1alpha1.ApiKey
		for i := range keys.Items {
			if slices.Contains(apitoken.TokenHashes(&keys.Items[i]), hash) {
				holders = append(holders, &keys.Items[i])
			}
		}
		got := lookedUp(holders, ns)
		return got == want, string(got)
	})
}

// lookedUp is what holders, the keys holding a token, are for a connection
// of ns.
func lookedUp(holders []*v1alpha1.ApiKey, ns string) found {
	switch len(holders) {
	case 0:
		return unknown
	case 1:
	default:
		return several
	}
	key := holders[0]
	ready := readyCondition(key)
	switch {
	case ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != key.Generation:
		return refused
	case key.Namespace != ns:
		return elsewhere
	}
	return usable
}

func TestGeneratedKey(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	key := apiKey(ns, "ci")
	create(t, key)

	got := waitForReady(t, key, metav1.ConditionTrue, v1alpha1.ReasonIssued)
	token, secret := tokenIn(t, ns, "ci")
	if !strings.HasPrefix(token, "sgk_"+got.Status.KeyID+"_") {
		t.Errorf("token does not carry key id %q", got.Status.KeyID)
	}
	if got.Status.TokenSHA256 != apitoken.Hash(token) || got.Status.SecretName != "ci" || got.Status.IssuedAt == nil {
		t.Errorf("status = %+v", got.Status)
	}
	// envtest runs no garbage collector: assert the reference that makes
	// the Secret go with its ApiKey.
	if owner := metav1.GetControllerOf(secret); owner == nil || owner.UID != got.UID || owner.Kind != "ApiKey" {
		t.Errorf("Secret's controller reference = %+v", owner)
	}
	if secret.Labels[v1alpha1.LabelManagedBy] != "sftpgate" || secret.Labels[v1alpha1.LabelApiKey] != "ci" {
		t.Errorf("Secret labels = %v", secret.Labels)
	}
	waitForEvent(t, got, corev1.EventTypeNormal, "TokenIssued")
	assertNoSecret(t, got, token)
	lookup(t, token, ns, usable)
}

// TestIssueIsIdempotent runs many reconcilers at once on one key, besides
// the manager's, then a fresh one as after a restart: exactly one token is
// ever issued.
func TestIssueIsIdempotent(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	key := apiKey(ns, "racy")
	create(t, key)

	recorder := events.NewFakeRecorder(100)
	reconcileOnce := func() {
		r := managerOptions.ApiKeyReconciler(mgr)
		r.APIReader, r.Recorder = k8s, recorder
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(key)}); err != nil {
			t.Error(err)
		}
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(reconcileOnce)
	}
	wg.Wait()
	got := waitForReady(t, key, metav1.ConditionTrue, v1alpha1.ReasonIssued)
	token, secret := tokenIn(t, ns, "racy")
	got = waitForHash(t, got, token)

	reconcileOnce() // a new manager's first pass
	after, secretAfter := tokenIn(t, ns, "racy")
	final := waitForHash(t, got, after)
	if after != token || secretAfter.ResourceVersion != secret.ResourceVersion || !final.Status.IssuedAt.Equal(got.Status.IssuedAt) {
		t.Errorf("the token was issued again")
	}
	// Every issuance is announced with its key id: all announcements, from
	// the racing reconcilers and the manager, name the one token.
	close(recorder.Events)
	var fake []string
	for e := range recorder.Events {
		fake = append(fake, e)
	}
	// The manager's events are written asynchronously: wait until the
	// issuance was announced by someone.
	testkit.EventuallyFound(t, "the issuance is announced", func() (bool, string) {
		var list eventsv1.EventList
		if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		notes := slices.Clone(fake)
		for _, e := range list.Items {
			notes = append(notes, e.Note)
		}
		issued := 0
		for _, n := range notes {
			if !strings.HasPrefix(strings.TrimPrefix(n, "Normal TokenIssued "), "issued key") {
				continue
			}
			issued++
			if !strings.Contains(n, final.Status.KeyID) {
				t.Fatalf("a second token was issued: %q (the key's is %s)", n, final.Status.KeyID)
			}
		}
		return issued > 0, fmt.Sprintf("%q", notes)
	})
}

func TestExistingSecret(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	key := apiKey(ns, "byo", func(k *v1alpha1.ApiKey) {
		k.Spec.Token.ExistingSecret = &v1alpha1.SecretKeySelector{Name: "sealed", Key: "api-key"}
	})
	create(t, key)
	waitForReady(t, key, metav1.ConditionFalse, v1alpha1.ReasonSecretNotFound)

	first := strings.Repeat("0123456789abcdef", 3)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sealed"},
		StringData: map[string]string{"api-key": first + "\n"}}
	create(t, secret)
	// A Secret not labelled for the purpose is not read: an ApiKey must not
	// be a way to learn hashes of other Secrets.
	got := waitForReady(t, key, metav1.ConditionFalse, v1alpha1.ReasonInvalidToken)
	if msg := readyCondition(got).Message; got.Status.TokenSHA256 != "" || !strings.Contains(msg, v1alpha1.LabelApiKeyToken) || strings.Contains(msg, "api-key\"") {
		t.Errorf("unlabelled Secret: hash %q, message %q", got.Status.TokenSHA256, msg)
	}
	secret.Labels = map[string]string{v1alpha1.LabelApiKeyToken: "true"}
	if err := k8s.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	got = waitForReady(t, key, metav1.ConditionTrue, v1alpha1.ReasonIssued)
	waitForHash(t, got, first)
	if got.Status.KeyID != apitoken.Hash(first)[:8] {
		t.Errorf("keyID = %q", got.Status.KeyID)
	}

	// The user rotates the token in their Secret: the old one stops working.
	second := strings.Repeat("fedcba9876543210", 3)
	secret.StringData = map[string]string{"api-key": second}
	if err := k8s.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	waitForHash(t, got, second)
	lookup(t, first, ns, unknown)
	lookup(t, second, ns, usable)
	assertNoSecret(t, got, second)

	// A token too short to be a secret is refused, and forgotten.
	secret.StringData = map[string]string{"api-key": "short"}
	if err := k8s.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	got = waitForReady(t, key, metav1.ConditionFalse, v1alpha1.ReasonInvalidToken)
	if got.Status.TokenSHA256 != "" {
		t.Errorf("an invalid token left a hash in status")
	}
	lookup(t, second, ns, unknown)
	var original corev1.Secret
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(secret), &original); err != nil || len(original.OwnerReferences) > 0 {
		t.Errorf("the controller changed the user's Secret: %v %v", err, original.OwnerReferences)
	}
}

func TestHashOnlyKey(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	token, keyID := apitoken.NewToken()
	key := apiKey(ns, "from-ui", func(k *v1alpha1.ApiKey) {
		k.Spec.Token = v1alpha1.TokenSource{SHA256: apitoken.Hash(token), KeyID: keyID}
	})
	create(t, key)
	got := waitForReady(t, key, metav1.ConditionTrue, v1alpha1.ReasonIssued)
	if got.Status.TokenSHA256 != apitoken.Hash(token) || got.Status.KeyID != keyID || got.Status.SecretName != "" {
		t.Errorf("status = %+v", got.Status)
	}
	var secrets corev1.SecretList
	if err := k8s.List(context.Background(), &secrets, client.InNamespace(ns)); err != nil || len(secrets.Items) != 0 {
		t.Errorf("a hash-only key made Secrets: %v, %d", err, len(secrets.Items))
	}
	lookup(t, token, ns, usable)
	assertNoSecret(t, got, token)
}

func TestRotation(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	got, old := issuedKey(t, ns, "rotating")
	lookup(t, old, ns, usable)

	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		v1alpha1.AnnotationRotateRequestedAt: "2026-11-21T10:00:00Z"}}})
	if err := k8s.Patch(context.Background(), got, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
	got = waitFor(t, got, "rotated", func(k *v1alpha1.ApiKey) bool {
		return k.Status.LastHandledRotateRequest == "2026-11-21T10:00:00Z"
	})
	fresh, _ := tokenIn(t, ns, "rotating")
	if fresh == old || got.Status.TokenSHA256 != apitoken.Hash(fresh) {
		t.Fatalf("no new token after rotation")
	}
	waitForEvent(t, got, corev1.EventTypeNormal, "TokenRotated")
	assertNoSecret(t, got, old)
	assertNoSecret(t, got, fresh)
	lookup(t, old, ns, unknown)
	lookup(t, fresh, ns, usable)
}

// TestExpiryFlipsWithoutAnEdit: a key seen issued is expired when its
// time comes, with no edit to wake the controller. A machine too slow to
// issue the key before it expires proves nothing: the key is made again,
// expiring later each time, until it is seen issued first.
func TestExpiryFlipsWithoutAnEdit(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	for lead, attempt := 5*time.Second, 1; ; lead, attempt = 2*lead, attempt+1 {
		name := fmt.Sprintf("short-lived-%d", attempt)
		expires := metav1.NewTime(time.Now().Add(lead).Truncate(time.Second))
		key := apiKey(ns, name, func(k *v1alpha1.ApiKey) { k.Spec.ExpiresAt = &expires })
		create(t, key)
		got := waitFor(t, key, "issued or expired", func(k *v1alpha1.ApiKey) bool {
			ready := meta.FindStatusCondition(k.Status.Conditions, v1alpha1.ConditionReady)
			return ready != nil && (ready.Reason == v1alpha1.ReasonIssued || ready.Reason == v1alpha1.ReasonExpired)
		})
		if !meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady) {
			if attempt == 4 {
				t.Fatalf("the key expired before it was seen issued %d times, the last with %s to go", attempt, lead)
			}
			continue
		}
		token, _ := tokenIn(t, ns, got.Status.SecretName)
		got = waitForReady(t, got, metav1.ConditionFalse, v1alpha1.ReasonExpired)
		if got.Generation != 1 {
			t.Errorf("the key was edited (generation %d)", got.Generation)
		}
		lookup(t, token, ns, refused)
		return
	}
}

func TestDisable(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	got, token := issuedKey(t, ns, "revoked")

	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Disabled = true
	if err := k8s.Patch(context.Background(), got, patch); err != nil {
		t.Fatal(err)
	}
	waitForReady(t, got, metav1.ConditionFalse, v1alpha1.ReasonDisabled)
	lookup(t, token, ns, refused)
}

func TestDeletedSecretIsIssuedAgain(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	got, old := issuedKey(t, ns, "lost", func(k *v1alpha1.ApiKey) { k.Spec.Token.SecretName = "lost-token" })
	_, secret := tokenIn(t, ns, "lost-token")

	if err := k8s.Delete(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	got = waitFor(t, got, "a new token", func(k *v1alpha1.ApiKey) bool {
		return k.Status.TokenSHA256 != "" && k.Status.TokenSHA256 != apitoken.Hash(old)
	})
	fresh, _ := tokenIn(t, ns, "lost-token")
	if got.Status.TokenSHA256 != apitoken.Hash(fresh) {
		t.Errorf("status does not match the new Secret")
	}
	lookup(t, old, ns, unknown)
}

func TestForeignSecretIsNeverOverwritten(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"},
		StringData: map[string]string{"token": "someone else's"}})
	key := apiKey(ns, "taken")
	create(t, key)
	got := waitForReady(t, key, metav1.ConditionFalse, v1alpha1.ReasonSecretNotOwned)
	if token, _ := tokenIn(t, ns, "taken"); token != "someone else's" || got.Status.TokenSHA256 != "" {
		t.Errorf("the Secret was overwritten, or its hash recorded")
	}
}

// TestSwitchingSecretsDeletesTheOldOne: a Secret the key no longer issues
// into is deleted, so switching back issues a new token instead of
// reviving the old one.
func TestSwitchingSecretsDeletesTheOldOne(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	got, first := issuedKey(t, ns, "moving", func(k *v1alpha1.ApiKey) { k.Spec.Token.SecretName = "one" })

	move := func(to string) {
		t.Helper()
		patch := client.MergeFrom(got.DeepCopy())
		got.Spec.Token.SecretName = to
		if err := k8s.Patch(context.Background(), got, patch); err != nil {
			t.Fatal(err)
		}
		got = waitFor(t, got, "issued into "+to, func(k *v1alpha1.ApiKey) bool {
			return k.Status.SecretName == to && k.Status.ObservedGeneration == k.Generation
		})
	}
	move("two")
	waitForEvent(t, got, corev1.EventTypeNormal, "SecretDeleted")
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "one"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Secret one still exists: %v", err)
	}
	move("one")
	if again, _ := tokenIn(t, ns, "one"); again == first {
		t.Errorf("switching back revived the old token")
	}
	lookup(t, first, ns, unknown)
}

func TestDuplicateTokenIsRefused(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	token, _ := apitoken.NewToken()
	hashOnly := func(k *v1alpha1.ApiKey) { k.Spec.Token.SHA256 = apitoken.Hash(token) }
	first := apiKey(ns, "first", hashOnly)
	create(t, first)
	waitForReady(t, first, metav1.ConditionTrue, v1alpha1.ReasonIssued)
	copied := apiKey(ns, "copied", hashOnly, func(k *v1alpha1.ApiKey) { k.Spec.Disabled = true })
	create(t, copied)
	got := waitForReady(t, copied, metav1.ConditionFalse, v1alpha1.ReasonDuplicateToken)
	if got.Status.TokenSHA256 != "" {
		t.Errorf("the duplicate recorded the hash")
	}
	// The first key is unaffected by the copy (whose disabled flag would
	// otherwise make the answer depend on which key the lookup found).
	lookup(t, token, ns, usable)
}

// TestTokenBelongsToOneKeyInTheCluster: a hash another namespace's key
// holds is refused, without naming that key; an older key edited to the
// hash does not take it over; deleting and recreating the holder keeps
// it; once the holder lets it go for good, a refused key gets it after the
// grace period.
func TestTokenBelongsToOneKeyInTheCluster(t *testing.T) {
	t.Parallel()
	victim, attacker := newNamespace(t), newNamespace(t)
	token, _ := apitoken.NewToken()
	hashOnly := func(k *v1alpha1.ApiKey) { k.Spec.Token.SHA256 = apitoken.Hash(token) }
	// The attacker's key is the older: made before the victim's, with
	// another token, and edited to the victim's hash once it is public.
	older := apiKey(attacker, "older", func(k *v1alpha1.ApiKey) { k.Spec.Token.SHA256 = apitoken.Hash("sgk_" + strings.Repeat("x", 40)) })
	create(t, older)
	waitForReady(t, older, metav1.ConditionTrue, v1alpha1.ReasonIssued)
	time.Sleep(1100 * time.Millisecond) // creation times have a resolution of a second
	held := apiKey(victim, "held", hashOnly)
	create(t, held)
	waitForReady(t, held, metav1.ConditionTrue, v1alpha1.ReasonIssued)

	copied := apiKey(attacker, "copied", hashOnly)
	create(t, copied)
	got := waitForReady(t, copied, metav1.ConditionFalse, v1alpha1.ReasonDuplicateToken)
	if msg := readyCondition(got).Message; got.Status.TokenSHA256 != "" || strings.Contains(msg, "held") || strings.Contains(msg, victim) {
		t.Errorf("the copy: hash %q, message %q; want no hash, and nothing of the other namespace", got.Status.TokenSHA256, msg)
	}
	must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(older), older))
	patch := client.MergeFrom(older.DeepCopy())
	hashOnly(older)
	must(t, k8s.Patch(context.Background(), older, patch))
	waitForReady(t, older, metav1.ConditionFalse, v1alpha1.ReasonDuplicateToken)
	lookup(t, token, victim, usable)

	// The victim deletes and recreates its key (kubectl replace --force, an
	// Argo CD Replace): the token is held for its namespace, and the new
	// key gets it, though the attacker's keys are older.
	must(t, k8s.Delete(context.Background(), held))
	got = waitFor(t, copied, "the token held for the namespace that freed it", func(k *v1alpha1.ApiKey) bool {
		return strings.Contains(readyCondition(k).Message, "held for that namespace until")
	})
	if msg := readyCondition(got).Message; strings.Contains(msg, victim) {
		t.Errorf("the reservation names the other namespace: %q", msg)
	}
	again := apiKey(victim, "again", hashOnly)
	create(t, again)
	waitForReady(t, again, metav1.ConditionTrue, v1alpha1.ReasonIssued)
	lookup(t, token, victim, usable)

	// Deleted for good: after the grace period, the token passes to one of
	// the refused keys, in the attacker's namespace, where it reaches only
	// the attacker's own connections.
	must(t, k8s.Delete(context.Background(), again))
	waitFor(t, older, "a refused key takes the token over", func(k *v1alpha1.ApiKey) bool {
		must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(copied), copied))
		return meta.IsStatusConditionTrue(k.Status.Conditions, v1alpha1.ConditionReady) != meta.IsStatusConditionTrue(copied.Status.Conditions, v1alpha1.ConditionReady)
	})
	lookup(t, token, victim, elsewhere)
}

// TestScopedKeysAreIssued: a key with a scope is issued as any other,
// its scope as written: a request with its token finds it usable in its
// namespace, and no key of another namespace's. What its scope allows is
// the gateway's decision (gateway/keyauth's TestDecide, and through the
// gateway test/e2e/faults' TestKeysDecidedByTheGateway).
func TestScopedKeysAreIssued(t *testing.T) {
	t.Parallel()
	ns, other := newNamespace(t), newNamespace(t)
	scoped, token := issuedKey(t, ns, "scoped", func(k *v1alpha1.ApiKey) {
		k.Spec.Connections = []string{"reports"}
		k.Spec.Commands = []v1alpha1.Command{v1alpha1.CommandRead, v1alpha1.CommandList}
	})
	reader, readerToken := issuedKey(t, ns, "reader", func(k *v1alpha1.ApiKey) { k.Spec.ReadOnly = true })
	if !slices.Equal(scoped.Spec.Connections, []string{"reports"}) ||
		!slices.Equal(scoped.Spec.Commands, []v1alpha1.Command{v1alpha1.CommandRead, v1alpha1.CommandList}) || !reader.Spec.ReadOnly {
		t.Errorf("the scopes changed: %+v, %+v", scoped.Spec, reader.Spec)
	}

	lookup(t, token, ns, usable)
	lookup(t, token, other, elsewhere)
	lookup(t, readerToken, ns, usable)
	lookup(t, "sgk_nonsense", ns, unknown)
	lookup(t, "", ns, unknown)
}

func TestInvalidApiKeysAreRejected(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	hash := strings.Repeat("ab", 32)
	cases := []struct {
		name    string
		mutate  func(*v1alpha1.ApiKey)
		message string
	}{
		{"readonly-and-commands", func(k *v1alpha1.ApiKey) {
			k.Spec.ReadOnly, k.Spec.Commands = true, []v1alpha1.Command{v1alpha1.CommandRead}
		}, "mutually exclusive"},
		{"unknown-command", func(k *v1alpha1.ApiKey) { k.Spec.Commands = []v1alpha1.Command{"format"} }, "spec.commands"},
		{"two-token-sources", func(k *v1alpha1.ApiKey) {
			k.Spec.Token = v1alpha1.TokenSource{SecretName: "a", SHA256: hash}
		}, "at most one"},
		{"bad-hash", func(k *v1alpha1.ApiKey) { k.Spec.Token.SHA256 = "ABC" }, "spec.token.sha256"},
		{"key-id-without-hash", func(k *v1alpha1.ApiKey) { k.Spec.Token.KeyID = "abcd1234" }, "keyID goes with sha256"},
		{"key-id-with-existing-secret", func(k *v1alpha1.ApiKey) {
			k.Spec.Token = v1alpha1.TokenSource{ExistingSecret: &v1alpha1.SecretKeySelector{Name: "s"}, KeyID: "abcd1234"}
		}, "keyID goes with sha256"},
		{"hash-of-nothing", func(k *v1alpha1.ApiKey) {
			k.Spec.Token.SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
		}, "empty token"},
		{"bad-secret-key", func(k *v1alpha1.ApiKey) {
			k.Spec.Token.ExistingSecret = &v1alpha1.SecretKeySelector{Name: "s", Key: "a/b"}
		}, "spec.token.existingSecret.key"},
		{"bad-connection-name", func(k *v1alpha1.ApiKey) { k.Spec.Connections = []string{"Not Valid"} }, "spec.connections"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := apiKey(ns, tc.name, tc.mutate)
			err := k8s.Create(context.Background(), key)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("got %v, want Invalid mentioning %q", err, tc.message)
			}
		})
	}
}
