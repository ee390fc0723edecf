package watches

import (
	"testing"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/worker/ends"
)

// TestSameFolder: a state goes on when its connection was made again
// under its name (another UID), and when it was keyed by the connection's
// UID as the releases before keyed it; it starts over for another
// connection, root or path, and for a UID key of another connection
// object.
func TestSameFolder(t *testing.T) {
	wt := &v1alpha1.SftpWatch{Spec: v1alpha1.SftpWatchSpec{ConnectionRef: v1alpha1.ConnectionReference{Name: "box"}, Path: "/in"}}
	conn := &ends.End{Ref: wt.Spec.ConnectionRef, UID: "uid-1", Root: "/home/partner"}
	stored := specKey(wt, conn)
	again := *conn
	again.UID = "uid-2"
	if !sameFolder(stored, wt, &again) {
		t.Error("a connection made again under its name starts the watch over")
	}
	if !sameFolder(keyOf("uid-2", &again, wt), wt, &again) {
		t.Error("a state keyed by the connection's UID starts over")
	}
	if sameFolder(keyOf("uid-1", &again, wt), wt, &again) {
		t.Error("a state keyed by another connection object's UID goes on")
	}
	store := &ends.End{Ref: v1alpha1.ConnectionReference{Name: "box", Kind: v1alpha1.KindObjectStore}, UID: "uid-1", Root: "/"}
	elsewhere := *conn
	elsewhere.Root = "/home/other"
	otherPath := *wt
	otherPath.Spec.Path = "/out"
	for what, changed := range map[string]bool{
		"another connection": sameFolder(stored, wt, &ends.End{Ref: v1alpha1.ConnectionReference{Name: "other"}, UID: "uid-1", Root: conn.Root}),
		"an object store":    sameFolder(stored, wt, store),
		"another root":       sameFolder(stored, wt, &elsewhere),
		"another path":       sameFolder(stored, &otherPath, conn),
	} {
		if changed {
			t.Errorf("%s goes on from the state of the one before", what)
		}
	}
}
