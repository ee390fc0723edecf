package controllers

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/teststatus"
	"github.com/sftpgate/sftpgate/internal/statuspatch"
)

// want is what a status function must compute: Ready's status and reason,
// whether Reconciling and Stalled are true, and what kstatus (which kubectl
// wait, Flux and Argo CD read) makes of it all.
type want struct {
	ready       metav1.ConditionStatus
	reason      string
	reconciling bool
	stalled     bool
	kstatus     status.Status
}

func check(t *testing.T, obj statuspatch.Object, w want) {
	t.Helper()
	conditions := *obj.GetConditions()
	ready := meta.FindStatusCondition(conditions, v1alpha1.ConditionReady)
	switch {
	case w.ready == "" && ready != nil:
		t.Errorf("Ready = %s %s, want none", ready.Status, ready.Reason)
	case w.ready != "" && (ready == nil || ready.Status != w.ready || ready.Reason != w.reason):
		t.Errorf("Ready = %+v, want %s %s", ready, w.ready, w.reason)
	}
	if got := meta.IsStatusConditionTrue(conditions, v1alpha1.ConditionReconciling); got != w.reconciling {
		t.Errorf("Reconciling = %t, want %t", got, w.reconciling)
	}
	if got := meta.IsStatusConditionTrue(conditions, v1alpha1.ConditionStalled); got != w.stalled {
		t.Errorf("Stalled = %t, want %t", got, w.stalled)
	}
	for _, c := range conditions {
		if c.ObservedGeneration != obj.GetGeneration() && c.Type != v1alpha1.ConditionReady {
			t.Errorf("%s is for generation %d, not %d", c.Type, c.ObservedGeneration, obj.GetGeneration())
		}
	}
	if got := teststatus.KStatus(t, obj); got != w.kstatus {
		t.Errorf("kstatus: %s, want %s", got, w.kstatus)
	}
}

func TestConnectionStatus(t *testing.T) {
	now := metav1.Now()
	passed := &testOutcome{at: now, passed: true, reason: v1alpha1.ReasonConnected, message: "Connected to ..."}
	failed := func(reason string) *testOutcome {
		return &testOutcome{at: now, reason: reason, message: reason + " says why"}
	}
	// earlier is a connection tested before, with reason, at generation 1.
	earlier := func(ready metav1.ConditionStatus, reason string) func(*v1alpha1.SftpConnection) {
		return func(c *v1alpha1.SftpConnection) {
			c.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: ready, Reason: reason, ObservedGeneration: 1}}
		}
	}
	for _, tc := range []struct {
		name   string
		before func(*v1alpha1.SftpConnection)
		facts  connectionFacts
		want   want
	}{
		{"new, waiting for a slot", nil, connectionFacts{testFacts: testFacts{untested: true, waiting: "the test waits for a slot"}},
			want{reconciling: true, kstatus: status.InProgressStatus}},
		{"new, being tested", nil, connectionFacts{testFacts: testFacts{untested: true}},
			want{reconciling: true, kstatus: status.InProgressStatus}},
		{"tested, passed", nil, connectionFacts{testFacts: testFacts{untested: true, test: passed}},
			want{ready: metav1.ConditionTrue, reason: v1alpha1.ReasonConnected, kstatus: status.CurrentStatus}},
		{"tested, the server refused the connection (retried)", nil, connectionFacts{testFacts: testFacts{untested: true, test: failed(v1alpha1.ReasonConnectionRefused)}},
			want{ready: metav1.ConditionFalse, reason: v1alpha1.ReasonConnectionRefused, kstatus: status.InProgressStatus}},
		{"tested, timed out (retried)", nil, connectionFacts{testFacts: testFacts{test: failed(v1alpha1.ReasonTimeout)}},
			want{ready: metav1.ConditionFalse, reason: v1alpha1.ReasonTimeout, kstatus: status.InProgressStatus}},
		{"tested, invalid credentials", nil, connectionFacts{testFacts: testFacts{untested: true, test: failed(v1alpha1.ReasonInvalidCredentials)}},
			want{ready: metav1.ConditionFalse, reason: v1alpha1.ReasonInvalidCredentials, stalled: true, kstatus: status.FailedStatus}},
		{"tested, host key mismatch", nil, connectionFacts{testFacts: testFacts{test: failed(v1alpha1.ReasonHostKeyMismatch)}},
			want{ready: metav1.ConditionFalse, reason: v1alpha1.ReasonHostKeyMismatch, stalled: true, kstatus: status.FailedStatus}},
		{"tested, authentication failed", nil, connectionFacts{testFacts: testFacts{test: failed(v1alpha1.ReasonAuthenticationFailed)}},
			want{ready: metav1.ConditionFalse, reason: v1alpha1.ReasonAuthenticationFailed, stalled: true, kstatus: status.FailedStatus}},
		{"stalled, in backoff: still stalled", earlier(metav1.ConditionFalse, v1alpha1.ReasonAuthenticationFailed), connectionFacts{testFacts: testFacts{waiting: "backoff"}},
			want{ready: metav1.ConditionFalse, reason: v1alpha1.ReasonAuthenticationFailed, stalled: true, kstatus: status.FailedStatus}},
		{"stalled, then a new Secret waits for its test", earlier(metav1.ConditionFalse, v1alpha1.ReasonAuthenticationFailed),
			connectionFacts{testFacts: testFacts{untested: true, waiting: "the test waits for its namespace's budget"}},
			want{ready: metav1.ConditionFalse, reason: v1alpha1.ReasonAuthenticationFailed, reconciling: true, kstatus: status.InProgressStatus}},
		{"ready, a new Secret being tested: still Ready", earlier(metav1.ConditionTrue, v1alpha1.ReasonConnected), connectionFacts{testFacts: testFacts{untested: true}},
			want{ready: metav1.ConditionTrue, reason: v1alpha1.ReasonConnected, reconciling: true, kstatus: status.InProgressStatus}},
		{"ready, not due", earlier(metav1.ConditionTrue, v1alpha1.ReasonConnected), connectionFacts{},
			want{ready: metav1.ConditionTrue, reason: v1alpha1.ReasonConnected, kstatus: status.CurrentStatus}},
		{"credentials Secret missing (appears later)", nil, connectionFacts{testFacts: testFacts{secretMissing: true}},
			want{ready: metav1.ConditionFalse, reason: v1alpha1.ReasonSecretNotFound, kstatus: status.InProgressStatus}},
		{"slug served for another connection", nil, connectionFacts{slug: slugFacts{holder: `SftpConnection "elder"`}},
			want{ready: metav1.ConditionFalse, reason: v1alpha1.ReasonSlugConflict, stalled: true, kstatus: status.FailedStatus}},
		{"slug held for another namespace for a while", nil, connectionFacts{slug: slugFacts{heldUntil: now.Add(time.Minute)}, testFacts: testFacts{untested: true}},
			want{ready: metav1.ConditionFalse, reason: v1alpha1.ReasonSlugConflict, kstatus: status.InProgressStatus}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", Generation: 1}}
			conn.Spec.Credentials.SecretRef.Name = "creds"
			if tc.before != nil {
				tc.before(conn)
			}
			setConnectionStatus(conn, tc.facts)
			check(t, conn, tc.want)
		})
	}
}

