package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
)

// StartManager runs the manager alone, from the built binary, on a
// control plane a component's tests started: the connections and stores
// those tests make are tested by the manager as a deployment runs it, not
// by code the tests import. flags are added to its own (its defaults for
// tests); its files go in dir. Stop it with Kill.
func StartManager(ctx context.Context, env *envtest.Environment, dir string, flags ...string) (*Process, error) {
	binary, err := Binary()
	if err != nil {
		return nil, err
	}
	s := &System{Dir: dir, binary: binary, Kubeconfig: filepath.Join(dir, "kubeconfig"), opts: Options{Flags: map[string][]string{"manager": flags}}}
	if err := os.WriteFile(s.Kubeconfig, env.KubeConfig, 0o600); err != nil {
		return nil, err
	}
	if err := testcluster.EnsureNamespace(ctx, env.Config, Namespace); err != nil {
		return nil, err
	}
	p, err := s.newProcess("manager", "manager", nil)
	if err != nil {
		return nil, err
	}
	return p, p.Start(ctx)
}

// MainWithManager is the TestMain of a component's package whose tests
// need a control plane and the manager: it starts both (the manager
// testing testsAtOnce connections at once), hands the control plane and
// its client to use, runs the tests, stops everything and returns the
// exit code.
func MainWithManager(m *testing.M, testsAtOnce int, use func(*envtest.Environment, client.Client)) int {
	return testcluster.Main(m, func(env *envtest.Environment, c client.Client) (stop func(), err error) {
		dir, err := os.MkdirTemp("", "sftpgate-manager-")
		if err != nil {
			return nil, err
		}
		p, err := StartManager(context.Background(), env, dir, fmt.Sprintf("--max-concurrent-tests=%d", testsAtOnce))
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		use(env, c)
		return func() { _ = p.Kill(); _ = os.RemoveAll(dir) }, nil
	})
}
