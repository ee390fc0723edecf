package controllers

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// TestNextTest covers when a connection is tested again: on changes, on
// request, and at the interval, but not on restarts and re-syncs.
func TestNextTest(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tested := func(ago time.Duration, reason string, mutate ...func(*v1alpha1.SftpConnection)) *v1alpha1.SftpConnection {
		c := &v1alpha1.SftpConnection{}
		c.Generation = 3
		c.Status.CredentialsHash = "sha256:a"
		c.Status.LastTestTime = &metav1.Time{Time: now.Add(-ago)}
		meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{
			Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: reason, ObservedGeneration: 3})
		for _, m := range mutate {
			m(c)
		}
		return c
	}
	r := testPace{Interval: 5 * time.Minute, MaxBackoff: time.Minute}
	failed := func(n int32) func(*v1alpha1.SftpConnection) {
		return func(c *v1alpha1.SftpConnection) { c.Status.FailedTests = n }
	}
	cases := []struct {
		name     string
		conn     *v1alpha1.SftpConnection
		hash     string
		interval time.Duration
		due      bool
		wait     time.Duration
	}{
		{"never tested", &v1alpha1.SftpConnection{}, "sha256:a", 5 * time.Minute, true, 0},
		{"tested recently", tested(time.Minute, v1alpha1.ReasonConnected), "sha256:a", 5 * time.Minute, false, 4 * time.Minute},
		{"interval passed", tested(6*time.Minute, v1alpha1.ReasonConnected), "sha256:a", 5 * time.Minute, true, 0},
		{"interval off", tested(time.Hour, v1alpha1.ReasonConnected), "sha256:a", 0, false, 0},
		{"Secret changed", tested(time.Minute, v1alpha1.ReasonConnected), "sha256:b", 5 * time.Minute, true, 0},
		{"spec changed", tested(time.Minute, v1alpha1.ReasonConnected, func(c *v1alpha1.SftpConnection) { c.Generation = 4 }), "sha256:a", 5 * time.Minute, true, 0},
		{"slug freed", tested(time.Minute, v1alpha1.ReasonSlugConflict), "sha256:a", 5 * time.Minute, true, 0},
		{"test requested", tested(time.Minute, v1alpha1.ReasonConnected, func(c *v1alpha1.SftpConnection) {
			c.Annotations = map[string]string{v1alpha1.AnnotationTestRequestedAt: "2"}
			c.Status.LastHandledTestRequest = "1"
		}), "sha256:a", 0, true, 0},
		{"request answered", tested(time.Minute, v1alpha1.ReasonConnected, func(c *v1alpha1.SftpConnection) {
			c.Annotations = map[string]string{v1alpha1.AnnotationTestRequestedAt: "2"}
			c.Status.LastHandledTestRequest = "2"
		}), "sha256:a", 0, false, 0},
		// Failed tests in a row hold the next one back, whatever changed:
		// 5s, 10s, 20s, ... up to the maximum.
		{"one failure, Secret changed at once", tested(time.Second, v1alpha1.ReasonAuthenticationFailed, failed(1)), "sha256:b", 5 * time.Minute, false, 4 * time.Second},
		{"one failure, Secret changed later", tested(6*time.Second, v1alpha1.ReasonAuthenticationFailed, failed(1)), "sha256:b", 5 * time.Minute, true, 0},
		{"three failures, spec changed", tested(10*time.Second, v1alpha1.ReasonTimeout, failed(3), func(c *v1alpha1.SftpConnection) { c.Generation = 4 }), "sha256:a", 0, false, 10 * time.Second},
		{"many failures, capped", tested(59*time.Second, v1alpha1.ReasonTimeout, failed(30), func(c *v1alpha1.SftpConnection) { c.Generation = 4 }), "sha256:a", 0, false, time.Second},
		{"failures, nothing changed, interval off", tested(time.Second, v1alpha1.ReasonTimeout, failed(2)), "sha256:a", 0, false, 0},
	}
	for _, tc := range cases {
		r.Interval = tc.interval
		wait, due := r.next(recordOf(tc.conn), tc.hash, now)
		if due != tc.due || (!due && wait != tc.wait) {
			t.Errorf("%s: nextTest = (%s, %v), want (%s, %v)", tc.name, wait, due, tc.wait, tc.due)
		}
	}
}

