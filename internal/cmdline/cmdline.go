// Package cmdline starts every component the same way: its own flags
// beside the cluster's (--kubeconfig) and the log's, then its logger
// (controller-runtime's too) and the cluster's config.
package cmdline

import (
	"flag"
	"log/slog"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/sftpgate/sftpgate/internal/logging"
)

// Started is what a component starts with.
type Started struct {
	Log *slog.Logger
	// Flush writes what the logger holds: run it last.
	Flush  func()
	Config *rest.Config
}

// Parse adds the kubeconfig and log flags to fs, which holds the
// component's own, parses args, and starts component. tune, when set,
// adjusts the log's options from the component's own flags once parsed.
func Parse(component string, fs *flag.FlagSet, args []string, tune func(*logging.Options)) (Started, error) {
	config.RegisterFlags(fs)
	logOpts := logging.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return Started{}, err
	}
	if tune != nil {
		tune(logOpts)
	}
	log, flush := logging.New(component, *logOpts)
	logging.ControllerRuntime(log)
	cfg, err := config.GetConfig()
	if err != nil {
		flush()
		return Started{}, err
	}
	return Started{Log: log, Flush: flush, Config: cfg}, nil
}
