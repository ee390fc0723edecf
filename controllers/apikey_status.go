package controllers

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// keyFacts is what one reconcile of an ApiKey found. setKeyStatus computes
// the key's conditions from them and its spec alone.
type keyFacts struct {
	// refused says why the key has no token it may use; nil when it has.
	refused *refusal
}

// refusal is why a key has no token it may use: a Ready reason and message.
type refusal struct {
	reason, message string
	// passes: the refusal ends by itself (a token held for another
	// namespace for a while, a Secret yet to be created).
	passes bool
}

func refuse(reason, message string) *refusal {
	return &refusal{reason: reason, message: message, passes: reason == v1alpha1.ReasonSecretNotFound}
}

// setKeyStatus sets key's conditions from f and its spec, as of now. Every
// way a key does not work but one that passes by itself needs a change to
// its spec or Secret: it is Stalled.
func setKeyStatus(key *v1alpha1.ApiKey, f keyFacts, now time.Time) {
	key.Status.ObservedGeneration = key.Generation
	reason, message, stalled := v1alpha1.ReasonIssued, fmt.Sprintf("key %s may use %s", key.Status.KeyID, describeScope(&key.Spec)), false
	expires := key.Spec.ExpiresAt
	switch {
	case f.refused != nil:
		// Forget a token that no longer works, so the gateway stops
		// accepting it at once.
		key.Status.TokenSHA256, key.Status.KeyID, key.Status.IssuedAt = "", "", nil
		reason, message, stalled = f.refused.reason, f.refused.message, !f.refused.passes
	case key.Spec.Disabled:
		reason, message, stalled = v1alpha1.ReasonDisabled, fmt.Sprintf("key %s is disabled (spec.disabled)", key.Status.KeyID), true
	case expires != nil && !now.Before(expires.Time):
		reason, message, stalled = v1alpha1.ReasonExpired, fmt.Sprintf("key %s expired at %s", key.Status.KeyID, expires.UTC().Format(time.RFC3339)), true
	}
	status := metav1.ConditionFalse
	if reason == v1alpha1.ReasonIssued {
		status = metav1.ConditionTrue
	}
	setCondition(key, v1alpha1.ConditionReady, status, reason, message)
	if stalled {
		setCondition(key, v1alpha1.ConditionStalled, metav1.ConditionTrue, reason, message)
	} else {
		meta.RemoveStatusCondition(&key.Status.Conditions, v1alpha1.ConditionStalled)
	}
}
