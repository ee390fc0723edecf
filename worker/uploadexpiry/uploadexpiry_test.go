package uploadexpiry_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/internal/pool"
	"github.com/sftpgate/sftpgate/internal/sftpdial"
	"github.com/sftpgate/sftpgate/internal/tempname"
	"github.com/sftpgate/sftpgate/internal/uploadrecord"
	"github.com/sftpgate/sftpgate/worker/uploadexpiry"
)

// The test kit's, as every test package has them.
var (
	must       = testkit.Must
	eventually = testkit.Eventually
)

var k8s client.Client

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, 2, func(c client.Client) { k8s = c }))
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

	policy, err := sftpdial.ParsePolicy(testcluster.LoopbackNetworks)
	must(t, err)
	sweeper = &uploadexpiry.Sweeper{
		Records: records, Connections: k8s,
		Pools:   &pool.Pools{Dialer: &sftpdial.Dialer{Policy: policy}, Secrets: k8s, IdleTimeout: time.Minute},
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
