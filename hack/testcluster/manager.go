package testcluster

import (
	"context"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sftpgate/sftpgate/controllers"
)

// LoopbackNetworks is the dial policy for tests: their SFTP servers listen
// on loopback, which the default policy denies.
const LoopbackNetworks = "link-local,metadata"

// StartManager runs sftpgate's controllers against cfg until ctx ends, with
// the loopback policy and no metrics endpoint.
func StartManager(ctx context.Context, cfg *rest.Config, maxConcurrentTests int) error {
	opts := controllers.ManagerOptions()
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return err
	}
	setup := controllers.Options{MaxConcurrentTests: maxConcurrentTests, DeniedNetworks: LoopbackNetworks}
	if err := setup.Setup(ctx, mgr); err != nil {
		return err
	}
	go func() { _ = mgr.Start(ctx) }()
	return nil
}
