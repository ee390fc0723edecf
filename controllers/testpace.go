package controllers

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/ratelimit"
)

// Connection tests are shared by every namespace, some of whose owners do
// not trust each other: a namespace has at most a few tests running at
// once (testSlots), so that its backlog (say, hundreds of connections to a
// host that accepts TCP and never answers) holds back no other namespace's
// test by more than one test's time; a connection whose tests keep
// failing is tested less and less often (backoff); and a namespace's tests
// of connections not proven good (new, changed, or failing) are limited
// per minute (testBudget), so that making connection after connection, or
// deleting and recreating one to start its backoff over, is no way to
// guess passwords or scan ports at the manager's speed.

// testBudget grants, per namespace, tests of connections not proven good,
// at a rate. A connection refused waits for a grant of its own, kept until
// its test runs: no one polls, and a grant is not lost while its
// connection waits in line for a slot.
type testBudget struct {
	limiter *ratelimit.Keyed[string]

	mu      sync.Mutex
	granted map[types.NamespacedName]time.Time
}

func newTestBudget(perMinute int) *testBudget {
	return &testBudget{limiter: ratelimit.New[string](float64(perMinute)/60, perMinute),
		granted: map[types.NamespacedName]time.Time{}}
}

// wait returns how long until key's test may run (0: now), granting it
// one of its namespace's tests if it has none.
func (b *testBudget) wait(key types.NamespacedName, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	at, ok := b.granted[key]
	if !ok {
		// Namespaces exist: their buckets need no bound of their own.
		wait, _ := b.limiter.Reserve(key.Namespace)
		at = now.Add(wait)
		b.granted[key] = at
	}
	return max(at.Sub(now), 0)
}

// spend forgets key's grant: its test ran, or it is gone.
func (b *testBudget) spend(key types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.granted, key)
}

// testRecord is what a tested object's status and annotations keep of its
// tests, every tested kind's alike.
type testRecord struct {
	generation int64
	conditions []metav1.Condition
	lastTest   *metav1.Time
	failed     int32
	// hash is the Secret's version last tested; requested and handled
	// the test request annotation and the one the last test answered.
	hash, requested, handled string
}

// recordOf is obj's record of its tests.
func recordOf(obj testedObject) testRecord {
	ts := obj.GetTestStatus()
	return testRecord{generation: obj.GetGeneration(), conditions: *obj.GetConditions(), lastTest: ts.LastTestTime,
		failed: ts.FailedTests, hash: ts.CredentialsHash,
		requested: obj.GetAnnotations()[v1alpha1.AnnotationTestRequestedAt], handled: ts.LastHandledTestRequest}
}

// proven reports whether the last test, of the current spec and Secret
// (hash), passed: testing it again tells its owner nothing new about
// another server or password.
func (t testRecord) proven(hash string) bool {
	ready := meta.FindStatusCondition(t.conditions, v1alpha1.ConditionReady)
	return ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == t.generation &&
		t.hash == hash && t.failed == 0
}

// untested reports whether the current spec, Secret (hash) or test
// request has not been tested.
func (t testRecord) untested(hash string) bool {
	ready := meta.FindStatusCondition(t.conditions, v1alpha1.ConditionReady)
	return ready == nil || t.lastTest == nil || ready.ObservedGeneration != t.generation ||
		ready.Reason == v1alpha1.ReasonSlugConflict || t.hash != hash || t.requested != t.handled
}

// testBackoffBase is the wait after the first failed test; each further
// failure in a row doubles it, up to the manager's --max-test-backoff.
const testBackoffBase = 5 * time.Second

// testPace is when tests run: every Interval (0: only on changes), and
// after failures in a row no sooner than a backoff up to MaxBackoff.
type testPace struct {
	Interval, MaxBackoff time.Duration
}

// next says whether a test is due now and, if not, how long until it is
// (0: only when something changes). Restarts and re-syncs do not test again
// what was tested recently with the same spec and Secret; failed tests
// delay the next one, whatever changed.
func (p testPace) next(t testRecord, hash string, now time.Time) (time.Duration, bool) {
	changed := t.untested(hash)
	if t.lastTest != nil && t.failed > 0 {
		if wait := t.lastTest.Add(p.backoff(t.failed)).Sub(now); wait > 0 && (changed || p.Interval > 0) {
			return wait, false
		}
	}
	switch {
	case changed:
		return 0, true
	case p.Interval <= 0:
		return 0, false
	}
	wait := t.lastTest.Add(p.Interval).Sub(now)
	return wait, wait <= 0
}

// backoff is the wait after failed tests in a row.
func (p testPace) backoff(failed int32) time.Duration {
	wait := testBackoffBase
	for range min(failed, 32) - 1 {
		if wait *= 2; wait >= p.MaxBackoff {
			return p.MaxBackoff
		}
	}
	return min(wait, p.MaxBackoff)
}

// testSlots bounds the tests running at once in each namespace. A
// connection that finds its namespace's slots taken waits in line, and
// the test that ends wakes the next in line (through wake), so that no
// worker is held and no one polls; a woken connection that does not take
// the slot (it is no longer due, or gone) passes it on (leave). Those in
// line also look again after waitInLine, should a wake-up be lost.
type testSlots struct {
	perNamespace int
	// wake carries the connections whose turn it is, to the controller's
	// queue.
	wake chan event.GenericEvent

	mu      sync.Mutex
	running map[string]int
	waiting map[string][]types.NamespacedName
	woken   map[types.NamespacedName]bool
}

// waitInLine is how long a connection in line waits at most before it
// looks again.
const waitInLine = 30 * time.Second

func newTestSlots(perNamespace int) *testSlots {
	return &testSlots{perNamespace: max(perNamespace, 1), wake: make(chan event.GenericEvent),
		running: map[string]int{}, waiting: map[string][]types.NamespacedName{}, woken: map[types.NamespacedName]bool{}}
}

// take takes a slot of key's namespace and returns the function that gives
// it back; or, when all are taken, puts key in line (once) and returns nil.
func (s *testSlots) take(key types.NamespacedName) (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := key.Namespace
	delete(s.woken, key)
	line := slices.DeleteFunc(s.waiting[ns], func(k types.NamespacedName) bool { return k == key })
	if s.running[ns] >= s.perNamespace {
		s.waiting[ns] = append(line, key)
		return nil
	}
	s.waiting[ns] = line
	if len(line) == 0 {
		delete(s.waiting, ns)
	}
	s.running[ns]++
	return func() { s.release(ns) }
}

func (s *testSlots) release(ns string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[ns]--; s.running[ns] == 0 {
		delete(s.running, ns)
	}
	s.wakeNext(ns)
}

// leave ends a reconcile of key that took no slot: if it had been woken,
// the next in line is.
func (s *testSlots) leave(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.woken[key] {
		delete(s.woken, key)
		s.wakeNext(key.Namespace)
	}
}

// wakeNext wakes the first in ns's line; s.mu is held.
func (s *testSlots) wakeNext(ns string) {
	line := s.waiting[ns]
	if len(line) == 0 {
		return
	}
	next := line[0]
	if s.waiting[ns] = line[1:]; len(s.waiting[ns]) == 0 {
		delete(s.waiting, ns)
	}
	s.woken[next] = true
	// The queue takes it when the controller reads the channel: not under
	// the lock, and not holding up the test that ended.
	go func() {
		s.wake <- event.GenericEvent{Object: &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: next.Namespace, Name: next.Name}}}
	}()
}
