package framework_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/test/framework"
)

// TestSystem: every process starts ready, and each comes back after a
// kill, a stop and the API server's restart, with its kubeconfig still
// good; replicas added later (a gateway, a web UI) start ready too.
func TestSystem(t *testing.T) {
	s := framework.New(t, framework.Options{WebUI: true})
	ctx := context.Background()
	for _, p := range s.Processes() {
		if _, err := p.RSS(); err != nil {
			t.Error(err)
		}
	}
	if _, err := s.Gateways[0].Metric(ctx, "go_goroutines"); err != nil {
		t.Error(err)
	}
	testkit.Must(t, s.Gateways[0].Kill())
	testkit.Must(t, s.Gateways[0].Start(ctx))
	testkit.Must(t, s.Workers[1].Stop())
	testkit.Must(t, s.Workers[1].Start(ctx))
	testkit.Must(t, s.APIServer.Restart(ctx))
	testkit.Must(t, s.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "after-restart"}}))
	testkit.Must(t, s.Manager.Kill())
	testkit.Must(t, s.Manager.Start(ctx))
	added, err := s.Add(ctx, "gateway", "--upload-expiry=1h")
	testkit.Must(t, err)
	if added.Name != "gateway-2" || !slices.Contains(s.Processes(), added) {
		t.Errorf("the added gateway is %s, in Processes: %v", added.Name, slices.Contains(s.Processes(), added))
	}
	ui, err := s.Add(ctx, "webui", "--signup=false")
	testkit.Must(t, err)
	if ui.Name != "webui-1" || ui.URL == s.WebUI.URL {
		t.Errorf("the added web UI is %s at %s", ui.Name, ui.URL)
	}
	writes, err := s.APIServer.Writes(ctx)
	testkit.Must(t, err)
	size, err := s.APIServer.EtcdBytes(ctx)
	testkit.Must(t, err)
	t.Logf("writes since the restart %v, etcd %v bytes", writes, size)
}
