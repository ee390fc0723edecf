package testcluster

import (
	"context"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sftpgate/sftpgate/controllers"
)

// LoopbackNetworks is the dial policy for tests: their SFTP servers listen
// on loopback, which the default policy denies.
const LoopbackNetworks = "link-local,metadata"

// StartManager runs sftpgate's controllers against cfg until ctx ends, with
// the loopback policy and no metrics endpoint. The channel it returns is
// closed once the manager has stopped: a test may start another.
func StartManager(ctx context.Context, cfg *rest.Config, maxConcurrentTests int) (<-chan struct{}, error) {
	opts := controllers.ManagerOptions()
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	// A manager started again in the same process names its controllers
	// again.
	opts.Controller.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, err
	}
	setup := controllers.Options{MaxConcurrentTests: maxConcurrentTests, DeniedNetworks: LoopbackNetworks}
	if err := setup.Setup(ctx, mgr); err != nil {
		return nil, err
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = mgr.Start(ctx)
	}()
	return stopped, nil
}
