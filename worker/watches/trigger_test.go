package watches

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// TestRecentlyMadeCountsWhatTheCacheDoesNotShow: the namespace's bound
// counts a Transfer made until the cache shows it, and not twice after;
// one never shown is forgotten after goneAfter.
func TestRecentlyMadeCountsWhatTheCacheDoesNotShow(t *testing.T) {
	var m recentlyMade
	m.add("a", "w-1")
	m.add("a", "w-2")
	m.add("b", "w-3")
	if n := m.unshown("a", nil); n != 2 {
		t.Fatalf("%d unshown, want 2", n)
	}
	if n := m.unshown("a", map[string]bool{"w-1": true}); n != 1 {
		t.Fatalf("%d unshown once the cache shows one, want 1", n)
	}
	if n := m.unshown("a", nil); n != 1 {
		t.Fatalf("a Transfer shown once is counted again: %d", n)
	}
	m.of["a"]["w-2"] = time.Now().Add(-2 * goneAfter)
	if n := m.unshown("a", nil); n != 0 || m.of["a"] != nil {
		t.Errorf("a Transfer never shown is kept: %d, %v", n, m.of)
	}
	if n := m.unshown("b", nil); n != 1 {
		t.Errorf("another namespace's: %d", n)
	}
}

// TestTransferNameFitsAnyWatch: a Transfer's name is a valid object name
// for every watch name, and differs by event.
func TestTransferNameFitsAnyWatch(t *testing.T) {
	id := strings.Repeat("ab", 16)
	for _, watch := range []string{"inbox", strings.Repeat("a", 253), strings.Repeat("a.", 110) + "b-c", strings.Repeat("a", 219) + "-x"} {
		name := TransferName(watch, id)
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Errorf("%q: %v", name, errs)
		}
		if TransferName(watch, strings.Repeat("cd", 16)) == name {
			t.Errorf("%q: two events, one name", watch)
		}
	}
}
