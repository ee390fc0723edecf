package auditstore

import "testing"

// SetMaxSegment makes segments split past n bytes for t's length.
func SetMaxSegment(t *testing.T, n int) {
	old := maxSegment
	maxSegment = n
	t.Cleanup(func() { maxSegment = old })
}
