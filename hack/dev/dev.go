// Package dev is sftpgate-dev (make run): the whole system on one machine,
// no cluster needed. One process runs a local kube-apiserver and etcd (the
// binaries the tests use), the manager, the gateway, the web UI, a demo
// SFTP server and a demo S3 server, with a demo connection, bucket, API
// key and web UI account.
package dev

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api"
	"github.com/sftpgate/sftpgate/gateway"
	"github.com/sftpgate/sftpgate/hack/fixtures/sftpserver"
	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/fixtures/testoidc"
	"github.com/sftpgate/sftpgate/hack/fixtures/tests3"
	"github.com/sftpgate/sftpgate/hack/kustomize"
	"github.com/sftpgate/sftpgate/internal/logging"
	"github.com/sftpgate/sftpgate/webui"
	"github.com/sftpgate/sftpgate/worker"
)

type options struct {
	dataDir     string
	fresh       bool
	gatewayAddr string
	webuiAddr   string
	sftpAddr    string
	eventsAddr  string
	s3Addr      string
	versitygw   string
}

// Run runs sftpgate-dev until ctx ends (Ctrl-C), then stops everything.
func Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sftpgate-dev", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.dataDir, "data-dir", ".sftpgate-dev", "Where the control plane's data, the demo server's files and dev.env are kept across restarts.")
	fs.BoolVar(&o.fresh, "fresh", false, "Start empty: delete the data directory first.")
	fs.StringVar(&o.gatewayAddr, "gateway-address", "127.0.0.1:8080", "Where the gateway listens.")
	fs.StringVar(&o.webuiAddr, "webui-address", "127.0.0.1:8081", "Where the web UI listens.")
	fs.StringVar(&o.sftpAddr, "sftp-address", "127.0.0.1:2222", "Where the demo SFTP server listens.")
	fs.StringVar(&o.eventsAddr, "events-address", "127.0.0.1:8082", "Where the demo watch's events are received (and printed).")
	fs.StringVar(&o.s3Addr, "s3-address", "127.0.0.1:8083", "Where the demo S3 server (the demo bucket's) listens.")
	fs.StringVar(&o.versitygw, "versitygw", os.Getenv(tests3.Binary), "The versitygw binary the demo S3 server runs (make run builds it; default $"+tests3.Binary+").")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// Warnings and errors only, as text: the components' lines between
	// what sftpgate-dev prints.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// testcluster's manager, and every component's cache, log to
	// controller-runtime's own logger.
	logging.ControllerRuntime(log)
	return o.run(ctx, log)
}

