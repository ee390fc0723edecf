// Package framework builds the system under test once for every test that
// runs across components: a real control plane and each component as its
// own process of the built binary (the manager, gateway replicas, worker
// replicas, the web UI), as a deployment runs them. It hands a test their
// URLs, a client and a kubeconfig, and a way to kill, stop and start any
// process, the API server included.
//
// The servers users bring (sshd, the S3 server, sinks, the OpenID
// provider) are the fixtures of hack/fixtures, which a test starts for
// itself.
package framework

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/kustomize"
)

// Options says what system to build. Replicas default to two of the
// gateway and of the worker; the web UI runs when asked.
type Options struct {
	Gateways, Workers int
	WebUI             bool
	// Flags are added to a component's own (its defaults for tests), by
	// component: "manager", "gateway", "worker", "webui".
	Flags map[string][]string
	// Dir keeps the system's files (kubeconfig, logs, etcd's data); a
	// temporary directory when empty.
	Dir string
}

// Namespace is the system's own namespace: the manager's reservations,
// the worker's Leases and states, the gateway's and the web UI's records.
const Namespace = "sftpgate-system"

// System is the running system under test.
type System struct {
	// Client is an administrator's client of the control plane.
	Client client.Client
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig of the administrator.
	Kubeconfig string
	Dir        string

	Manager  *Process
	Gateways []*Process
	Workers  []*Process
	WebUI    *Process // nil unless asked for
	// APIServer is the control plane's kube-apiserver.
	APIServer *APIServer

	env     *envtest.Environment
	tempDir bool
}

// Start builds the binary (once per test binary, see Binary), starts the
// control plane and every component, and waits until each is ready.
func Start(ctx context.Context, opts Options) (_ *System, err error) {
	binary, err := Binary()
	if err != nil {
		return nil, err
	}
	s := &System{Dir: opts.Dir}
	if s.Dir == "" {
		if s.Dir, err = os.MkdirTemp("", "sftpgate-system-"); err != nil {
			return nil, err
		}
		s.tempDir = true
	}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	if s.env, err = testcluster.Environment(filepath.Join(s.Dir, "etcd")); err != nil {
		return nil, err
	}
	if _, err := s.env.Start(); err != nil {
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	if s.APIServer, err = findAPIServer(s.env); err != nil {
		return nil, err
	}
	s.Config = s.env.Config
	if s.Client, err = client.New(s.Config, client.Options{Scheme: s.env.Scheme}); err != nil {
		return nil, err
	}
	s.Kubeconfig = filepath.Join(s.Dir, "kubeconfig")
	if err := os.WriteFile(s.Kubeconfig, s.env.KubeConfig, 0o600); err != nil {
		return nil, err
	}
	for _, ns := range []string{Namespace, "sftpgate-accounts"} {
		if err := testcluster.EnsureNamespace(ctx, s.Config, ns); err != nil {
			return nil, err
		}
	}
	if err := s.installClusterRoles(ctx); err != nil {
		return nil, err
	}

	gateways, workers := or(opts.Gateways, 2), or(opts.Workers, 2)
	common := []string{"--kubeconfig=" + s.Kubeconfig, "--log-level=warn"}
	newProcess := func(name, component, ready string, args ...string) (*Process, error) {
		p := &Process{Name: name, binary: binary, ready: ready, logPath: filepath.Join(s.Dir, name+".log")}
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		p.URL = "http://" + addr
		metrics, err := freeAddr()
		if err != nil {
			return nil, err
		}
		switch component {
		case "manager", "worker", "gateway":
			// The servers tests start listen on loopback.
			args = append(args, "--denied-networks="+testcluster.LoopbackNetworks)
		}
		switch component {
		case "manager":
			args = append(args, "--health-probe-bind-address="+addr, "--metrics-bind-address="+metrics)
			p.MetricsURL = "http://" + metrics + "/metrics"
		case "worker":
			args = append(args, "--health-probe-bind-address="+addr, "--metrics-address="+metrics)
			p.MetricsURL = "http://" + metrics + "/metrics"
		case "gateway":
			args = append(args, "--listen-address="+addr, "--metrics-address="+metrics)
			p.MetricsURL = "http://" + metrics + "/metrics"
		case "webui":
			args = append(args, "--listen-address="+addr)
		}
		p.args = append(append(append([]string{component}, common...), args...), opts.Flags[component]...)
		return p, p.Start(ctx)
	}
	if s.Manager, err = newProcess("manager", "manager", "/readyz", "--namespace="+Namespace, "--leader-elect"); err != nil {
		return nil, err
	}
	for i := range gateways {
		p, err := newProcess("gateway-"+strconv.Itoa(i), "gateway", "/readyz", "--namespace="+Namespace, "--shutdown-grace=10s")
		if err != nil {
			return nil, err
		}
		s.Gateways = append(s.Gateways, p)
	}
	for i := range workers {
		name := "worker-" + strconv.Itoa(i)
		p, err := newProcess(name, "worker", "/readyz", "--namespace="+Namespace, "--identity="+name)
		if err != nil {
			return nil, err
		}
		s.Workers = append(s.Workers, p)
	}
	if opts.WebUI {
		key := filepath.Join(s.Dir, "session.key")
		if err := os.WriteFile(key, []byte(randomHex(32)), 0o600); err != nil {
			return nil, err
		}
		if s.WebUI, err = newProcess("webui", "webui", "/healthz", "--namespace="+Namespace,
			"--gateway-url="+s.Gateways[0].URL, "--session-key-file="+key, "--bcrypt-cost=4"); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// installClusterRoles creates the ClusterRoles config/default installs
// that the components grant to others (the teams' roles and the web UI's
// tenant role): a process of the system runs as the administrator, but
// the bindings it makes name them.
func (s *System) installClusterRoles(ctx context.Context) error {
	objects, err := kustomize.Render("config/default")
	if err != nil {
		return err
	}
	for _, obj := range objects {
		if obj.GetKind() != "ClusterRole" || !strings.HasPrefix(obj.GetName(), "sftpgate-") {
			continue
		}
		if err := s.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("the ClusterRole %s: %w", obj.GetName(), err)
		}
	}
	return nil
}

// Processes is every component process of the system.
func (s *System) Processes() []*Process {
	all := append([]*Process{s.Manager}, s.Gateways...)
	all = append(all, s.Workers...)
	if s.WebUI != nil {
		all = append(all, s.WebUI)
	}
	var out []*Process
	for _, p := range all {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

// Stop ends every process and the control plane, and removes the
// system's directory if Start made it.
func (s *System) Stop() {
	for _, p := range s.Processes() {
		_ = p.Kill()
	}
	if s.APIServer != nil {
		s.APIServer.stopRestarted()
	}
	if s.env != nil {
		_ = s.env.Stop()
	}
	if s.tempDir {
		_ = os.RemoveAll(s.Dir)
	}
}

func or(n, otherwise int) int {
	if n == 0 {
		return otherwise
	}
	return n
}

// freeAddr is a loopback address free at the time of the call.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var errNoAPIServer = errors.New("no kube-apiserver process below the test")
