// Package faults tests the components together, each a process of the
// built binary on a real control plane (test/framework): what users write
// through the gateway when things fail under it (a real sshd killed
// mid-operation or restarted under load, the API server stopped, the
// manager restarted mid-test and mid-rotation), the events of a watch and
// a transfer when the worker replica running them is killed, the audit
// trail of a gateway replica killed under load; and what crosses
// components when nothing fails: a gateway write reported once by a
// watch, expired uploads swept by the worker, API keys the manager issues
// decided by the gateway. It imports no component: it sees them as users
// and operators do.
package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/internal/apitoken"
	"github.com/sftpgate/sftpgate/internal/tempname"
	"github.com/sftpgate/sftpgate/test/framework"
)

// The test kit's, as every test package has them.
var (
	must       = testkit.Must
	eventually = testkit.Eventually
)

var (
	// sys is the system under test: the manager, two gateways, two
	// workers.
	sys *framework.System
	k8s client.Client
	// baseURL is the first gateway's, which the fixtures' requests go to.
	baseURL string
)

// flags are what the tests need of the components beside their defaults:
// a JSON write of tens of MiB; a worker that fails is replaced within a
// short lease period, writes each poll's time (testkit.Polls) and its
// states soon, and looks for expired uploads every second.
var flags = map[string][]string{
	"gateway": {"--max-body-bytes=67108864", "--request-timeout=1m", "--idle-timeout=1m"},
	"worker": {"--lease-duration=3s", "--write-interval=200ms", "--poll-time-interval=1ns",
		"--upload-sweep-interval=1s"},
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	var err error
	if sys, err = framework.Start(context.Background(), framework.Options{Flags: flags}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer sys.Stop()
	k8s, baseURL = sys.Client, sys.Gateways[0].URL
	code := m.Run()
	if code != 0 {
		for _, p := range sys.Processes() {
			fmt.Fprintf(os.Stderr, "%s's log ends:\n%s\n", p.Name, p.LogTail(30))
		}
	}
	return code
}

// restartManager stops the manager (SIGTERM, as a rollout does), waits
// until it has, runs between, and starts it again.
func restartManager(t *testing.T, between func()) {
	t.Helper()
	must(t, sys.Manager.Stop())
	between()
	must(t, sys.Manager.Start(context.Background()))
}

// restartEnded starts again every process of the system that ended, as
// the kubelet would: a manager ends when its leadership lapses.
func restartEnded(t *testing.T) {
	t.Helper()
	for _, p := range sys.Processes() {
		if !p.Running() {
			t.Logf("%s ended; starting it again", p.Name)
			must(t, p.Start(context.Background()))
		}
	}
}

// fixture is a connection to a real sshd and a key for it.
type fixture struct {
	ns, slug, token string
	sshd            *testsshd.Server
	conn            *v1alpha1.SftpConnection
}

// newFixture starts an sshd, makes a connection to it and a key, and waits
// until the gateway serves them.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	sshd := testsshd.Start(t)
	ns := testkit.Namespace(t, k8s, "faults-")
	conn := testkit.ReadyConnection(t, k8s, ns, "box", sshd.Login())
	token, keyID := apitoken.NewToken()
	must(t, k8s.Create(ctx, &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "key"},
		Spec: v1alpha1.ApiKeySpec{Token: v1alpha1.TokenSource{SHA256: apitoken.Hash(token), KeyID: keyID}}}))
	f := &fixture{ns: ns, slug: conn.Spec.Slug, token: token, sshd: sshd, conn: conn}
	eventually(t, "the gateway serves the connection", func() bool {
		status, _ := f.call(t, "exists", `{"path": "/"}`)
		return status == http.StatusOK
	})
	return f
}

// call posts a JSON command and returns the status and the answer.
func (f *fixture) call(t *testing.T, command, body string) (int, map[string]any) {
	t.Helper()
	status, raw := f.post(t, command, "", "application/json", strings.NewReader(body))
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: %d, not JSON: %q", command, status, raw)
	}
	return status, out
}

