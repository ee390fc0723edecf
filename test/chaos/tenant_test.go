package chaos

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/filemodel"
	"github.com/sftpgate/sftpgate/hack/fixtures/testgpg"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsink"
	"github.com/sftpgate/sftpgate/internal/apitoken"
)

// tenant is one namespace and what it does: gateway clients on both
// servers, files dropped into watched folders (some encrypted, decrypted
// by the transfers the watch triggers), scheduled transfers from SFTP to
// the bucket and back, share links used through the web UI, and its
// audit records at its own sink.
type tenant struct {
	r      *rig
	i      int
	ns     string
	root   string // its folder on each server, below the server's Dir
	token  string
	events *testsink.Sink // the watches' and transfers' events
	audits *testsink.Sink // its AuditSink

	clients []*gatewayClient
	drops   *dropper
	shares  *sharer
}

// gatewayClient is one model of files and the client that changes them.
type gatewayClient struct {
	model  *filemodel.Model
	client *filemodel.Client
	dir    string // the model's folder on the server, on disk
	stats  filemodel.Stats
	mu     sync.Mutex
	sent   []filemodel.Outcome
	wrong  []string
}

// Folders of each tenant on the near server.
const (
	inbox    = "in"       // watched: plain files, events only
	pgpInbox = "pgp-in"   // watched: encrypted files, each decrypted into clear
	clear    = "clear"    // where decrypted files go
	pgpDone  = "pgp-done" // originals decrypted
	pgpFail  = "pgp-fail" // originals that failed
	outbox   = "out"      // copied to the bucket on a schedule
	back     = "back"     // the bucket copied back on a schedule
)

func (r *rig) newTenant(i int) *tenant {
	t := r.t
	ctx := context.Background()
	k8s := r.sys.Client
	tn := &tenant{r: r, i: i, ns: testkit.Namespace(t, k8s, fmt.Sprintf("chaos-%d-", i)), root: fmt.Sprintf("t%d", i),
		events: testsink.Start(t), audits: testsink.Start(t)}
	for _, s := range []struct {
		dir      string
		uid, gid int
	}{{r.near.Dir, r.near.UID, r.near.GID}, {r.far.Dir, r.far.UID, r.far.GID}} {
		for _, d := range []string{"", inbox, pgpInbox, clear, pgpDone, pgpFail, outbox, back} {
			p := filepath.Join(s.dir, tn.root, d)
			testkit.Must(t, os.MkdirAll(p, 0o755))
			testkit.Must(t, os.Chown(p, s.uid, s.gid))
		}
	}
	near := r.near.Login()
	near.Root = filepath.Join(near.Root, tn.root)
	testkit.ReadyConnection(t, k8s, tn.ns, "near", near)
	far := r.far.Login()
	far.Root = filepath.Join(far.Root, tn.root)
	host, port := splitHostPort(r.link.Addr)
	far.Host, far.Port = host, port
	testkit.ReadyConnection(t, k8s, tn.ns, "far", far)
	bucket := fmt.Sprintf("chaos-%d", i)
	r.s3.Bucket(t, bucket)
	testkit.ReadyStore(t, k8s, tn.ns, "bucket", r.s3, bucket, "")

	var keyID string
	tn.token, keyID = apitoken.NewToken()
	testkit.Must(t, k8s.Create(ctx, &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: "load"},
		Spec: v1alpha1.ApiKeySpec{Token: v1alpha1.TokenSource{SHA256: apitoken.Hash(tn.token), KeyID: keyID}}}))
	testkit.Must(t, k8s.Create(ctx, &v1alpha1.AuditSink{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: v1alpha1.AuditSinkName},
		Spec: v1alpha1.AuditSinkSpec{Sink: v1alpha1.Destination{URI: tn.audits.URL}, MaxBatch: 500}}))
	tn.keys(ctx)
	tn.watches(ctx)
	tn.schedules(ctx)
	// A watch's first poll takes the folder as it is, reporting nothing:
	// the drops begin after it.
	for _, name := range []string{"inbox", "pgp-inbox"} {
		testkit.Eventually(t, "the first poll of "+tn.ns+"/"+name, func() bool {
			var w v1alpha1.SftpWatch
			testkit.Must(t, k8s.Get(ctx, client.ObjectKey{Namespace: tn.ns, Name: name}, &w))
			return w.Status.LastPollTime != nil
		})
	}

	for c := range clientsPerTenant {
		conn, server := "near", r.near
		if c == 0 {
			conn, server = "far", r.far
		}
		var urls []string
		for _, g := range r.sys.Gateways {
			urls = append(urls, g.URL+"/"+conn+"-"+tn.ns+"/")
		}
		gc := &gatewayClient{model: filemodel.New(fmt.Sprintf("g%d", c), filesPerClient, r.seed+uint64(100*i+c)),
			client: &filemodel.Client{URLs: urls, Token: tn.token, ID: fmt.Sprintf("t%dc%d", i, c),
				HTTP: &http.Client{Timeout: 2 * time.Minute}}}
		gc.model.Resumable = true
		gc.dir = filepath.Join(server.Dir, tn.root, gc.model.Dir)
		testkit.Must(t, os.Mkdir(gc.dir, 0o755))
		testkit.Must(t, os.Chown(gc.dir, server.UID, server.GID))
		testkit.Eventually(t, "the gateway serves "+conn+" of "+tn.ns, func() bool {
			status, answer := gc.client.JSON("exists", fmt.Sprintf(`{"path": %q}`, gc.model.Dir))
			return status == http.StatusOK && answer["error"] == nil
		})
		tn.clients = append(tn.clients, gc)
	}
	tn.drops = &dropper{tn: tn}
	tn.shares = tn.newSharer(ctx)
	return tn
}

