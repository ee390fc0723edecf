package transfer

import (
	"io"
	"testing"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// TestDecideTransformed: a transformed copy's target passes for the copy
// only when an earlier run may have written it; a file someone put there
// in the same second is skipped or replaced as the policy says, never
// taken for done.
func TestDecideTransformed(t *testing.T) {
	same := &entry{size: 99, modTime: 100}
	older := &entry{size: 99, modTime: 50}
	r := Result{Size: 10, ModTime: 100}
	identity := func(io.Writer, io.Reader, string) error { return nil }
	for _, c := range []struct {
		name      string
		target    *entry
		overwrite v1alpha1.OverwritePolicy
		resumed   bool
		replace   bool
		state     FileState
	}{
		{"resumed, its time: the copy", same, v1alpha1.OverwriteAlways, true, false, Done},
		{"fresh, the same second, Never", same, v1alpha1.OverwriteNever, false, false, Skipped},
		{"fresh, the same second, IfDifferent", same, v1alpha1.OverwriteIfDifferent, false, false, Skipped},
		{"fresh, the same second, Always", same, v1alpha1.OverwriteAlways, false, true, Waiting},
		{"another time, IfDifferent", older, v1alpha1.OverwriteIfDifferent, false, true, Waiting},
		{"resumed, another time, Never", older, v1alpha1.OverwriteNever, true, false, Skipped},
	} {
		j := &Job{Overwrite: c.overwrite, Resumed: c.resumed, Transform: identity}
		replace, state, err := j.decide(nil, nil, c.target, r)
		if err != nil || replace != c.replace || state != c.state {
			t.Errorf("%s: replace %v, state %v, %v; want %v, %v", c.name, replace, state, err, c.replace, c.state)
		}
	}
}