// post sends a command's request and returns the status and the body.
func (f *fixture) post(t *testing.T, command, query, contentType string, body io.Reader) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, baseURL+"/"+f.slug+"/"+command+"?"+query, body)
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("Content-Type", contentType)
	resp, err := httpClient.Do(req)
	must(t, err)
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	must(t, err)
	return resp.StatusCode, raw
}

// ok calls a command that must succeed.
func (f *fixture) ok(t *testing.T, command, body string) map[string]any {
	t.Helper()
	status, out := f.call(t, command, body)
	if status != http.StatusOK || out["error"] != nil {
		t.Fatalf("%s %.100s: %d %v", command, body, status, out)
	}
	return out
}

// file is what a file on the server holds.
func (f *fixture) file(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.sshd.Dir, name))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// temporaries lists the gateway's temporary names in dir on the server.
func (f *fixture) temporaries(dir string) []string {
	found, _ := filepath.Glob(filepath.Join(f.sshd.Dir, dir, tempname.Prefix+"*"))
	return found
}

// killWhenTemporary kills sshd's sessions as soon as a temporary name
// appears in dir: in the middle of the operation that made it.
func (f *fixture) killWhenTemporary(t *testing.T, dir string) {
	t.Helper()
	eventually(t, "the operation starts its temporary file", func() bool { return len(f.temporaries(dir)) > 0 })
	f.sshd.KillSessions(t)
}

// cleanedUp checks that after the next request (the first on a new
// session), no temporary name is left in dir.
func (f *fixture) cleanedUp(t *testing.T, dir string) {
	t.Helper()
	f.ok(t, "ping", ``)
	eventually(t, "the leftovers are removed", func() bool {
		f.ok(t, "ping", ``)
		return len(f.temporaries(dir)) == 0
	})
}

var httpClient = &http.Client{Timeout: 2 * time.Minute}

// retryable is an answer that says the server failed and a retry may
// succeed.
func retryable(status int) bool {
	return status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout
}

// TestKilledMidUpload: sshd dies while a raw upload replaces a file. The
// file keeps its old content, the answer is a retryable error, and the
// next session removes the temporary file.
func TestKilledMidUpload(t *testing.T) {
	f := newFixture(t)
	f.ok(t, "write", `{"path": "file", "file": {"text": "old"}}`)
	body, feed := io.Pipe()
	answered := make(chan int, 1)
	go func() {
		status, _ := f.post(t, "write", "path=file", "application/octet-stream", body)
		answered <- status
	}()
	_, err := feed.Write(bytes.Repeat([]byte("new "), 64<<10))
	must(t, err)
	f.killWhenTemporary(t, "")
	_ = feed.Close()
	if status := <-answered; !retryable(status) {
		t.Errorf("the upload cut off by the server answered %d, want a retryable error", status)
	}
	if got := f.file(t, "file"); got != "old" {
		t.Errorf("the file holds %.20q (%d bytes), want its old content", got, len(got))
	}
	f.cleanedUp(t, "")
	f.ok(t, "write", `{"path": "file", "file": {"text": "newer"}}`)
}

// TestKilledMidWrite: sshd dies while a JSON write replaces a file: it
// holds the old content or the whole new one, never a part.
func TestKilledMidWrite(t *testing.T) {
	f := newFixture(t)
	f.ok(t, "write", `{"path": "file", "file": {"text": "old"}}`)
	content := strings.Repeat("new content ", 2<<20)
	answered := make(chan int, 1)
	go func() {
		status, _ := f.call(t, "write", fmt.Sprintf(`{"path": "file", "file": {"text": %q}}`, content))
		answered <- status
	}()
	f.killWhenTemporary(t, "")
	status := <-answered
	switch got := f.file(t, "file"); {
	case got == content && status == http.StatusOK:
		t.Log("the write was complete when the server died")
	case got == "old" && retryable(status):
		t.Log("the write was cut off")
	default:
		t.Errorf("answered %d, and the file holds %d bytes (%.20q), want the old content or the whole new one", status, len(got), got)
	}
	f.cleanedUp(t, "")
}

