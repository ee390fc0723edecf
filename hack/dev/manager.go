package dev

import (
	"context"
	"flag"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sftpgate/sftpgate/controllers"
	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
)

// startManager runs sftpgate's controllers in this process against cfg
// until ctx ends, with the loopback policy (the demo servers listen on
// loopback) and no metrics endpoint.
func startManager(ctx context.Context, cfg *rest.Config, maxConcurrentTests int) error {
	// The manager's defaults, as its flags give them, with what make run
	// needs.
	var setup controllers.Options
	setup.BindFlags(flag.NewFlagSet("manager", flag.ContinueOnError))
	setup.MaxConcurrentTests, setup.DeniedNetworks = maxConcurrentTests, testcluster.LoopbackNetworks
	opts := setup.ManagerOptions()
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return err
	}
	if err := testcluster.EnsureNamespace(ctx, cfg, setup.Namespace); err != nil {
		return err
	}
	if err := setup.Setup(ctx, mgr); err != nil {
		return err
	}
	go func() { _ = mgr.Start(ctx) }()
	return nil
}