// keys gives the tenant our private key and the partner's public one.
func (tn *tenant) keys(ctx context.Context) {
	t, k8s := tn.r.t, tn.r.sys.Client
	testkit.Must(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: "our-key"},
		Data: map[string][]byte{"key": tn.r.ours.Private(t), "passphrase": []byte(testgpg.Passphrase)}}))
	testkit.Must(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: "partner-key"},
		Data: map[string][]byte{"key": tn.r.partner.Public(t, false)}}))
}

// watches makes the inbox's watch (events) and the encrypted inbox's
// (a decrypting transfer per file, the original filed after).
func (tn *tenant) watches(ctx context.Context) {
	t, k8s := tn.r.t, tn.r.sys.Client
	every := &metav1.Duration{Duration: 5 * time.Second}
	stable := v1alpha1.Stability{MinAge: &metav1.Duration{Duration: 2 * time.Second}}
	near := v1alpha1.ConnectionReference{Name: "near"}
	sink := &v1alpha1.Destination{URI: tn.events.URL}
	testkit.Must(t, k8s.Create(ctx, &v1alpha1.SftpWatch{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: "inbox"},
		Spec: v1alpha1.SftpWatchSpec{ConnectionRef: near, Path: "/" + inbox, PollInterval: every, Stability: stable, Sink: sink,
			Delivery: v1alpha1.DeliverySpec{BackoffDelay: "PT0.5S"}}}))
	testkit.Must(t, k8s.Create(ctx, &v1alpha1.SftpWatch{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: "pgp-inbox"},
		Spec: v1alpha1.SftpWatchSpec{ConnectionRef: near, Path: "/" + pgpInbox, Include: []string{"*.pgp"}, PollInterval: every,
			Stability: stable, Sink: sink, Delivery: v1alpha1.DeliverySpec{BackoffDelay: "PT0.5S"},
			Transfer: &v1alpha1.TransferOptions{
				Destination: v1alpha1.TransferDestination{ConnectionRef: near, Path: "/" + clear},
				Retry:       v1alpha1.TransferRetry{Limit: ptr(int32(3)), Backoff: &metav1.Duration{Duration: 2 * time.Second}},
				OpenPGP: &v1alpha1.TransferOpenPGP{Decrypt: &v1alpha1.OpenPGPDecrypt{
					KeySecretRef: v1alpha1.OpenPGPKeyRef{Name: "our-key"}, VerifyWith: []v1alpha1.OpenPGPKeyRef{{Name: "partner-key"}}}}},
			AfterDelivery: v1alpha1.AfterDelivery{Action: v1alpha1.AfterDeliveryMove, MoveTo: "/" + pgpDone, FailedTo: "/" + pgpFail}}}))
}

// schedules copies the outbox to the bucket, and the bucket back, every
// minute.
func (tn *tenant) schedules(ctx context.Context) {
	t, k8s := tn.r.t, tn.r.sys.Client
	schedule := func(name string, from, to v1alpha1.ConnectionReference, fromPath, toPath string) {
		testkit.Must(t, k8s.Create(ctx, &v1alpha1.TransferSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: name},
			Spec: v1alpha1.TransferScheduleSpec{Schedule: "@every 1m", ConcurrencyPolicy: v1alpha1.ConcurrencyForbid,
				TransferTemplate: v1alpha1.TransferTemplate{Spec: v1alpha1.TransferSpec{
					Source: v1alpha1.TransferSource{ConnectionRef: from, Path: fromPath, Exclude: []string{"*.part"}},
					TransferOptions: v1alpha1.TransferOptions{Destination: v1alpha1.TransferDestination{ConnectionRef: to, Path: toPath},
						Overwrite: v1alpha1.OverwriteIfDifferent, Verify: v1alpha1.VerifySHA256, Parallelism: 2,
						Retry: v1alpha1.TransferRetry{Limit: ptr(int32(3)), Backoff: &metav1.Duration{Duration: 2 * time.Second}}}}}}}))
	}
	bucket := v1alpha1.ConnectionReference{Kind: "ObjectStore", Name: "bucket"}
	near := v1alpha1.ConnectionReference{Name: "near"}
	schedule("to-bucket", near, bucket, "/"+outbox, "/"+outbox)
	schedule("from-bucket", bucket, near, "/"+outbox, "/"+back)
}

// run starts the tenant's load, until ctx ends.
func (tn *tenant) run(ctx context.Context, wg *sync.WaitGroup) {
	for _, gc := range tn.clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				tn.r.gate.RLock()
				sent := gc.model.Step(gc.client, &gc.stats, func(format string, args ...any) {
					gc.mu.Lock()
					gc.wrong = append(gc.wrong, fmt.Sprintf(format, args...))
					gc.mu.Unlock()
				})
				tn.r.gate.RUnlock()
				gc.mu.Lock()
				gc.sent = append(gc.sent, sent...)
				gc.mu.Unlock()
				pause(ctx, 20*time.Millisecond)
			}
		})
	}
	wg.Go(func() { tn.drops.run(ctx) })
	wg.Go(func() { tn.shares.run(ctx) })
}

// pause waits d, or less if ctx ends.
func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func ptr[T any](v T) *T { return &v }