func (o *options) run(ctx context.Context, log *slog.Logger) error {
	if err := os.MkdirAll(o.dataDir, 0o700); err != nil {
		return err
	}
	unlock, err := lock(o.dataDir)
	if err != nil {
		return err
	}
	defer unlock()
	// Only under the lock: another instance's data stays its own.
	if o.fresh {
		if err := clearExceptLock(o.dataDir); err != nil {
			return err
		}
	}
	// Take the ports first: a clash is reported before anything starts.
	listeners := map[string]net.Listener{}
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	if o.versitygw == "" {
		return fmt.Errorf("no versitygw for the demo S3 server: run make run, or give --versitygw")
	}
	for flagName, addr := range map[string]string{"gateway-address": o.gatewayAddr, "webui-address": o.webuiAddr, "sftp-address": o.sftpAddr,
		"events-address": o.eventsAddr, "s3-address": o.s3Addr} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("%s is taken (is another sftpgate-dev running?); choose another with --%s: %w", addr, flagName, err)
		}
		listeners[flagName] = l
	}
	st, err := loadState(o.dataDir)
	if err != nil {
		return err
	}

	step := progress()
	step("starting kube-apiserver and etcd")
	env, err := testcluster.Environment(filepath.Join(o.dataDir, "etcd"))
	if err != nil {
		return err
	}
	stopControlPlane, err := startControlPlane(env, o.dataDir)
	if err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	defer func() {
		step("stopping the control plane")
		_ = stopControlPlane()
	}()
	k8s, err := client.New(env.Config, client.Options{Scheme: api.Scheme()})
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(o.dataDir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		return err
	}

	if err := installTeamRoles(ctx, k8s); err != nil {
		return err
	}
	step("starting the manager, the gateway, the web UI, the worker and the demo SFTP and S3 servers")
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := startManager(ctx, env.Config, 4); err != nil {
		return err
	}
	gatewayURL := "http://" + listeners["gateway-address"].Addr().String()
	webuiURL := "http://" + listeners["webui-address"].Addr().String()
	// The gateway's and the web UI's defaults, as their flags give them,
	// with what a laptop needs instead.
	var gwOpts gateway.Options
	gwOpts.BindFlags(flag.NewFlagSet("gateway", flag.ContinueOnError))
	gwOpts.DeniedNetworks = testcluster.LoopbackNetworks // the demo server is on loopback
	gwOpts.Limits.MaxUploadBytes = 1 << 30               // the demo server's files are on this disk
	gwOpts.Log = log.With("component", "gateway")
	gw, err := gateway.New(env.Config, gwOpts)
	if err != nil {
		return err
	}
	if err := gw.Start(ctx); err != nil {
		return err
	}
	sessionKey := filepath.Join(o.dataDir, "session.key")
	if err := os.WriteFile(sessionKey, []byte(st.SessionKey), 0o600); err != nil {
		return err
	}
	// A demo OpenID provider to sign in with: the demo person, and a
	// viewer of the demo team through a group.
	provider, err := testoidc.Start(testoidc.Options{ClientID: "sftpgate-webui", RedirectURI: webuiURL + "/login/oidc/callback",
		PostLogoutURI: webuiURL + "/logged-out", Users: []testoidc.User{
			{Email: demoEmail, Password: st.DemoPassword},
			{Email: demoViewer, Password: st.DemoPassword, Groups: []string{demoViewers}}}})
	if err != nil {
		return err
	}
	defer func() { _ = provider.Close() }()
	var uiOpts webui.Options
	uiOpts.BindFlags(flag.NewFlagSet("webui", flag.ContinueOnError))
	uiOpts.GatewayURL, uiOpts.SessionKeyFile = gatewayURL, sessionKey
	uiOpts.OIDC.Issuer, uiOpts.OIDC.ClientID, uiOpts.OIDC.Name = provider.Issuer, "sftpgate-webui", "the demo provider"
	uiOpts.OIDC.RedirectURL = webuiURL + "/login/oidc/callback"
	uiOpts.OIDC.Scopes = append(uiOpts.OIDC.Scopes, "groups")
	uiOpts.BcryptCost = 10    // log-ins at once on a laptop
	uiOpts.AuthPerMinute = 30 // a person trying things out
	uiOpts.Log = log.With("component", "webui")
	if err := testcluster.EnsureNamespace(ctx, env.Config, uiOpts.Namespace); err != nil {
		return err
	}
	ui, err := webui.New(k8s, uiOpts)
	if err != nil {
		return err
	}
	ui.Start()
	defer ui.Close(context.Background())
	servers := []*http.Server{
		gw.HTTPServer(),
		ui.HTTPServer(),
	}
	errc := make(chan error, len(servers)+1)
	go func() { errc <- servers[0].Serve(listeners["gateway-address"]) }()
	go func() { errc <- servers[1].Serve(listeners["webui-address"]) }()
	demo, err := startDemoServer(o.dataDir, st, listeners["sftp-address"])
	if err != nil {
		return err
	}
	// versitygw takes an address, not a socket: the port is free again
	// only now.
	_ = listeners["s3-address"].Close()
	s3, stopS3, err := startDemoBucket(ctx, o.dataDir, o.s3Addr, o.versitygw, st)
	if err != nil {
		return err
	}
	defer stopS3()
	ftps, stopFTPS, noFTPS := startDemoFTPS(o.dataDir)
	if ftps != nil {
		defer stopFTPS()
	}
	// The worker's defaults, as its flags give them, with what a laptop
	// needs instead.
	var wOpts worker.Options
	wOpts.BindFlags(flag.NewFlagSet("worker", flag.ContinueOnError))
	wOpts.Namespace, wOpts.Identity, wOpts.DeniedNetworks = worker.DefaultNamespace, "sftpgate-dev", testcluster.LoopbackNetworks
	wOpts.MetricsAddr, wOpts.ProbeAddr = "0", "0"
	wOpts.LeaseSettle = time.Second // one replica: no other to wait for
	wOpts.Log = log.With("component", "worker")
	if err := testcluster.EnsureNamespace(ctx, env.Config, wOpts.Namespace); err != nil {
		return err
	}
	wk, err := worker.New(env.Config, wOpts)
	if err != nil {
		return err
	}
	go func() {
		if err := wk.Start(ctx); err != nil {
			errc <- fmt.Errorf("the worker: %w", err)
		}
	}()
	eventsURL := "http://" + listeners["events-address"].Addr().String()
	if err := startEventPrinter(ctx, listeners["events-address"], os.Stdout); err != nil {
		return err
	}

	step("creating the demo connection, API key, watch and web UI account")
	if err := st.createDemo(ctx, k8s, ui.Accounts(), demo, listeners["sftp-address"].Addr(), eventsURL); err != nil {
		return err
	}
	if err := createBucketStore(ctx, k8s, s3); err != nil {
		return err
	}
	if ftps != nil {
		// The tour goes on without it: it is an extra stop.
		if err := createFTPSConnection(ctx, k8s, ftps); err != nil {
			ftps, noFTPS = nil, err.Error()
		}
	}
	if err := waitReady(ctx, k8s); err != nil {
		if ctx.Err() != nil {
			return nil // Ctrl-C while starting
		}
		return err
	}
	// kubectl apply validates against the API server's OpenAPI document,
	// which lists the CRDs some time after they are made.
	if err := waitOpenAPI(ctx, env.Config); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	envFile := filepath.Join(o.dataDir, "dev.env")
	if err := st.writeTourMessage(o.dataDir); err != nil {
		return err
	}
	values := append(envValues(kubeconfig, gatewayURL, webuiURL, eventsURL, st, s3), [2]string{"OIDC_ISSUER", provider.Issuer},
		[2]string{"DEMO_VIEWER_EMAIL", demoViewer})
	if err := writeEnv(envFile, values); err != nil {
		return err
	}
	printWelcome(os.Stdout, values, envFile)
	printFTPS(os.Stdout, values, ftps != nil, noFTPS)

	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	step("shutting down")
	shutdownCtx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	for _, s := range servers {
		_ = s.Shutdown(shutdownCtx)
	}
	return nil
}

