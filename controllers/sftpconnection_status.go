package controllers

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// connectionFacts is what one reconcile of an SftpConnection found.
// setConnectionStatus computes the connection's conditions from them, and
// from what earlier tests recorded in status, alone.
type connectionFacts struct {
	// slugHolder names the object serving the slug the connection asks
	// for, as the connection's namespace may know it; "" when none does.
	slugHolder string
	// slugHeldUntil is when the slug stops being held for the namespace
	// that freed it; zero when it is not.
	slugHeldUntil time.Time
	// secretMissing: the credentials Secret does not exist.
	secretMissing bool
	// untested: the current spec, Secret or test request has not been
	// tested; waiting says what the test waits for, "" while it runs.
	untested bool
	waiting  string
	// test is what this reconcile's test found; nil when none ran.
	test *testOutcome
}

// testOutcome is what a connection test found: a Ready reason and message.
type testOutcome struct {
	at      metav1.Time
	passed  bool
	reason  string
	message string
}

// stalledReasons are the Ready reasons that retrying the same spec and
// Secret cannot mend: a person has to change them (or the server's
// account). Every other failure is retried, and may mend by itself.
var stalledReasons = map[string]bool{
	v1alpha1.ReasonInvalidCredentials:    true,
	v1alpha1.ReasonInvalidHostKey:        true,
	v1alpha1.ReasonHostKeyMismatch:       true,
	v1alpha1.ReasonAuthenticationFailed:  true,
	v1alpha1.ReasonDestinationNotAllowed: true,
	v1alpha1.ReasonSlugConflict:          true, // unless the slug is only held for a while: see below
}

// setConnectionStatus sets conn's conditions, and the record of its tests,
// from f.
func setConnectionStatus(conn *v1alpha1.SftpConnection, f connectionFacts) {
	conn.Status.ObservedGeneration = conn.Generation
	ready := func(status metav1.ConditionStatus, reason, message string) {
		setCondition(conn, v1alpha1.ConditionReady, status, reason, message)
	}
	slug := conn.EffectiveSlug()
	switch {
	case f.slugHolder != "":
		ready(metav1.ConditionFalse, v1alpha1.ReasonSlugConflict, fmt.Sprintf(
			"slug %q is already served for %s; choose another spec.slug", slug, f.slugHolder))
	case !f.slugHeldUntil.IsZero():
		ready(metav1.ConditionFalse, v1alpha1.ReasonSlugConflict, fmt.Sprintf(
			"slug %q was served in another namespace until recently and is held for it until %s; choose another spec.slug, or wait",
			slug, f.slugHeldUntil.UTC().Format(time.RFC3339)))
	case f.secretMissing:
		ready(metav1.ConditionFalse, v1alpha1.ReasonSecretNotFound, fmt.Sprintf(
			"Secret %q does not exist in namespace %q; the connection is tested as soon as it is created",
			conn.Spec.Credentials.SecretRef.Name, conn.Namespace))
	case f.test != nil:
		status := metav1.ConditionFalse
		if f.test.passed {
			status = metav1.ConditionTrue
		}
		ready(status, f.test.reason, f.test.message)
		conn.Status.LastTestTime = &f.test.at
		if f.test.passed {
			conn.Status.FailedTests = 0
		} else {
			conn.Status.FailedTests++
		}
	}

	reconciling := f.untested && f.slugHolder == "" && f.slugHeldUntil.IsZero() && !f.secretMissing && f.test == nil
	switch {
	case reconciling && f.waiting != "":
		setCondition(conn, v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonTestPending, f.waiting)
	case reconciling:
		setCondition(conn, v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonTesting,
			"testing the connection's current spec and Secret")
	default:
		meta.RemoveStatusCondition(&conn.Status.Conditions, v1alpha1.ConditionReconciling)
	}

	c := meta.FindStatusCondition(conn.Status.Conditions, v1alpha1.ConditionReady)
	if !reconciling && c != nil && c.Status == metav1.ConditionFalse && stalledReasons[c.Reason] && f.slugHeldUntil.IsZero() {
		setCondition(conn, v1alpha1.ConditionStalled, metav1.ConditionTrue, c.Reason, c.Message)
	} else {
		meta.RemoveStatusCondition(&conn.Status.Conditions, v1alpha1.ConditionStalled)
	}
}