// TestObjectStoreStatus: a store's test outcomes read as a connection's,
// with the reasons of its own.
func TestObjectStoreStatus(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name  string
		facts testFacts
		want  want
	}{
		{"passed", testFacts{untested: true, test: &testOutcome{at: now, passed: true, reason: v1alpha1.ReasonConnected}},
			want{ready: metav1.ConditionTrue, reason: v1alpha1.ReasonConnected, kstatus: status.CurrentStatus}},
		{"no bucket yet (retried)", testFacts{test: &testOutcome{at: now, reason: v1alpha1.ReasonBucketNotFound}},
			want{ready: metav1.ConditionFalse, reason: v1alpha1.ReasonBucketNotFound, kstatus: status.InProgressStatus}},
		{"untrusted certificate (retried)", testFacts{test: &testOutcome{at: now, reason: v1alpha1.ReasonTLSHandshakeFailed}},
			want{ready: metav1.ConditionFalse, reason: v1alpha1.ReasonTLSHandshakeFailed, kstatus: status.InProgressStatus}},
		{"a CA bundle of no certificate", testFacts{test: &testOutcome{at: now, reason: v1alpha1.ReasonInvalidCABundle}},
			want{ready: metav1.ConditionFalse, reason: v1alpha1.ReasonInvalidCABundle, stalled: true, kstatus: status.FailedStatus}},
		{"Secret missing", testFacts{secretMissing: true},
			want{ready: metav1.ConditionFalse, reason: v1alpha1.ReasonSecretNotFound, kstatus: status.InProgressStatus}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &v1alpha1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", Generation: 1}}
			store.Status.ObservedGeneration = 1
			testStatus{last: &store.Status.LastTestTime, failed: &store.Status.FailedTests, what: "object store"}.set(store, tc.facts, false, true)
			check(t, store, tc.want)
		})
	}
}

// A connection's spec changed since its status was written: kstatus waits
// for the controller, as Argo CD's health check does.
func TestStatusOfAnUnseenGeneration(t *testing.T) {
	conn := &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Generation: 1}}
	setConnectionStatus(conn, connectionFacts{testFacts: testFacts{test: &testOutcome{passed: true, reason: v1alpha1.ReasonConnected}}})
	conn.Generation = 2
	if got := teststatus.KStatus(t, conn); got != status.InProgressStatus {
		t.Errorf("kstatus: %s, want InProgress", got)
	}
}

