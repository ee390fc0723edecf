// Package testkit is what every test package does the same way: stop at
// an error, and wait for a condition within a deadline (never for a
// time).
package testkit

import (
	"testing"
	"time"
)

// Must stops the test at err.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Eventually waits until cond holds, looking every 50 ms, and fails the
// test if it does not within a minute; what says what was awaited.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
	}
}
