package uploadexpiry_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/egress"
	"github.com/sftpgate/sftpgate/internal/pool"
	"github.com/sftpgate/sftpgate/internal/sftpdial"
	"github.com/sftpgate/sftpgate/internal/tempname"
	"github.com/sftpgate/sftpgate/internal/uploadrecord"
	"github.com/sftpgate/sftpgate/test/framework"
	"github.com/sftpgate/sftpgate/worker/ends"
	"github.com/sftpgate/sftpgate/worker/uploadexpiry"
)

// The test kit's, as every test package has them.
var (
	must       = testkit.Must
	eventually = testkit.Eventually
)

var k8s client.Client

func TestMain(m *testing.M) {
	os.Exit(framework.MainWithManager(m, 2, func(_ *envtest.Environment, c client.Client) { k8s = c }))
}

// TestSweepIsNotHeldByAnotherTenant: a tenant whose server logs in and
// then never answers, with many expired uploads, holds up neither the
// sweep nor another tenant's expired upload, which goes while the
// attacker's removals still hang.
func TestSweepIsNotHeldByAnotherTenant(t *testing.T) {
	ctx := context.Background()
	// Stopped last, once the stalling server let its requests go.
	sweepCtx, cancel := context.WithCancel(ctx)
	var sweeper *uploadexpiry.Sweeper
	t.Cleanup(func() {
		cancel()
		if sweeper != nil {
			sweeper.Wait()
		}
	})
	sshd, stalling := testsshd.Start(t), testsftp.Stalling(t)
	victim := testkit.ReadyConnection(t, k8s, testkit.Namespace(t, k8s, "victim-"), "box", sshd.Login())
	attacker := testkit.ReadyConnection(t, k8s, testkit.Namespace(t, k8s, "attacker-"), "stalling", stalling.Login())
	const recordsNS = "sftpgate-expiry-test"
	must(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: recordsNS}}))
	records := &uploadrecord.Store{Client: k8s, Namespace: recordsNS}
	past := time.Now().Add(-time.Hour)
	for i := range 20 {
		must(t, records.Create(ctx, &uploadrecord.Record{ID: uploadrecord.NewID(), Namespace: attacker.Namespace,
			Connection: attacker.Name, ConnectionUID: attacker.UID, Target: "/f" + strconv.Itoa(i),
			Partial: tempname.For("/", "upload/"+strconv.Itoa(i)), Size: 1, Created: past, Expires: past}))
	}
	partial := tempname.For(sshd.Dir, "upload/victim")
	must(t, os.WriteFile(partial, []byte("left"), 0o600))
	must(t, records.Create(ctx, &uploadrecord.Record{ID: uploadrecord.NewID(), Namespace: victim.Namespace, Connection: victim.Name,
		ConnectionUID: victim.UID, Target: filepath.Join(sshd.Dir, "v"), Partial: partial, Size: 8, Created: past, Expires: past}))

	policy, err := egress.ParsePolicy(testcluster.LoopbackNetworks)
	must(t, err)
	sweeper = &uploadexpiry.Sweeper{
		Records: records, Connections: k8s,
		Ends: &ends.Ends{Pools: &pool.Pools{Secrets: k8s, IdleTimeout: time.Minute},
			Dialers: map[string]pool.Dialer{v1alpha1.KindSftpConnection: &sftpdial.Dialer{Policy: policy}}},
		Removed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "removed"}, []string{"removed"}), RemovedBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "bytes"}),
		Limits: uploadexpiry.Limits{Timeout: time.Minute},
	}
	sweeper.Sweep(sweepCtx)
	eventually(t, "the victim's expired upload is removed", func() bool {
		_, err := os.Stat(partial)
		return errors.Is(err, os.ErrNotExist)
	})
	var left corev1.ConfigMapList
	must(t, k8s.List(ctx, &left, client.InNamespace(recordsNS), client.MatchingLabels{uploadrecord.LabelNamespace: attacker.Namespace}))
	if len(left.Items) != 20 {
		t.Errorf("%d of the attacker's 20 records left: its server answers nothing, so none can be removed yet", len(left.Items))
	}
}