func TestKeyStatus(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	held := refuse(v1alpha1.ReasonDuplicateToken, "held for another namespace until ...")
	held.passes = true
	for _, tc := range []struct {
		name string
		spec func(*v1alpha1.ApiKeySpec)
		f    keyFacts
		want want
	}{
		{"issued", nil, keyFacts{}, want{ready: metav1.ConditionTrue, reason: v1alpha1.ReasonIssued, kstatus: status.CurrentStatus}},
		{"expires later", func(s *v1alpha1.ApiKeySpec) { s.ExpiresAt = &metav1.Time{Time: now.Add(time.Hour)} }, keyFacts{},
			want{ready: metav1.ConditionTrue, reason: v1alpha1.ReasonIssued, kstatus: status.CurrentStatus}},
		{"expired", func(s *v1alpha1.ApiKeySpec) { s.ExpiresAt = &metav1.Time{Time: now} }, keyFacts{},
			want{ready: metav1.ConditionFalse, reason: v1alpha1.ReasonExpired, stalled: true, kstatus: status.FailedStatus}},
		{"disabled", func(s *v1alpha1.ApiKeySpec) { s.Disabled = true }, keyFacts{},
			want{ready: metav1.ConditionFalse, reason: v1alpha1.ReasonDisabled, stalled: true, kstatus: status.FailedStatus}},
		{"a token refused outranks disabled", func(s *v1alpha1.ApiKeySpec) { s.Disabled = true },
			keyFacts{refused: refuse(v1alpha1.ReasonInvalidToken, "bad")},
			want{ready: metav1.ConditionFalse, reason: v1alpha1.ReasonInvalidToken, stalled: true, kstatus: status.FailedStatus}},
		{"the Secret is not the key's", nil, keyFacts{refused: refuse(v1alpha1.ReasonSecretNotOwned, "not ours")},
			want{ready: metav1.ConditionFalse, reason: v1alpha1.ReasonSecretNotOwned, stalled: true, kstatus: status.FailedStatus}},
		{"another key has the token", nil, keyFacts{refused: refuse(v1alpha1.ReasonDuplicateToken, "taken")},
			want{ready: metav1.ConditionFalse, reason: v1alpha1.ReasonDuplicateToken, stalled: true, kstatus: status.FailedStatus}},
		{"the token is held for another namespace for a while", nil, keyFacts{refused: held},
			want{ready: metav1.ConditionFalse, reason: v1alpha1.ReasonDuplicateToken, kstatus: status.InProgressStatus}},
		{"its existing Secret is yet to be created", nil, keyFacts{refused: refuse(v1alpha1.ReasonSecretNotFound, "missing")},
			want{ready: metav1.ConditionFalse, reason: v1alpha1.ReasonSecretNotFound, kstatus: status.InProgressStatus}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Name: "k", Namespace: "ns", Generation: 3}}
			key.Status.TokenSHA256, key.Status.KeyID = "abc", "k1"
			if tc.spec != nil {
				tc.spec(&key.Spec)
			}
			setKeyStatus(key, tc.f, now)
			check(t, key, tc.want)
			if tc.f.refused != nil && key.Status.TokenSHA256 != "" {
				t.Error("a refused key keeps its token hash: the gateway would accept it")
			}
		})
	}
}

func TestScheduleStatus(t *testing.T) {
	next := time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		suspend bool
		f       scheduleFacts
		want    want
	}{
		{"scheduled", false, scheduleFacts{next: next}, want{ready: metav1.ConditionTrue, reason: v1alpha1.ReasonScheduled, kstatus: status.CurrentStatus}},
		{"suspended", true, scheduleFacts{next: next}, want{ready: metav1.ConditionTrue, reason: v1alpha1.ReasonSuspended, kstatus: status.CurrentStatus}},
		{"invalid outranks suspended", true, scheduleFacts{invalid: "never due"},
			want{ready: metav1.ConditionFalse, reason: v1alpha1.ReasonInvalidSchedule, stalled: true, kstatus: status.FailedStatus}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &v1alpha1.TransferSchedule{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", Generation: 3}}
			s.Spec.Suspend = tc.suspend
			// A Stalled left from an invalid spec before goes once fixed.
			setScheduleStatus(s, scheduleFacts{invalid: "before"})
			setScheduleStatus(s, tc.f)
			check(t, s, tc.want)
			if due := s.Status.NextScheduleTime != nil; due != (tc.want.reason == v1alpha1.ReasonScheduled) {
				t.Errorf("nextScheduleTime %v with Ready %s", s.Status.NextScheduleTime, tc.want.reason)
			}
		})
	}
}
