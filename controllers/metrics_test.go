package controllers_test

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
)

// TestReadinessMetric: the manager's metrics say which connection is
// Ready and which is not, as their statuses do.
func TestReadinessMetric(t *testing.T) {
	t.Parallel()
	server := testsshd.Start(t)
	ns := newNamespace(t)
	create(t, passwordSecret(ns, "creds", server.Password))
	good, bad := sshdConnection(ns, "good", server, "creds"), connection(ns, "bad", "127.0.0.1", 1, "u", "creds")
	create(t, good)
	create(t, bad)
	waitForReady(t, good, metav1.ConditionTrue, v1alpha1.ReasonConnected)
	waitForReady(t, bad, metav1.ConditionFalse, v1alpha1.ReasonConnectionRefused)
	testkit.EventuallyFound(t, "the metric says good is Ready and bad is not", func() (bool, string) {
		families, err := metrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		ready := map[string]float64{}
		for _, f := range families {
			if f.GetName() != "sftpgate_connection_ready" {
				continue
			}
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["namespace"] == ns && labels["kind"] == v1alpha1.KindSftpConnection {
					ready[labels["name"]] = m.GetGauge().GetValue()
				}
			}
		}
		return len(ready) == 2 && ready["good"] == 1 && ready["bad"] == 0, fmt.Sprint(ready)
	})
}
