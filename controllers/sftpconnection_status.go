package controllers

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/statuspatch"
)

// connectionFacts is what one reconcile of an SftpConnection found.
// setConnectionStatus computes the connection's conditions from them, and
// from what earlier tests recorded in status, alone.
type connectionFacts struct {
	slug slugFacts
	testFacts
}

// testFacts is what one reconcile of a tested object found of its Secret
// and test.
type testFacts struct {
	// secretMissing: the credentials Secret does not exist.
	secretMissing bool
	// untested: the current spec, Secret or test request has not been
	// tested; waiting says what the test waits for, "" while it runs.
	untested bool
	waiting  string
	// test is what this reconcile's test found; nil when none ran.
	test *testOutcome
}

// testOutcome is what a test found: a Ready reason and message.
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
	v1alpha1.ReasonCertificateNotTrusted: true,
	v1alpha1.ReasonPlaintextNotAllowed:   true,
	v1alpha1.ReasonAuthenticationFailed:  true,
	v1alpha1.ReasonDestinationNotAllowed: true,
	v1alpha1.ReasonInvalidCABundle:       true,
	v1alpha1.ReasonInvalidSpec:           true,
	v1alpha1.ReasonSlugConflict:          true, // unless the slug is only held for a while: see below
}

// setConnectionStatus sets conn's conditions, and the record of its tests,
// from f.
func setConnectionStatus(conn *v1alpha1.SftpConnection, f connectionFacts) {
	conn.Status.ObservedGeneration = conn.Generation
	blocked := f.slug.blocked(conn)
	testsOf(conn, "connection").set(conn, f.testFacts, blocked, f.slug.heldUntil.IsZero())
}

// testStatus is where a tested object's status records its tests.
type testStatus struct {
	last   **metav1.Time
	failed *int32
	// what names the kind in messages; secret and namespace the
	// credentials Secret.
	what, secret, namespace string
}

// set sets obj's Ready (unless blocked: another fact set it), Reconciling
// and Stalled conditions from f; mayStall false keeps a reason of
// stalledReasons from stalling.
func (s testStatus) set(obj statuspatch.Object, f testFacts, blocked, mayStall bool) {
	switch {
	case blocked:
	case f.secretMissing:
		setCondition(obj, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSecretNotFound, fmt.Sprintf(
			"Secret %q does not exist in namespace %q; the %s is tested as soon as it is created", s.secret, s.namespace, s.what))
	case f.test != nil:
		status := metav1.ConditionFalse
		if f.test.passed {
			status = metav1.ConditionTrue
		}
		setCondition(obj, v1alpha1.ConditionReady, status, f.test.reason, f.test.message)
		*s.last = &f.test.at
		if f.test.passed {
			*s.failed = 0
		} else {
			*s.failed++
		}
	}

	conditions := obj.GetConditions()
	reconciling := f.untested && !blocked && !f.secretMissing && f.test == nil
	switch {
	case reconciling && f.waiting != "":
		setCondition(obj, v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonTestPending, f.waiting)
	case reconciling:
		setCondition(obj, v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonTesting,
			fmt.Sprintf("testing the %s's current spec and Secret", s.what))
	default:
		meta.RemoveStatusCondition(conditions, v1alpha1.ConditionReconciling)
	}

	c := meta.FindStatusCondition(*conditions, v1alpha1.ConditionReady)
	if !reconciling && c != nil && c.Status == metav1.ConditionFalse && stalledReasons[c.Reason] && mayStall {
		setCondition(obj, v1alpha1.ConditionStalled, metav1.ConditionTrue, c.Reason, c.Message)
	} else {
		meta.RemoveStatusCondition(conditions, v1alpha1.ConditionStalled)
	}
}
