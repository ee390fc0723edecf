package testcluster

import (
	"context"
	"flag"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sftpgate/sftpgate/controllers"
)

// LoopbackNetworks is the dial policy for tests: their SFTP servers listen
// on loopback, which the default policy denies.
const LoopbackNetworks = "link-local,metadata"

// EnsureNamespace creates the namespace name unless it exists.
func EnsureNamespace(ctx context.Context, cfg *rest.Config, name string) error {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	err = c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// StartManager runs sftpgate's controllers against cfg until ctx ends, with
// the loopback policy and no metrics endpoint. The channel it returns is
// closed once the manager has stopped: a test may start another.
func StartManager(ctx context.Context, cfg *rest.Config, maxConcurrentTests int) (<-chan struct{}, error) {
	// The manager's defaults, as its flags give them, with what tests need.
	var setup controllers.Options
	setup.BindFlags(flag.NewFlagSet("manager", flag.ContinueOnError))
	setup.MaxConcurrentTests, setup.DeniedNetworks = maxConcurrentTests, LoopbackNetworks
	opts := setup.ManagerOptions()
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	// A manager started again in the same process names its controllers
	// again.
	opts.Controller.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, err
	}
	if err := EnsureNamespace(ctx, cfg, setup.Namespace); err != nil {
		return nil, err
	}
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