// TestKilledMidCopy: sshd dies while copy replaces a file.
func TestKilledMidCopy(t *testing.T) {
	f := newFixture(t)
	source := bytes.Repeat([]byte("source "), 10<<20)
	must(t, os.WriteFile(filepath.Join(f.sshd.Dir, "source"), source, 0o644))
	f.ok(t, "write", `{"path": "target", "file": {"text": "old"}}`)
	answered := make(chan int, 1)
	go func() {
		status, _ := f.call(t, "copy", `{"from": "source", "to": "target", "overwrite": true}`)
		answered <- status
	}()
	f.killWhenTemporary(t, "")
	status := <-answered
	switch got := f.file(t, "target"); {
	case got == string(source) && status == http.StatusOK:
		t.Log("the copy was complete when the server died")
	case got == "old" && retryable(status):
		t.Log("the copy was cut off")
	default:
		t.Errorf("answered %d, and the target holds %d bytes, want the old content or the whole source", status, len(got))
	}
	f.cleanedUp(t, "")
}

// TestKilledMidRmdir: sshd dies while a recursive rmdir removes a tree:
// the tree is gone from its name at once, and what is left of it goes in
// the background.
func TestKilledMidRmdir(t *testing.T) {
	f := newFixture(t)
	for d := range 20 {
		dir := filepath.Join(f.sshd.Dir, "tree", fmt.Sprint(d))
		must(t, os.MkdirAll(dir, 0o755))
		for i := range 100 {
			must(t, os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), nil, 0o644))
		}
	}
	must(t, filepath.Walk(filepath.Join(f.sshd.Dir, "tree"), func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, f.sshd.UID, f.sshd.GID)
	}))
	answered := make(chan int, 1)
	go func() {
		status, _ := f.call(t, "rmdir", `{"path": "tree", "recursive": true}`)
		answered <- status
	}()
	f.killWhenTemporary(t, "")
	status := <-answered
	if _, err := os.Stat(filepath.Join(f.sshd.Dir, "tree")); !os.IsNotExist(err) {
		t.Errorf("after rmdir cut off halfway, tree is still there (%v)", err)
	}
	if status != http.StatusOK && !retryable(status) {
		t.Errorf("the rmdir cut off by the server answered %d", status)
	}
	f.cleanedUp(t, "")
}

// TestRestartUnderLoad: sshd restarts while clients read and write. Every
// answer is right, or a retryable error; reads, which change nothing, are
// retried on a new session when theirs broke.
func TestRestartUnderLoad(t *testing.T) {
	f := newFixture(t)
	f.ok(t, "write", `{"path": "fixed", "file": {"text": "fixed content"}}`)
	var (
		wg                            sync.WaitGroup
		stop                          = make(chan struct{})
		mu                            sync.Mutex
		answers, successes, retryErrs int
	)
	for c := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("c%d-%d", c, i)
				status, out := f.call(t, "write", fmt.Sprintf(`{"path": %q, "file": {"text": %q}}`, name, name))
				if status == http.StatusOK && out["error"] == nil && f.file(t, name) != name {
					t.Errorf("%s: answered 200, and the file holds %q", name, f.file(t, name))
				}
				rstatus, rout := f.call(t, "read", `{"path": "fixed"}`)
				result, _ := rout["read"].(map[string]any)
				mu.Lock()
				answers += 2
				for _, s := range []int{status, rstatus} {
					switch {
					case s == http.StatusOK:
						successes++
					case retryable(s):
						retryErrs++
					case s != http.StatusOK:
						t.Errorf("answered %d, neither right nor retryable", s)
					}
				}
				mu.Unlock()
				if retryable(status) || retryable(rstatus) {
					time.Sleep(10 * time.Millisecond) // as a client backs off
				}
				if rstatus == http.StatusOK && (result == nil || result["content"] != "fixed content") {
					t.Errorf("read answered 200 with %v", rout)
				}
			}
		})
	}
	// Between restarts, the load runs until a hundred more answers are
	// right.
	served := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return successes >= 100
	}
	for range 3 {
		eventually(t, "the load is served", served)
		mu.Lock()
		successes = 0
		mu.Unlock()
		f.sshd.Restart(t)
	}
	eventually(t, "the load is served after the last restart", served)
	close(stop)
	wg.Wait()
	t.Logf("%d answers, %d of them retryable errors", answers, retryErrs)

	// With the server back, a read whose pooled session broke is retried
	// on a fresh one: the client sees nothing.
	f.ok(t, "read", `{"path": "fixed"}`)
	f.sshd.Restart(t)
	f.ok(t, "read", `{"path": "fixed"}`)
}