// TestTestSlots: a namespace runs at most its share of tests at once; the
// others wait in line, once each, and the end of a test wakes the next.
func TestTestSlots(t *testing.T) {
	s := newTestSlots(2)
	key := func(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
	a1, a2 := s.take(key("a", "1")), s.take(key("a", "2"))
	if a1 == nil || a2 == nil {
		t.Fatal("the first two tests of a namespace wait")
	}
	for _, name := range []string{"3", "3", "4"} { // 3 asks twice: it waits in line once
		if s.take(key("a", name)) != nil {
			t.Fatal("a third test of a namespace runs")
		}
	}
	if b := s.take(key("b", "1")); b == nil {
		t.Fatal("another namespace's test waits for a's")
	} else {
		b()
	}
	a1()
	if woken := (<-s.wake).Object; woken.GetNamespace() != "a" || woken.GetName() != "3" {
		t.Errorf("woke %s/%s, want a/3, first in line", woken.GetNamespace(), woken.GetName())
	}
	// 3 was woken but is no longer due: leaving passes the turn to 4.
	s.leave(key("a", "3"))
	if woken := (<-s.wake).Object; woken.GetName() != "4" {
		t.Errorf("woke %s, want 4, once each", woken.GetName())
	}
	// 4 takes the slot; 5 waits; when a slot frees, 5 is woken and takes
	// it, and leaving then wakes no one.
	if s.take(key("a", "4")) == nil {
		t.Fatal("the woken 4 does not get the free slot")
	}
	if s.take(key("a", "5")) != nil {
		t.Fatal("a takes a third slot")
	}
	a2()
	if woken := (<-s.wake).Object; woken.GetName() != "5" {
		t.Errorf("woke %s, want 5", woken.GetName())
	}
	if s.take(key("a", "5")) == nil {
		t.Fatal("a slot freed is not taken")
	}
	s.leave(key("a", "5"))
	select {
	case ev := <-s.wake:
		t.Errorf("woke %s though the line is empty", ev.Object.GetName())
	case <-time.After(10 * time.Millisecond): // nothing to wait for: the line is empty
	}
}

// TestProven: only a connection whose last test, of its spec and Secret as
// they are, passed is retested outside the namespace's budget.
func TestProven(t *testing.T) {
	passed := func(mutate ...func(*v1alpha1.SftpConnection)) *v1alpha1.SftpConnection {
		c := &v1alpha1.SftpConnection{}
		c.Generation = 2
		c.Status.CredentialsHash = "sha256:a"
		meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{
			Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonConnected, ObservedGeneration: 2})
		for _, m := range mutate {
			m(c)
		}
		return c
	}
	for name, tc := range map[string]struct {
		conn *v1alpha1.SftpConnection
		want bool
	}{
		"passed":            {passed(), true},
		"never tested":      {&v1alpha1.SftpConnection{}, false},
		"spec changed":      {passed(func(c *v1alpha1.SftpConnection) { c.Generation = 3 }), false},
		"Secret changed":    {passed(func(c *v1alpha1.SftpConnection) { c.Status.CredentialsHash = "sha256:b" }), false},
		"failing":           {passed(func(c *v1alpha1.SftpConnection) { c.Status.FailedTests = 1 }), false},
		"last test refused": {passed(func(c *v1alpha1.SftpConnection) { c.Status.Conditions[0].Status = metav1.ConditionFalse }), false},
	} {
		if got := recordOf(tc.conn).proven("sha256:a"); got != tc.want {
			t.Errorf("%s: proven = %v, want %v", name, got, tc.want)
		}
	}
}

// TestTestBudget: past its burst a namespace's connections get grants
// spaced by the rate, each kept until spent; another namespace is not held
// up.
func TestTestBudget(t *testing.T) {
	b := newTestBudget(60) // one a second, sixty at once
	now := time.Now()
	conn := func(ns string, i int) types.NamespacedName {
		return types.NamespacedName{Namespace: ns, Name: fmt.Sprint(i)}
	}
	for i := range 60 {
		if wait := b.wait(conn("busy", i), now); wait != 0 {
			t.Fatalf("connection %d within the burst waits %v", i, wait)
		}
	}
	first, second := b.wait(conn("busy", 60), now), b.wait(conn("busy", 61), now)
	if first <= 0 || first > time.Second || second <= first {
		t.Errorf("past the burst: waits %v and %v, want about 1s and 2s", first, second)
	}
	if again := b.wait(conn("busy", 60), now); again != first {
		t.Errorf("asking again moved the grant: %v, then %v", first, again)
	}
	if wait := b.wait(conn("busy", 60), now.Add(first)); wait != 0 {
		t.Errorf("at its time the grant still waits %v", wait)
	}
	b.spend(conn("busy", 0))
	if wait := b.wait(conn("busy", 0), now); wait <= second {
		t.Errorf("a spent grant was not spent: the next test waits %v", wait)
	}
	if wait := b.wait(conn("quiet", 0), now); wait != 0 {
		t.Errorf("another namespace waits %v", wait)
	}
}
