package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// reservationsNamespace makes a namespace of the test's own for
// reservations' Leases, on the suite's API server.
func reservationsNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "reservations-"}}
	if err := apiServer.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// TestSweep: the sweep starts the grace period of names no longer in use
// (once they are a sweep old), leaves those in use, deletes those past
// their grace period, and keeps at most maxFreed freed names a namespace.
func TestSweep(t *testing.T) {
	ctx := t.Context()
	ns := reservationsNamespace(t)
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	lease := func(name, holder string, acquired time.Duration, freed ...time.Duration) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slug-" + name,
			Labels: map[string]string{LabelReservation: "slug"}}}
		l.Spec = coordinationv1.LeaseSpec{HolderIdentity: &holder, AcquireTime: &metav1.MicroTime{Time: now.Add(-acquired)}}
		if len(freed) > 0 {
			seconds := int32(300)
			l.Spec.RenewTime, l.Spec.LeaseDurationSeconds = &metav1.MicroTime{Time: now.Add(-freed[0])}, &seconds
		}
		return l
	}
	objects := []client.Object{
		lease("served", "a", time.Hour),
		lease("just-taken", "a", time.Second),
		lease("let-go", "a", time.Hour),
		lease("expired", "a", time.Hour, 301*time.Second),
		lease("other", "b", time.Hour, time.Minute),
	}
	for i := range maxFreed + 2 {
		objects = append(objects, lease(fmt.Sprintf("churn-%03d", i), "a", time.Hour, time.Duration(i+1)*time.Second))
	}
	for _, o := range objects {
		if err := apiServer.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	c := apiServer
	s := &reservations{client: c, namespace: ns, kind: "slug", grace: 5 * time.Minute, sweep: 30 * time.Second,
		inUse: func(_ context.Context, name string) (bool, error) { return name == "served", nil }}
	if err := s.sweepOnce(ctx, now); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"served": "held", "just-taken": "held", "let-go": "freed now", "expired": "gone", "other": "freed",
		// The latest maxFreed of those freed before this sweep.
		"churn-000": "freed", fmt.Sprintf("churn-%03d", maxFreed-1): "freed",
		fmt.Sprintf("churn-%03d", maxFreed): "gone", fmt.Sprintf("churn-%03d", maxFreed+1): "gone",
	} {
		var got coordinationv1.Lease
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "slug-" + name}, &got)
		state := "gone"
		switch {
		case err == nil && got.Spec.RenewTime == nil:
			state = "held"
		case err == nil && got.Spec.RenewTime.Equal(&metav1.MicroTime{Time: now}):
			state = "freed now"
		case err == nil:
			state = "freed"
		case client.IgnoreNotFound(err) != nil:
			t.Fatal(err)
		}
		if state != want {
			t.Errorf("%s: %s, want %s", name, state, want)
		}
	}
}

// TestHoldOnAReservationTheCacheHasNotSeen: a claim made on a cache that
// has not seen a name's reservation (made at the same moment by another
// worker) succeeds if it is held for the same namespace, and is decided
// again if held for another.
func TestHoldOnAReservationTheCacheHasNotSeen(t *testing.T) {
	ctx := t.Context()
	ns := reservationsNamespace(t)
	for _, tc := range []struct {
		name, holder string
		wantErr      bool
	}{
		{name: "made by another worker for the same namespace", holder: "a"},
		{name: "held for another namespace", holder: "b", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "token-abc-" + tc.holder,
				Labels: map[string]string{LabelReservation: "token"}}}
			lease.Spec = heldBy(tc.holder)
			if err := apiServer.Create(ctx, lease); err != nil {
				t.Fatal(err)
			}
			server := apiServer
			s := &reservations{client: unseen{server}, apiReader: server, namespace: ns, kind: "token", grace: time.Minute, sweep: time.Second}
			err := s.hold(ctx, "abc-"+tc.holder, "a")
			if (err != nil) != tc.wantErr {
				t.Fatalf("hold: %v, want an error: %t", err, tc.wantErr)
			}
			var got coordinationv1.Lease
			if err := server.Get(ctx, client.ObjectKeyFromObject(lease), &got); err != nil {
				t.Fatal(err)
			}
			if *got.Spec.HolderIdentity != tc.holder {
				t.Errorf("reservation held for %s; want held for %s", *got.Spec.HolderIdentity, tc.holder)
			}
		})
	}
}

// unseen is a cache that has not seen any Lease yet: writes go to the
// API server.
type unseen struct{ client.Client }

func (unseen) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	return apierrors.NewNotFound(coordinationv1.Resource("leases"), key.Name)
}
