package watches

import (
	"encoding/json"
	"path"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/worker/ends"
	"github.com/sftpgate/sftpgate/worker/watch"
)

// FuzzCloudEvent: whatever a file's path below the watched folder holds
// (a server's names: long, not UTF-8, control bytes), its event is a
// valid CloudEvent whose subject and data name the file in the watched
// folder, and whose data reads back to the same path and name wherever
// they are UTF-8.
func FuzzCloudEvent(f *testing.F) {
	for _, p := range []string{"a.csv", "sub/b.csv", "\xff\xfe", "é\x80/x", "\x1b[31mred\n", `"quoted" \ back`, strings.Repeat("n", 300), "<b>&amp;"} {
		f.Add("/in", p)
	}
	conn, _ := ends.Of(v1alpha1.ConnectionReference{Name: "box"}, &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "box"}})
	f.Fuzz(func(t *testing.T, watched, rel string) {
		if !path.IsAbs(watched) || path.Clean(watched) != watched {
			return // a watch's path is a clean absolute one (its spec's validation)
		}
		for _, part := range strings.Split(rel, "/") {
			if part == "" || part == "." || part == ".." || strings.ContainsRune(part, 0) {
				return // not a path a listing makes (FuzzWalk)
			}
		}
		w := &v1alpha1.SftpWatch{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "w", UID: "uid"}, Spec: v1alpha1.SftpWatchSpec{Path: watched}}
		when := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
		e := watch.Event{Type: v1alpha1.WatchCreated, File: watch.File{Path: rel, Size: 1, ModTime: when.Unix()}}
		event, err := CloudEvent(w, conn, watch.Pending{Event: e, ID: EventID(w.UID, e), Observed: when})
		if err != nil {
			t.Fatal(err)
		}
		if err := event.Validate(); err != nil {
			t.Fatalf("%q: %v", rel, err)
		}
		full := path.Join(watched, rel)
		// The SDK trims the subject's spaces; the data has the path whole.
		if event.Subject() != strings.TrimSpace(full) || !strings.HasPrefix(full, strings.TrimSuffix(watched, "/")+"/") {
			t.Fatalf("%q in %q: subject %q", rel, watched, event.Subject())
		}
		var data Data
		if err := json.Unmarshal(event.Data(), &data); err != nil {
			t.Fatalf("%q: %v", rel, err)
		}
		if utf8.ValidString(full) && (data.Path != full || data.Name != path.Base(rel)) {
			t.Fatalf("%q in %q reads back as %q, %q", rel, watched, data.Path, data.Name)
		}
	})
}