// installTeamRoles makes config/default's team roles, which the web UI
// asks RBAC about (a cluster has them from dist/install.yaml).
func installTeamRoles(ctx context.Context, k8s client.Client) error {
	objects, err := kustomize.Render("config/default")
	if err != nil {
		return err
	}
	for _, obj := range objects {
		if obj.GetKind() == "ClusterRole" && strings.HasPrefix(obj.GetName(), "sftpgate-team-") {
			if err := k8s.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("the team role %s: %w", obj.GetName(), err)
			}
		}
	}
	return nil
}

// progress prints each step with the time since the start.
func progress() func(string) {
	start := time.Now()
	return func(what string) {
		fmt.Fprintf(os.Stderr, "[%5.1fs] %s\n", time.Since(start).Seconds(), what)
	}
}

// lockFile, in the data directory, is held by the sftpgate-dev using it.
const lockFile = "lock"

// clearExceptLock empties the data directory but for the lock, which this
// process holds.
func clearExceptLock(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() != lockFile {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// lock makes sure one sftpgate-dev uses a data directory at a time.
func lock(dir string) (func(), error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600) //nolint:gosec // in the data directory the user chose
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		pid, _ := io.ReadAll(f)
		_ = f.Close()
		return nil, fmt.Errorf("another sftpgate-dev (pid %s) is running on %s; stop it first, or use another --data-dir",
			strings.TrimSpace(string(pid)), dir)
	}
	_ = f.Truncate(0)
	_, _ = fmt.Fprintf(f, "%d\n", os.Getpid())
	return func() { _ = f.Close() }, nil
}

func startDemoServer(dataDir string, st *state, l net.Listener) (*sftpserver.Server, error) {
	dir := filepath.Join(dataDir, "sftp")
	// incoming/ is the demo watch's folder; archive/ the archive
	// connection's root, where the tour's transfer copies to;
	// partner/inbox/ the OpenPGP inbox's watched folder.
	for _, folder := range []string{"incoming", "archive", "partner/inbox"} {
		if err := os.MkdirAll(filepath.Join(dir, folder), 0o700); err != nil {
			return nil, err
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	signer, err := st.hostKey()
	if err != nil {
		return nil, err
	}
	s := &sftpserver.Server{User: demoUser, Password: st.SFTPPassword, SFTP: sftpserver.Jailed(root)}
	s.SetHostKey(signer)
	go s.Serve(l)
	return s, nil
}
