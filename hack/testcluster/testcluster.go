// Package testcluster starts a real kube-apiserver and etcd (controller-
// runtime's envtest) with sftpgate's CRDs installed. The binaries come from
// KUBEBUILDER_ASSETS, or else from the latest build of hack/control-plane.sh
// under the user's cache directory, sftpgate/k8s/ (make envtest builds
// them there).
package testcluster

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/sftpgate/sftpgate/api"
	"github.com/sftpgate/sftpgate/hack/repo"
	"github.com/sftpgate/sftpgate/internal/logging"
)

// Start starts a control plane and returns it with a client of it that
// knows sftpgate's types. Stop it with the returned environment's Stop.
func Start() (*envtest.Environment, client.Client, error) {
	env, err := Environment("")
	if err != nil {
		return nil, nil, err
	}
	if _, err := env.Start(); err != nil {
		return nil, nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", env.BinaryAssetsDirectory, err)
	}
	k8s, err := client.New(env.Config, client.Options{Scheme: api.Scheme()})
	if err != nil {
		_ = env.Stop()
		return nil, nil, err
	}
	return env, k8s, nil
}

// Environment is a control plane ready to Start, keeping etcd's data in
// etcdDir (a temporary directory when empty).
func Environment(etcdDir string) (*envtest.Environment, error) {
	root, err := repo.Root()
	if err != nil {
		return nil, err
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return nil, err
		}
		builds, _ := filepath.Glob(filepath.Join(cache, "sftpgate", "k8s", "*", "kube-apiserver"))
		if len(builds) == 0 {
			return nil, errors.New("no kube-apiserver: run 'make envtest' (or 'make test', which does) to build the control plane")
		}
		assets = filepath.Dir(slices.MaxFunc(builds, func(a, b string) int { return modTime(a).Compare(modTime(b)) }))
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                api.Scheme(),
	}
	if etcdDir != "" {
		env.ControlPlane.Etcd = &envtest.Etcd{DataDir: etcdDir}
	}
	return env, nil
}

func modTime(path string) time.Time {
	fi, err := os.Stat(path)
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

// LogErrors sends controller-runtime's log, at error level, to standard
// error: for packages whose tests run its managers and keep no log of
// their own. Unset, it prints a warning with a stack after 30 seconds.
func LogErrors() {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
}

// Log is the log of a component a test builds (its Options.Log), as its
// Run makes it: on standard error, which a test shows when it fails.
func Log(component string) *slog.Logger {
	log, _ := logging.New(component, logging.Options{}) // unbuffered: nothing to flush
	return log
}
