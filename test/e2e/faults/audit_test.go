package faults

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsink"
	"github.com/sftpgate/sftpgate/internal/apitoken"
	"github.com/sftpgate/sftpgate/internal/audit"
)

// TestAuditOfAKilledGateway: a gateway replica killed (SIGKILL) under
// load loses at most the records of its last moments, and the receiver
// can name what it may have lost: the killed replica's chain arrives
// whole from its first record to its last stored one, and not closed;
// every write answered well before the kill is in it; the next replica's
// chain, stopped cleanly, arrives whole and closed. The replicas log
// warnings only: records are kept whatever the log's level.
func TestAuditOfAKilledGateway(t *testing.T) {
	t.Parallel()
	src := testsftp.Start(t)
	ns := testkit.Namespace(t, k8s, "audit-kill-")
	slug := "kill-" + ns[len(ns)-5:]
	testkit.ReadyConnection(t, k8s, ns, "files", src.Login(), func(c *v1alpha1.SftpConnection) { c.Spec.Slug = slug })
	token := "sgk_" + strings.Repeat("k", 40) + ns[len(ns)-5:]
	must(t, k8s.Create(context.Background(), &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "load"},
		Spec: v1alpha1.ApiKeySpec{Token: v1alpha1.TokenSource{SHA256: apitoken.Hash(token)}}}))
	sink := testsink.Start(t)
	must(t, k8s.Create(context.Background(), &v1alpha1.AuditSink{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v1alpha1.AuditSinkName},
		Spec: v1alpha1.AuditSinkSpec{Sink: v1alpha1.Destination{URI: sink.URL}, MaxBatch: 500}}))

	// A replica of the test's own, which alone serves this namespace's
	// requests: the system's workers deliver its records.
	gw, err := sys.Add(context.Background(), "gateway")
	must(t, err)
	t.Cleanup(func() { _ = gw.Kill() })
	// A write that fails (the replica killed under it) says so: no
	// test failure.
	write := func(name string) bool {
		req, err := http.NewRequest(http.MethodPost, gw.URL+"/"+slug+"/write",
			strings.NewReader(fmt.Sprintf(`{"path": %q, "file": {"text": "x"}}`, name)))
		must(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		return err == nil && resp.StatusCode == http.StatusOK && !strings.Contains(string(body), `"error"`)
	}
	eventually(t, "the key and connection are usable", func() bool { return write("warm-up") })
	// Load from 8 clients; each notes when each of its writes was
	// answered.
	var (
		mu       sync.Mutex
		answered = map[string]time.Time{}
		stop     atomic.Bool
		wg       sync.WaitGroup
	)
	for c := range 8 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				name := fmt.Sprintf("load-%d-%d", c, i)
				if write(name) {
					mu.Lock()
					answered[name] = time.Now()
					mu.Unlock()
				}
			}
		})
	}
	// The kill comes once many writes were answered more than two stores
	// before it: those the check below finds stored.
	eventually(t, "a hundred writes are answered two stores ago", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, at := range answered {
			if time.Since(at) > 2*audit.StoreEvery {
				n++
			}
		}
		return n >= 100
	})
	must(t, gw.Kill())
	killed := time.Now()
	stop.Store(true)
	wg.Wait()

	// The next replica: the same flags and address, a new chain.
	must(t, gw.Start(context.Background()))
	if !write("after") {
		t.Fatal("the second replica does not write")
	}
	must(t, gw.Stop())

	var killedChain, nextChain audit.Report
	eventually(t, "the sink gets the second replica's closed chain", func() bool {
		for _, rep := range audit.Verify(sink.AuditRecords(t)) {
			switch {
			case rep.Closed:
				nextChain = rep
			case strings.HasPrefix(rep.Replica, "gateway/"):
				killedChain = rep
			}
		}
		return nextChain.Closed && killedChain.Records > 0
	})
	if !nextChain.Whole() || nextChain.First != 1 {
		t.Errorf("the second replica's chain: %+v", nextChain)
	}
	if !killedChain.Whole() || killedChain.First != 1 || killedChain.Closed {
		t.Errorf("the killed replica's chain: %+v", killedChain)
	}
	written := map[string]bool{}
	for _, r := range sink.AuditRecords(t) {
		if r.Replica == killedChain.Replica && r.Action == "gateway.write" && r.Result == audit.ResultOK {
			written[r.Paths[0]] = true
		}
	}
	// What was answered more than two stores before the kill was stored.
	var lost []string
	for name, at := range answered {
		if !written[name] && at.Before(killed.Add(-2*audit.StoreEvery)) {
			lost = append(lost, name)
		}
	}
	slices.Sort(lost)
	if len(lost) > 0 {
		t.Errorf("%d writes answered well before the kill have no record: %q", len(lost), lost[:min(len(lost), 5)])
	}
	t.Logf("%d writes answered by the killed replica; its chain at the sink ends at %d records, not closed: the receiver names the gap after seq %d",
		len(answered), killedChain.Records, killedChain.Last)
}
