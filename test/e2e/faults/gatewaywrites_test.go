package faults

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsink"
	"github.com/sftpgate/sftpgate/internal/tempname"
)

// TestWatchReportsGatewayWritesOnce: a file written through the gateway
// (to a temporary name, then renamed over the final one) is reported once,
// by its final name, even when a poll catches the upload half done; and
// afterDelivery Delete removes each file once its event is delivered.
func TestWatchReportsGatewayWritesOnce(t *testing.T) {
	f := newFixture(t)
	r := testsink.Start(t)
	in := filepath.Join(f.sshd.Dir, "in")
	must(t, os.Mkdir(in, 0o755))
	must(t, os.Chown(in, f.sshd.UID, f.sshd.GID))
	w := &v1alpha1.SftpWatch{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "incoming"}, Spec: v1alpha1.SftpWatchSpec{
		ConnectionRef: v1alpha1.ConnectionReference{Name: f.conn.Name}, Path: "/in",
		PollInterval: &metav1.Duration{Duration: 5 * time.Second}, Stability: v1alpha1.Stability{MinAge: &metav1.Duration{}},
		Sink: &v1alpha1.Destination{URI: r.URL}, AfterDelivery: v1alpha1.AfterDelivery{Action: v1alpha1.AfterDeliveryDelete}}}
	must(t, k8s.Create(context.Background(), w))
	deleteWhenDone(t, w)
	next := testkit.Polls(t, k8s, w)
	next(1)
	if status, answer := f.call(t, "write", `{"path": "in/small.txt", "file": {"text": "hello"}}`); status != http.StatusOK || answer["error"] != nil {
		t.Fatalf("a small write: %d %v", status, answer)
	}
	// A raw upload, its first half sent, then held across a poll.
	body, send := io.Pipe()
	answered := make(chan int, 1)
	go func() {
		status, _ := f.post(t, "write", "path=in/large.bin", "application/octet-stream", body)
		answered <- status
	}()
	half := make([]byte, 512<<10)
	_, err := send.Write(half)
	must(t, err)
	eventually(t, "the upload's temporary file is on the server", func() bool {
		entries, err := os.ReadDir(in)
		must(t, err)
		return slices.ContainsFunc(entries, func(e os.DirEntry) bool { return tempname.Is(e.Name()) })
	})
	next(1)
	_, err = send.Write(half)
	must(t, err)
	must(t, send.Close())
	if status := <-answered; status != http.StatusOK {
		t.Fatalf("the upload: %d", status)
	}
	eventually(t, "both files are reported", func() bool { return len(r.Subjects()) >= 2 })
	next(2)
	want := []string{"dev.sftpgate.file.created /in/small.txt", "dev.sftpgate.file.created /in/large.bin"}
	if got := r.Subjects(); !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	entries, err := os.ReadDir(in)
	must(t, err)
	if len(entries) != 0 {
		names := make([]string, len(entries))
		for i, e := range entries {
			names[i] = e.Name()
		}
		t.Errorf("files left after delivery with afterDelivery Delete: %s", strings.Join(names, ", "))
	}
}