// TestUploadsOfASilentServerAreAbandoned: the expired uploads of a server
// that never answers stay while sweeps fail to remove their partial
// files, each failed sweep counted on its record; at Limits.FailedSweeps
// they are abandoned: their records removed, counted, each with an
// upload.abandoned audit record of its namespace and a log line. An
// upload of the same server still under way stays.
func TestUploadsOfASilentServerAreAbandoned(t *testing.T) {
	ctx := context.Background()
	port := testsftp.Silent(t)
	_, key, err := ed25519.GenerateKey(nil)
	must(t, err)
	signer, err := ssh.NewSignerFromKey(key)
	must(t, err)
	ns := testkit.Namespace(t, k8s, "silent-")
	must(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "silent"},
		StringData: map[string]string{v1alpha1.SecretKeyPassword: "never asked"}}))
	conn := &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "silent"}, Spec: v1alpha1.SftpConnectionSpec{
		Host: "127.0.0.1", Port: port, Username: "nobody", Slug: "silent-" + ns,
		Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.LocalSecretReference{Name: "silent"}},
		HostKey:     v1alpha1.HostKeyTrust{Trusted: []string{strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))}}}}
	must(t, k8s.Create(ctx, conn))
	const recordsNS = "sftpgate-expiry-abandon-test"
	must(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: recordsNS}}))
	records := &uploadrecord.Store{Client: k8s, Namespace: recordsNS}
	upload := func(expires time.Time) *uploadrecord.Record {
		id := uploadrecord.NewID()
		r := &uploadrecord.Record{ID: id, Namespace: ns, Connection: conn.Name, ConnectionUID: conn.UID, Owner: "someone",
			Target: "/in/big.iso", Partial: tempname.For("/in", "upload/"+id), Size: 100, Metadata: map[string]string{"path": "/in/big.iso"},
			Created: expires.Add(-24 * time.Hour), Expires: expires}
		must(t, records.Create(ctx, r))
		return r
	}
	now := time.Now()
	expired := []*uploadrecord.Record{upload(now.Add(-time.Hour)), upload(now.Add(-time.Hour))}
	live := upload(now.Add(time.Hour))

	var log testkit.Log
	logger := slog.New(slog.NewJSONHandler(&log, nil))
	policy, err := egress.ParsePolicy(testcluster.LoopbackNetworks)
	must(t, err)
	removed := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "removed"}, []string{"removed"})
	limits := uploadexpiry.Limits{Timeout: time.Second, FailedSweeps: 3}
	sweeper := &uploadexpiry.Sweeper{
		Records: records, Connections: k8s,
		Ends: &ends.Ends{Pools: &pool.Pools{Secrets: k8s, IdleTimeout: time.Minute},
			Dialers: map[string]pool.Dialer{v1alpha1.KindSftpConnection: &sftpdial.Dialer{Policy: policy}}},
		Removed: removed, RemovedBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "bytes"}),
		Now: func() time.Time { return now }, Limits: limits, Log: logger, Audit: audit.NewTrail("worker", logger),
	}
	for sweep := 1; sweep <= limits.FailedSweeps; sweep++ {
		sweeper.Sweep(ctx)
		sweeper.Wait()
		// Past the rest of a connection whose removal failed.
		now = now.Add(10 * uploadexpiry.DefaultInterval)
		if sweep == limits.FailedSweeps {
			break
		}
		for _, r := range expired {
			got, err := records.Get(ctx, r.ID)
			if err != nil || got.FailedSweeps() != sweep {
				t.Fatalf("after %d failed sweeps, an expired upload's record: %v, %v", sweep, got, err)
			}
		}
	}
	for _, r := range expired {
		if _, err := records.Get(ctx, r.ID); !errors.Is(err, uploadrecord.ErrNotFound) {
			t.Errorf("after %d failed sweeps, an expired upload's record is still there: %v", limits.FailedSweeps, err)
		}
	}
	if got, err := records.Get(ctx, live.ID); err != nil || got.FailedSweeps() != 0 {
		t.Errorf("the upload under way: %v, %v", got, err)
	}
	if n := testutil.ToFloat64(removed.WithLabelValues("abandoned")); n != 2 {
		t.Errorf("%v uploads counted abandoned", n)
	}
	var abandoned []string
	for _, r := range audit.FromLog(log.String(), ns) {
		if r.Action != uploadexpiry.ActionAbandoned || r.Actor.Kind != audit.ActorSftpgate || r.Connection != conn.Name ||
			!slices.Equal(r.Paths, []string{"/in/big.iso"}) || r.Result != "failed" {
			t.Errorf("audit record %+v", r)
		}
		abandoned = append(abandoned, r.Object)
	}
	slices.Sort(abandoned)
	want := []string{"upload/" + expired[0].ID, "upload/" + expired[1].ID}
	slices.Sort(want)
	if !slices.Equal(abandoned, want) {
		t.Errorf("audit records of %v, want %v", abandoned, want)
	}
	if n := strings.Count(log.String(), `"msg":"abandoned an expired upload`); n != 2 {
		t.Errorf("%d log lines of an abandoned upload", n)
	}
}