// TestAPIServerStopped: while the API server answers nothing, the gateway
// serves what its cache holds and says so in a metric; once it answers
// again, changes made since are honoured.
func TestAPIServerStopped(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	apiServer := sys.APIServer.Pid()
	must(t, syscall.Kill(apiServer, syscall.SIGSTOP))
	stopped := true
	var thawed time.Time
	thaw := func() {
		if stopped {
			_ = syscall.Kill(apiServer, syscall.SIGCONT)
			stopped, thawed = false, time.Now()
		}
	}
	defer thaw()
	up := func() float64 {
		v, err := sys.Gateways[0].Metric(ctx, "sftpgate_gateway_api_server_up")
		if err != nil {
			return -1
		}
		return v
	}
	eventually(t, "the gateway says the API server is down", func() bool { return up() == 0 })
	f.ok(t, "write", `{"path": "while-down", "file": {"text": "served from the cache"}}`)
	if got := f.file(t, "while-down"); got != "served from the cache" {
		t.Errorf("the file holds %q", got)
	}
	thaw()
	eventually(t, "the gateway says the API server is up", func() bool { return up() == 1 })

	var key v1alpha1.ApiKey
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "key"}, &key))
	patch := client.MergeFrom(key.DeepCopy())
	key.Spec.Disabled = true
	must(t, k8s.Patch(ctx, &key, patch))
	eventually(t, "the disabled key is refused", func() bool {
		status, _ := f.call(t, "ping", ``)
		return status == http.StatusUnauthorized
	})

	// The manager could not renew its leadership while the API server was
	// stopped: it renews it now, or it lost it and ended, as a manager
	// does, to be started again as its pod would be.
	eventually(t, "the manager renews its leadership or ends", func() bool {
		if !sys.Manager.Running() {
			return true
		}
		var lease coordinationv1.Lease
		err := k8s.Get(ctx, client.ObjectKey{Namespace: framework.Namespace, Name: managerLease}, &lease)
		return err == nil && lease.Spec.RenewTime != nil && lease.Spec.RenewTime.After(thawed)
	})
	restartEnded(t)
}

// managerLease is the manager's leader election Lease.
const managerLease = "manager.sftpgate.dev"

// TestManagerRestartedMidTest: the manager stops while it tests a
// connection to a server that does not answer yet. The next manager tests
// it again: the connection ends Ready for its current spec.
func TestManagerRestartedMidTest(t *testing.T) {
	f := newFixture(t)
	thaw := f.sshd.Freeze(t)
	defer thaw()
	var conn v1alpha1.SftpConnection
	must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(f.conn), &conn))
	patch := client.MergeFrom(conn.DeepCopy())
	conn.Spec.Limits.ConnectTimeout = &metav1.Duration{Duration: time.Minute}
	dials := dialsTo(t, f.sshd.Port)
	must(t, k8s.Patch(context.Background(), &conn, patch))
	// The new spec's test hangs in the handshake with the frozen server.
	eventually(t, "the test reaches the frozen server", func() bool { return dialsTo(t, f.sshd.Port) > dials })
	restartManager(t, thaw)
	eventually(t, "the connection is Ready for its current spec", func() bool {
		must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(f.conn), &conn))
		ready := meta.FindStatusCondition(conn.Status.Conditions, v1alpha1.ConditionReady)
		return ready != nil && ready.ObservedGeneration == conn.Generation && ready.Reason == v1alpha1.ReasonConnected
	})
}

// dialsTo counts the TCP connections of this machine to port on
// loopback, as their clients see them, established (the server's kernel
// accepts them, however frozen the server).
func dialsTo(t *testing.T, port int32) int {
	t.Helper()
	raw, err := os.ReadFile("/proc/net/tcp")
	must(t, err)
	remote := fmt.Sprintf("0100007F:%04X", port)
	n := 0
	for line := range strings.SplitSeq(string(raw), "\n") {
		if fields := strings.Fields(line); len(fields) > 3 && fields[2] == remote && fields[3] == "01" {
			n++
		}
	}
	return n
}

