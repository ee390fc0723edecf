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
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/fixtures/testhttp"
	"github.com/sftpgate/sftpgate/hack/kustomize"
	"github.com/sftpgate/sftpgate/hack/repo"
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
	// ServiceAccounts runs each component as its service account of
	// config/default, with the roles, bindings and admission policies
	// config/default gives it, as a deployment runs it: what a test does
	// through a component, the component may do in production. Without
	// it every process runs as the administrator.
	ServiceAccounts bool
	// Release runs an earlier commit, its binary and CRDs, instead of the
	// current tree, until Upgrade.
	Release *Release
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
	binary  string
	opts    Options

	// kubeconfigs are the components' own, by component, with
	// Options.ServiceAccounts.
	kubeconfigs map[string]string

	mu         sync.Mutex
	added      []*Process // by Add
	sessionKey string     // the web UIs' --session-key-file, once made
}

// Start builds the binary (once per test binary, see Binary), starts the
// control plane and every component, and waits until each is ready.
func Start(ctx context.Context, opts Options) (_ *System, err error) {
	binary, err := Binary()
	if err != nil {
		return nil, err
	}
	if opts.Release != nil {
		binary = opts.Release.Binary
	}
	s := &System{Dir: opts.Dir, binary: binary, opts: opts}
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
	if opts.Release != nil {
		s.env.CRDDirectoryPaths = []string{opts.Release.CRDs}
	}
	if _, err := s.env.Start(); err != nil {
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	if s.APIServer, err = findAPIServer(s.env, filepath.Join(s.Dir, "kube-apiserver.log")); err != nil {
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
	if opts.ServiceAccounts {
		if err := s.installServiceAccounts(ctx); err != nil {
			return nil, err
		}
	}

	gateways, workers := or(opts.Gateways, 2), or(opts.Workers, 2)
	newProcess := func(name, component string, args ...string) (*Process, error) {
		p, err := s.newProcess(name, component, args)
		if err != nil {
			return nil, err
		}
		return p, p.Start(ctx)
	}
	// The previous release's manager elects a leader only in a cluster
	// (it finds its namespace in the service account's files): one
	// replica runs without.
	var elect []string
	if opts.Release == nil {
		elect = []string{"--leader-elect"}
	}
	if s.Manager, err = newProcess("manager", "manager", elect...); err != nil {
		return nil, err
	}
	for i := range gateways {
		p, err := newProcess("gateway-"+strconv.Itoa(i), "gateway", gatewayFlags...)
		if err != nil {
			return nil, err
		}
		s.Gateways = append(s.Gateways, p)
	}
	for i := range workers {
		name := "worker-" + strconv.Itoa(i)
		p, err := newProcess(name, "worker", "--identity="+name)
		if err != nil {
			return nil, err
		}
		s.Workers = append(s.Workers, p)
	}
	if opts.WebUI {
		args, err := s.webUIFlags()
		if err != nil {
			return nil, err
		}
		if s.WebUI, err = newProcess("webui", "webui", args...); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// webUIFlags are a web UI's flags beside the common ones: the first
// gateway's URL, and the session key every web UI of the system shares
// (made by the first call). Called by Start, or under s.mu.
func (s *System) webUIFlags() ([]string, error) {
	if s.sessionKey == "" {
		key := filepath.Join(s.Dir, "session.key")
		if err := os.WriteFile(key, []byte(randomHex(32)), 0o600); err != nil {
			return nil, err
		}
		s.sessionKey = key
	}
	return []string{"--gateway-url=" + s.Gateways[0].URL, "--session-key-file=" + s.sessionKey, "--bcrypt-cost=4"}, nil
}

// gatewayFlags are a gateway's flags beside the common ones.
var gatewayFlags = []string{"--shutdown-grace=10s"}

// newProcess makes the process of a replica of component named name, with
// the flags every process of the system has, then args, then the
// Options' Flags for the component; it does not start it.
func (s *System) newProcess(name, component string, args []string) (*Process, error) {
	ready := "/readyz"
	if component == "webui" {
		ready = "/healthz"
	}
	// The namespace as a Deployment gives it: a release may read it
	// rather than its flag (the previous one's leader election did).
	p := &Process{Name: name, binary: s.binary, ready: ready, logPath: filepath.Join(s.Dir, name+".log"),
		env: []string{"POD_NAMESPACE=" + Namespace}}
	addr, err := testhttp.FreeAddress()
	if err != nil {
		return nil, err
	}
	p.URL = "http://" + addr
	metrics, err := testhttp.FreeAddress()
	if err != nil {
		return nil, err
	}
	kubeconfig := s.Kubeconfig
	if own := s.kubeconfigs[component]; own != "" {
		kubeconfig = own
	}
	flags := []string{"--kubeconfig=" + kubeconfig, "--log-level=warn", "--namespace=" + Namespace}
	switch component {
	case "manager", "worker", "gateway":
		// The servers tests start listen on loopback.
		flags = append(flags, "--denied-networks="+testcluster.LoopbackNetworks)
	}
	switch component {
	case "manager":
		flags = append(flags, "--health-probe-bind-address="+addr, "--metrics-bind-address="+metrics)
		p.MetricsURL = "http://" + metrics + "/metrics"
	case "worker":
		flags = append(flags, "--health-probe-bind-address="+addr, "--metrics-address="+metrics)
		p.MetricsURL = "http://" + metrics + "/metrics"
	case "gateway":
		flags = append(flags, "--listen-address="+addr, "--metrics-address="+metrics)
		p.MetricsURL = "http://" + metrics + "/metrics"
	case "webui":
		flags = append(flags, "--listen-address="+addr)
	default:
		return nil, fmt.Errorf("no component %q", component)
	}
	p.args = append(append(append([]string{component}, flags...), args...), s.opts.Flags[component]...)
	return p, nil
}

// Add starts one more replica of component ("gateway", "worker" or
// "webui") in the running system, with the flags Start gives its replicas
// and flags besides (before the Options' Flags, which win where both set
// one), and waits until it is ready: a replica of a test's own, to kill
// or to run with other flags (a web UI that signs people in with an
// OpenID provider) while the others serve the rest. It is named after
// the component and its number among them (gateway-2, webui-1; a
// worker's identity too). It is not in Gateways, Workers or WebUI, which
// Start fills, but is in Processes, and Stop ends it. Safe for concurrent
// use.
func (s *System) Add(ctx context.Context, component string, flags ...string) (*Process, error) {
	s.mu.Lock()
	n := 0
	for _, p := range s.added {
		if strings.HasPrefix(p.Name, component+"-") {
			n++
		}
	}
	var args []string
	switch component {
	case "gateway":
		n += len(s.Gateways)
		args = gatewayFlags
	case "worker":
		n += len(s.Workers)
		args = []string{"--identity=" + component + "-" + strconv.Itoa(n)}
	case "webui":
		if s.WebUI != nil {
			n++
		}
		var err error
		if args, err = s.webUIFlags(); err != nil {
			s.mu.Unlock()
			return nil, err
		}
	default:
		s.mu.Unlock()
		return nil, fmt.Errorf("Add: a replica of %q; want a gateway, a worker or a web UI", component)
	}
	p, err := s.newProcess(component+"-"+strconv.Itoa(n), component, append(append([]string{}, args...), flags...))
	if err == nil {
		s.added = append(s.added, p)
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return p, p.Start(ctx)
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

// installServiceAccounts creates what config/default gives each
// component to run as (its service account, roles and bindings, and the
// admission policies that keep it to its own), and a kubeconfig of each
// service account, for Options.ServiceAccounts.
func (s *System) installServiceAccounts(ctx context.Context) error {
	objects, err := kustomize.Render("config/default")
	if err != nil {
		return err
	}
	for _, obj := range objects {
		switch obj.GetKind() {
		case "ServiceAccount", "Role", "RoleBinding", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
		default:
			continue // the ClusterRoles are there; CRDs come with the control plane; workloads cannot run here
		}
		if err := s.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	s.kubeconfigs = map[string]string{}
	for _, component := range []string{"manager", "gateway", "worker", "webui"} {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "sftpgate-" + component}}
		token := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 60 * 60)}}
		if err := s.Client.SubResource("token").Create(ctx, sa, token); err != nil {
			return fmt.Errorf("a token of %s: %w", sa.Name, err)
		}
		path := filepath.Join(s.Dir, "kubeconfig-"+component)
		if err := clientcmd.WriteToFile(clientcmdapi.Config{
			Clusters:       map[string]*clientcmdapi.Cluster{"system": {Server: s.Config.Host, CertificateAuthorityData: s.Config.CAData}},
			AuthInfos:      map[string]*clientcmdapi.AuthInfo{sa.Name: {Token: token.Status.Token}},
			Contexts:       map[string]*clientcmdapi.Context{"system": {Cluster: "system", AuthInfo: sa.Name}},
			CurrentContext: "system",
		}, path); err != nil {
			return err
		}
		s.kubeconfigs[component] = path
	}
	return nil
}

// Upgrade upgrades a system started from a Release to the current tree,
// as a cluster is upgraded: every process stops at once (SIGTERM, its
// graceful end), the current CRDs replace the release's, and every process starts
// again from the current binary, with the same flags and addresses.
func (s *System) Upgrade(ctx context.Context) error {
	binary, err := Binary()
	if err != nil {
		return err
	}
	processes := s.Processes()
	stopped := make([]error, len(processes))
	var wg sync.WaitGroup
	for i, p := range processes {
		wg.Go(func() {
			if err := p.Stop(); !errors.Is(err, errNotRunning) {
				stopped[i] = err
			}
		})
	}
	wg.Wait()
	if err := errors.Join(stopped...); err != nil {
		return err
	}
	root, err := repo.Root()
	if err != nil {
		return err
	}
	if _, err := envtest.InstallCRDs(s.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(root, "config", "crd", "bases")}, ErrorIfPathMissing: true,
	}); err != nil {
		return fmt.Errorf("installing the current CRDs: %w", err)
	}
	s.binary = binary
	for _, p := range processes {
		p.mu.Lock()
		p.binary = binary
		p.mu.Unlock()
		if err := p.Start(ctx); err != nil {
			return err
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
	s.mu.Lock()
	all = append(all, s.added...)
	s.mu.Unlock()
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

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var errNoAPIServer = errors.New("no kube-apiserver process below the test")