// TestManagerRestartedMidRotation: the manager stops in the middle of
// rotating a key's token. The next one finishes the rotation without
// issuing a second token (the one a client may already have taken from
// the Secret stays the key's), and the key's status names it.
func TestManagerRestartedMidRotation(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "rotation-"}}
	must(t, k8s.Create(ctx, ns))
	key := &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "rotated"}}
	must(t, k8s.Create(ctx, key))
	var secret corev1.Secret
	eventually(t, "the key is issued", func() bool {
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(key), key))
		return meta.IsStatusConditionTrue(key.Status.Conditions, v1alpha1.ConditionReady)
	})
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: key.Status.SecretName}, &secret))
	first := string(secret.Data[v1alpha1.SecretKeyToken])

	for round := range 3 {
		requested := fmt.Sprintf("2026-01-01T00:00:0%dZ", round)
		patch := client.MergeFrom(key.DeepCopy())
		metav1.SetMetaDataAnnotation(&key.ObjectMeta, v1alpha1.AnnotationRotateRequestedAt, requested)
		must(t, k8s.Patch(ctx, key, patch))
		// Stop the manager as soon as the Secret holds the new token:
		// before, while or after the key's status is written.
		eventually(t, "the Secret answers the rotation", func() bool {
			must(t, k8s.Get(ctx, client.ObjectKeyFromObject(&secret), &secret))
			return secret.Annotations[v1alpha1.AnnotationRotateRequestedAt] == requested
		})
		issued := string(secret.Data[v1alpha1.SecretKeyToken])
		restartManager(t, func() {})
		eventually(t, "the key's status names the Secret's token", func() bool {
			must(t, k8s.Get(ctx, client.ObjectKeyFromObject(key), key))
			return key.Status.LastHandledRotateRequest == requested && key.Status.TokenSHA256 == apitoken.Hash(strings.TrimSpace(issued))
		})
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(&secret), &secret))
		if got := string(secret.Data[v1alpha1.SecretKeyToken]); got != issued || got == first {
			t.Errorf("rotation %d: the Secret holds another token after the restart: the rotation was issued twice", round)
		}
		first = issued
	}
}

// TestSlugHeldAcrossManagerRestart: a slug freed while the manager is
// down is held for its namespace by the next manager, which reads the
// reservation from the API server: another namespace's older claim does
// not take it, and the connection made again gets it back.
func TestSlugHeldAcrossManagerRestart(t *testing.T) {
	ctx := context.Background()
	victim := newFixture(t)
	squatter := newFixture(t)
	claim := squatter.conn.DeepCopy()
	claim.ObjectMeta = metav1.ObjectMeta{Namespace: squatter.ns, Name: "claim"}
	claim.Spec.Slug = victim.slug
	must(t, k8s.Create(ctx, claim))
	conflict := func() bool {
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim))
		ready := meta.FindStatusCondition(claim.Status.Conditions, v1alpha1.ConditionReady)
		return ready != nil && ready.Reason == v1alpha1.ReasonSlugConflict && ready.ObservedGeneration == claim.Generation
	}
	eventually(t, "the claim waits", conflict)
	restartManager(t, func() {
		must(t, k8s.Delete(ctx, victim.conn))
		eventually(t, "the connection is gone", func() bool {
			return k8s.Get(ctx, client.ObjectKeyFromObject(victim.conn), &v1alpha1.SftpConnection{}) != nil
		})
	})
	again := victim.conn.DeepCopy()
	again.ObjectMeta = metav1.ObjectMeta{Namespace: victim.ns, Name: "box"}
	must(t, k8s.Create(ctx, again))
	eventually(t, "the victim serves its slug again", func() bool {
		status, _ := victim.call(t, "exists", `{"path": "/"}`)
		return status == http.StatusOK
	})
	if !conflict() {
		t.Errorf("the other namespace's claim took the slug: %+v", claim.Status)
	}
}
