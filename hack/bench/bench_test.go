// Package bench compares the gateway with a direct pkg/sftp client over one
// SSH connection to the same OpenSSH server: the floor the gateway cannot
// beat. Run it with `make bench`; it is skipped otherwise.
package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/procs"
	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/fixtures/testhttp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/hack/repo"
	"github.com/sftpgate/sftpgate/internal/apitoken"
	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/sftpdial"
	"github.com/sftpgate/sftpgate/internal/tempname"
	"github.com/sftpgate/sftpgate/test/framework"
)

const (
	// Small writes run in rounds: in each, the five clients (direct,
	// direct with the realpath check, the bare handler, the gateway at
	// rootPath / and the gateway) write for a phase in turn.
	phase     = time.Second
	rounds    = 3
	largeSize = 256 << 20
	hugeSize  = 1 << 30
	// tusPart is a resumable upload's part.
	tusPart = 64 << 20
	// manyEntries is the size of the directory listed.
	manyEntries = 200_000
)

// rig is what the benchmark and the soak run against: a real sshd, the
// control plane with the manager, connections to the sshd in one
// namespace with a key for them, and the gateway as its own process, so
// that its memory and CPU are its own.
type rig struct {
	sshd              *testsshd.Server
	ns, token         string
	gateway           *exec.Cmd
	addr, metricsAddr string
	k8s               client.Client
	kubeconfig        string
	// gatewayEnv is added to the environment of the gateways started
	// next (the tracing bench's OTEL_* variables).
	gatewayEnv []string
}

// startRig starts a rig whose connections are named after roots' keys and
// rooted at their values (empty: the sshd's directory), with a limit of 8
// SSH connections each; the gateway runs with flags, its log going to
// stderr.
func startRig(t *testing.T, binary, ns string, roots map[string]string, stderr io.Writer, flags ...string) *rig {
	t.Helper()
	ctrl.SetLogger(logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := &rig{sshd: testsshd.Start(t), ns: ns}
	env, k8s, err := testcluster.Start()
	if err != nil {
		t.Fatal(err)
	}
	r.k8s = k8s
	t.Cleanup(func() { _ = env.Stop() })
	manager, err := framework.StartManager(ctx, env, t.TempDir(), "--max-concurrent-tests=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = manager.Kill() })
	r.token = r.addTenant(t, ns, r.sshd, roots)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	r.kubeconfig = kubeconfig
	r.gateway, r.addr, r.metricsAddr = r.startGateway(t, binary, stderr, flags...)
	return r
}

// startGateway runs binary's gateway as its own process against r's API
// server, with flags, until t ends; it returns the process and its
// addresses.
func (r *rig) startGateway(t *testing.T, binary string, stderr io.Writer, flags ...string) (gw *exec.Cmd, addr, metricsAddr string) {
	t.Helper()
	addr, metricsAddr = testhttp.FreeAddr(t), testhttp.FreeAddr(t)
	gw = exec.Command(binary, append([]string{"gateway", "--kubeconfig=" + r.kubeconfig, "--listen-address=" + addr,
		"--metrics-address=" + metricsAddr, "--denied-networks=" + testcluster.LoopbackNetworks, "--rate-per-key=0"}, flags...)...)
	gw.Stderr = stderr
	if len(r.gatewayEnv) > 0 {
		gw.Env = append(os.Environ(), r.gatewayEnv...)
	}
	if err := gw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Process.Kill(); _ = gw.Wait() })
	return gw, addr, metricsAddr
}

// addTenant makes a namespace with the credentials of testsshd's user, a
// key, and connections to sshd as startRig's; it returns the key's token.
func (r *rig) addTenant(t *testing.T, ns string, sshd *testsshd.Server, roots map[string]string) string {
	t.Helper()
	r.create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}, StringData: map[string]string{"password": sshd.Password}})
	token := r.addKey(t, ns, "key")
	r.addConnections(t, ns, sshd, roots)
	return token
}

// addServiceAccount makes a ServiceAccount in ns that RBAC lets run every
// command on connection, and returns a token of its for the gateway.
func (r *rig) addServiceAccount(t *testing.T, ns, connection string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bench"}}
	r.create(t, sa, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bench"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"sftpgate.dev"}, Resources: []string{"sftpconnections/commands"}, ResourceNames: []string{connection}, Verbs: []string{"*"},
	}}}, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bench"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "bench"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa.Name}}})
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"sftpgate.dev"}}}
	if err := r.k8s.SubResource("token").Create(context.Background(), sa, tr); err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// addKey makes a key in ns, for all its connections, and returns its token.
func (r *rig) addKey(t *testing.T, ns, name string) string {
	t.Helper()
	token, keyID := apitoken.NewToken()
	r.create(t, &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.ApiKeySpec{Token: v1alpha1.TokenSource{SHA256: apitoken.Hash(token), KeyID: keyID}}})
	return token
}

// addConnections makes connections in ns to sshd, named after roots' keys
// and rooted at their values (empty: the sshd's directory), with a limit
// of 8 SSH connections each. They log in with ns's "creds": every testsshd
// logs in as the same user, with one password.
func (r *rig) addConnections(t *testing.T, ns string, sshd *testsshd.Server, roots map[string]string) {
	t.Helper()
	for name, root := range roots {
		r.addConnectionAt(t, ns, name, sshd.Host, sshd.Port, sshd, root)
	}
}

// addConnectionAt is addConnections' connection name to sshd, reached at
// host:port (a delay proxy before it, say).
func (r *rig) addConnectionAt(t *testing.T, ns, name, host string, port int32, sshd *testsshd.Server, root string) {
	t.Helper()
	r.create(t, &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.SftpConnectionSpec{
		Host: host, Port: port, Username: testsshd.User, RootPath: cmp.Or(root, sshd.Dir),
		Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.LocalSecretReference{Name: "creds"}},
		HostKey:     v1alpha1.HostKeyTrust{Trusted: []string{sshd.HostKeyLine}},
		Limits:      v1alpha1.Limits{MaxConnections: 8, OperationTimeout: &metav1.Duration{Duration: time.Minute}},
	}})
}

// benchWorkerNS is the namespace of the worker processes the benches run.
const benchWorkerNS = "sftpgate-bench-worker"

// startWorker runs binary's worker as its own process against r's API
// server, as identity, until t ends; flags come after the defaults and
// win over them. The caller may kill it sooner.
func (r *rig) startWorker(t *testing.T, binary, identity string, flags ...string) *exec.Cmd {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchWorkerNS}}
	if err := r.k8s.Create(t.Context(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	args := append([]string{"worker", "--kubeconfig=" + r.kubeconfig, "--namespace=" + benchWorkerNS, "--identity=" + identity,
		"--metrics-address=0", "--health-probe-bind-address=0", "--denied-networks=" + testcluster.LoopbackNetworks}, flags...)
	w := exec.Command(binary, args...)
	w.Stderr = os.Stderr
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Process.Kill(); _ = w.Wait() })
	return w
}

func (r *rig) create(t *testing.T, objects ...client.Object) {
	t.Helper()
	for _, obj := range objects {
		if err := r.k8s.Create(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBenchmark(t *testing.T) {
	binary := os.Getenv("SFTPGATE_BENCH_BINARY")
	if binary == "" {
		t.Fatal("run it with make bench, which builds the binary it measures")
	}
	// "box" is rooted in the server's directory, as most connections are;
	// "slash" at /, as for an account the server confines
	// (ChrootDirectory), where the gateway has no symlinks to check.
	// JSON bodies may be as large as the hostile phase's 32 MiB writes
	// and their envelope, so that the memory budget decides what becomes
	// of them, not the body's limit.
	r := startRig(t, binary, "bench", map[string]string{"box": "", "slash": "/"}, io.Discard, "--profiling", "--request-timeout=10m",
		fmt.Sprintf("--max-body-bytes=%d", 2*hostileWriteSize))
	sshd, token, gw, metricsAddr := r.sshd, r.token, r.gateway, r.metricsAddr
	httpClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
	g := r.client(httpClient, "box", token)
	slash := r.client(httpClient, "slash", token)
	waitServed(t, g, slash)
	// SFTPGATE_BENCH_ONLY=hostile runs the hostile-load phase alone, for
	// work on fairness and memory without the two minutes before it.
	if os.Getenv("SFTPGATE_BENCH_ONLY") == "hostile" {
		hostilePhase(t, r, httpClient)
		return
	}
	// SFTPGATE_BENCH_AB=BINARY compares this build's large uploads and
	// downloads with another build's, in one run (abPhase).
	if other := os.Getenv("SFTPGATE_BENCH_AB"); other != "" {
		abPhase(t, r, httpClient, other)
		return
	}

	// The floor: pkg/sftp over one x/crypto/ssh connection, as a user
	// would write it, with both libraries' defaults.
	direct := directClient(t, sshd, sshd.Host, sshd.Port)

	kib := strings.Repeat("x", 1024)
	fmt.Printf("\n%-34s %12s %12s %10s %10s\n", "", "direct", "gateway", "ratio", "target")
	// The CPU each party uses per write, over all small-write phases:
	// the client (this process, or the gateway), sshd, and wrk.
	var directCPU, checkedCPU, bareCPU, slashCPU, gatewayCPU cpuUse
	var wrkCPU time.Duration
	self := func() time.Duration { return mustCPU(t, os.Getpid()) }
	gateway := func() time.Duration { return mustCPU(t, gw.Process.Pid) }
	small := filepath.Join(sshd.Dir, "small")
	_ = direct.MkdirAll(small)
	// Small writes make new files (each phase names its own): a write
	// over an existing file, which the gateway makes through a temporary
	// file, is measured apart, below.
	writeTo := func(name string) error { return writeFile(direct, name, kib) }
	directName := func(i int) string { return fmt.Sprintf("%s/d%d-%d.txt", small, phaseNumber.Load(), i) }
	directWrite := func(i int) error { return writeTo(directName(i)) }
	// The gateway's writes ask the server where the path really leads
	// before they open it (its root confinement): this floor does too.
	checkedWrite := func(i int) error {
		if _, err := direct.RealPath(directName(i)); err != nil {
			return err
		}
		return directWrite(i)
	}
	load := newLoad(t, g.url+"write", token, "", newNames, jsonBody)
	slashLoad := newLoad(t, slash.url+"write", token, sshd.Dir+"/", newNames, jsonBody)
	bareLoad := newLoad(t, startBare(t, sshd)+"/box/write", token, "", newNames, jsonBody)
	// Raw uploads of the same 1 KiB, at concurrency 16, against the JSON
	// writes of the same rounds.
	rawLoad := newLoad(t, g.url+"write", token, "", newNames, rawBody)
	var rawCPU cpuUse
	// The same JSON writes with a ServiceAccount token, whose review and
	// RBAC decision the gateway caches, against the key's of the same
	// rounds.
	saLoad := newLoad(t, g.url+"write", r.addServiceAccount(t, r.ns, "box"), "", newNames, jsonBody)
	var saCPU, keyCPU16 cpuUse
	for _, concurrency := range []int{1, 16, 64} {
		// The files of the level before go: a directory of hundreds of
		// thousands would weigh on sshd.
		old, _ := filepath.Glob(filepath.Join(small, "*"))
		for _, f := range old {
			_ = os.Remove(f)
		}
		var d, c, b, sl, w, raw result
		type party struct {
			result *result
			cpu    *cpuUse
			client func() time.Duration
			write  func() result
		}
		parties := []party{
			{&d, &directCPU, self, func() result { return run(concurrency, directWrite) }},
			{&c, &checkedCPU, self, func() result { return run(concurrency, checkedWrite) }},
			{&b, &bareCPU, self, func() result {
				lw, _ := bareLoad.run(t, concurrency)
				return lw
			}},
			{&sl, &slashCPU, gateway, func() result {
				lw, _ := slashLoad.run(t, concurrency)
				return lw
			}},
			{&w, &gatewayCPU, gateway, func() result {
				lw, cpu := load.run(t, concurrency)
				wrkCPU += cpu
				return lw
			}},
		}
		var sa result
		keyBefore := gatewayCPU
		if concurrency == 16 {
			parties = append(parties, party{&raw, &rawCPU, gateway, func() result {
				lw, _ := rawLoad.run(t, concurrency)
				return lw
			}}, party{&sa, &saCPU, gateway, func() result {
				lw, _ := saLoad.run(t, concurrency)
				return lw
			}})
		}
		// SFTPGATE_BENCH_PROFILE names a file for the gateway's CPU profile
		// of the concurrency-16 phases (of both its connections).
		var profiled chan error
		if out := os.Getenv("SFTPGATE_BENCH_PROFILE"); out != "" && concurrency == 16 {
			profiled = make(chan error, 1)
			go func() { profiled <- saveProfile("http://"+metricsAddr, out, rounds*time.Duration(len(parties))*phase) }()
		}
		// The clients take turns, so that a slow spell of this shared
		// machine weighs on all.
		for range rounds {
			for _, p := range parties {
				phaseNumber.Add(1)
				p.result.add(p.cpu.measure(p.client, sshd, p.write))
			}
		}
		if profiled != nil {
			if err := <-profiled; err != nil {
				t.Error(err)
			}
		}
		// The target: what the gateway's own layers (routing, keys,
		// budgets, logs, metrics) cost, against the bare HTTP handler that
		// makes the same SFTP steps over the same SSH stack, at every
		// concurrency. The ratios to the direct clients are information:
		// no HTTP front reaches them (the bare handler itself does not).
		fmt.Printf("%-34s %9.0f/s %9.0f/s %10.2f\n", fmt.Sprintf("1 KiB writes, concurrency %d", concurrency), d.rate(), w.rate(), w.rate()/d.rate())
		fmt.Printf("%-34s %12s %12s\n", "  p50 / p99 latency", d.percentiles(), w.percentiles())
		fmt.Printf("%-34s %9.0f/s %12s %10.2f\n", "  direct with the realpath check", c.rate(), "", w.rate()/c.rate())
		fmt.Printf("%-34s %9.0f/s %12s %10.2f %10s\n", "  bare HTTP handler, same steps", b.rate(), "", w.rate()/b.rate(), ">= 0.95")
		fmt.Printf("%-34s %12s %9.0f/s %10.2f\n", "  gateway at rootPath /", "", sl.rate(), sl.rate()/d.rate())
		if concurrency == 16 {
			// Its ratio is to the JSON writes': what a raw upload costs
			// beyond the same write made with JSON.
			fmt.Printf("%-34s %12s %9.0f/s %10.2f %10s\n", "raw 1 KiB writes, concurrency 16", "", raw.rate(), raw.rate()/w.rate(), ">= 0.80")
			fmt.Printf("%-34s %12s %9.0f/s %10.2f\n", "as a ServiceAccount, concurrency 16", "", sa.rate(), sa.rate()/w.rate())
			keyCPU16 = cpuUse{client: gatewayCPU.client - keyBefore.client, sshd: gatewayCPU.sshd - keyBefore.sshd, ops: gatewayCPU.ops - keyBefore.ops}
		}
	}
	// The direct clients' CPU is this process's, which runs little else
	// while they write: the cost of the SFTP client alone.
	// Its target is a ratio, since the absolute figure doubles on a
	// slower machine.
	// Against the direct client making the same round trips (the
	// realpath check included).
	directMS, gatewayMS := directCPU.perOp(directCPU.client), gatewayCPU.perOp(gatewayCPU.client)
	checkedMS := checkedCPU.perOp(checkedCPU.client)
	fmt.Printf("%-34s %9.3f ms %9.3f ms %10.2f\n", "CPU per small write", directMS, gatewayMS, gatewayMS/directMS)
	fmt.Printf("%-34s %9.3f ms %12s %10.2f\n", "  direct with the realpath check", checkedMS, "", gatewayMS/checkedMS)
	bareMS := bareCPU.perOp(bareCPU.client)
	fmt.Printf("%-34s %9.3f ms %12s %10.2f %10s\n", "  bare HTTP handler, same steps", bareMS, "", gatewayMS/bareMS, "<= 1.10")
	fmt.Printf("%-34s %12s %9.3f ms\n", "  gateway at rootPath /", "", slashCPU.perOp(slashCPU.client))
	fmt.Printf("%-34s %12s %9.3f ms\n", "  gateway, raw writes (c16)", "", rawCPU.perOp(rawCPU.client))
	saMS, keyMS := saCPU.perOp(saCPU.client), keyCPU16.perOp(keyCPU16.client)
	fmt.Printf("%-34s %12s %9.3f ms %10.2f %10s\n", "  gateway, as a ServiceAccount (c16)", "", saMS, saMS/keyMS, "<= 1.10")
	fmt.Printf("%-34s %12s %9.3f ms\n", "  gateway, with the key (c16)", "", keyMS)
	fmt.Printf("%-34s %9.3f ms %9.3f ms\n", "  sshd's, per write", directCPU.perOp(directCPU.sshd), gatewayCPU.perOp(gatewayCPU.sshd))
	fmt.Printf("%-34s %9.3f ms\n", "  sshd's, with the realpath check", checkedCPU.perOp(checkedCPU.sshd))
	fmt.Printf("%-34s %9.3f ms\n", "  sshd's, for the bare handler", bareCPU.perOp(bareCPU.sshd))
	fmt.Printf("%-34s %12s %9.3f ms\n", "  sshd's, at rootPath /", "", slashCPU.perOp(slashCPU.sshd))
	fmt.Printf("%-34s %12s %9.3f ms\n", "  wrk's, per write", "", gatewayCPU.perOp(wrkCPU))

	// Writes over existing files, at concurrency 16: in place for the
	// direct client, through a temporary file renamed into place for the
	// gateway (so that a write cut off never leaves a file half written).
	var directOver, gatewayOver result
	var directOverCPU, gatewayOverCPU cpuUse
	overLoad := newLoad(t, g.url+"write", token, "", reusedNames, jsonBody)
	for range rounds {
		directOver.add(directOverCPU.measure(self, sshd, func() result {
			return run(16, func(i int) error { return writeTo(fmt.Sprintf("%s/o-%d.txt", small, i%1000)) })
		}))
		gatewayOver.add(gatewayOverCPU.measure(gateway, sshd, func() result {
			lw, _ := overLoad.run(t, 16)
			return lw
		}))
	}
	fmt.Printf("%-34s %9.0f/s %9.0f/s %10.2f\n", "1 KiB overwrites, concurrency 16", directOver.rate(), gatewayOver.rate(), gatewayOver.rate()/directOver.rate())
	fmt.Printf("%-34s %9.3f ms %9.3f ms\n", "  CPU per overwrite", directOverCPU.perOp(directOverCPU.client), gatewayOverCPU.perOp(gatewayOverCPU.client))

	// A page of a huge directory: the gateway reads it all (to sort by
	// name), but holds only the page.
	if err := os.Mkdir(filepath.Join(sshd.Dir, "many"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range manyEntries {
		if err := os.WriteFile(filepath.Join(sshd.Dir, "many", fmt.Sprintf("entry-%07d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	listed := timed(func() error {
		return g.call("list", "application/json", strings.NewReader(`{"path": "many", "limit": 1000}`), -1)
	})
	rss, err := peakRSS(gw.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("%-34s %12s %9.0f ms\n", "list, 1000 of 200,000 entries", "", float64(listed.Microseconds())/1000)
	fmt.Printf("%-34s %12s %9d MB\n", "  gateway peak RSS so far", "", rss>>20)

	// Direct and gateway take turns here too (see alternate): the
	// machine's page cache and writeback weigh on whichever comes second.
	var upDirectCPU, upGatewayCPU cpuUse
	upDirect, upGateway := alternate(upDirectCPU.counted(self, sshd, func() error {
		f, err := direct.OpenFile(sshd.Dir+"/large-direct", os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
		if err != nil {
			return err
		}
		if _, err := f.ReadFromWithConcurrency(io.LimitReader(zeros{}, largeSize), 0); err != nil {
			return err
		}
		return f.Close()
	}), upGatewayCPU.counted(gateway, sshd, func() error {
		return g.call("write?path=large-gateway", "application/octet-stream", io.LimitReader(zeros{}, largeSize), largeSize)
	}))
	fmt.Printf("%-34s %7.0f MB/s %7.0f MB/s %10.2f %10s\n", "256 MiB upload", mbps(upDirect), mbps(upGateway), upDirect.Seconds()/upGateway.Seconds(), ">= 0.80")
	perMB := func(u *cpuUse, d time.Duration) float64 { return u.perOp(d) / (largeSize / 1e6) }
	fmt.Printf("%-34s %9.2f ms %9.2f ms\n", "  CPU per MB, the client's", perMB(&upDirectCPU, upDirectCPU.client), perMB(&upGatewayCPU, upGatewayCPU.client))
	fmt.Printf("%-34s %9.2f ms %9.2f ms\n", "  CPU per MB, sshd's", perMB(&upDirectCPU, upDirectCPU.sshd), perMB(&upGatewayCPU, upGatewayCPU.sshd))
	downDirect, downGateway := alternate(func() error {
		f, err := direct.Open(sshd.Dir + "/large-direct")
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		_, err = f.WriteTo(io.Discard)
		return err
	}, func() error { return g.download("large-gateway", largeSize) })
	fmt.Printf("%-34s %7.0f MB/s %7.0f MB/s %10.2f %10s\n", "256 MiB download", mbps(downDirect), mbps(downGateway), downDirect.Seconds()/downGateway.Seconds(), ">= 0.80")
	// Memory does not grow with file size: move 1 GiB each way, then read
	// the peak.
	huge := timed(func() error {
		if err := g.call("write?path=huge", "application/octet-stream", io.LimitReader(zeros{}, hugeSize), hugeSize); err != nil {
			return err
		}
		return g.download("huge", hugeSize)
	})
	rss, err = peakRSS(gw.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("%-34s %12s %9d MB %10s %10s\n", "gateway RSS, 1 GiB each way", "", rss>>20, "", "< 100 MB")
	fmt.Printf("%-34s %12s %7.0f MB/s\n", "  (1 GiB up and down, together)", "", 2*float64(hugeSize)/1e6/huge.Seconds())

	// A resumable upload (tus) of 1 GiB in 64 MiB parts against a raw
	// upload of it, and the gateway's memory meanwhile.
	if err := resetPeakRSS(gw.Process.Pid); err != nil {
		t.Fatal(err)
	}
	raw, tus := alternate(func() error {
		return g.call("write?path=huge-raw", "application/octet-stream", io.LimitReader(zeros{}, hugeSize), hugeSize)
	}, func() error { return g.tusUpload("huge-tus", hugeSize, tusPart) })
	rss, err = peakRSS(gw.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	gib := func(d time.Duration) float64 { return float64(hugeSize) / 1e6 / d.Seconds() }
	fmt.Printf("%-34s %7.0f MB/s %7.0f MB/s %10.2f %10s\n", "1 GiB raw vs tus in 64 MiB parts", gib(raw), gib(tus), raw.Seconds()/tus.Seconds(), ">= 0.80")
	fmt.Printf("%-34s %12s %9d MB %10s %10s\n", "gateway peak RSS, 8 GiB of these", "", rss>>20, "", "< 100 MB")

	hostilePhase(t, r, httpClient)
}

// TestBenchmarkLayers prints what each of the gateway's own layers costs
// a 1 KiB write: the gateway package's BenchmarkWriteLayers, in a go test
// of its own (with this process's environment: make bench's control
// plane and TMPDIR), which writes in process against the real sshd with
// the layers added one at a time to the bare write (its decoding, its
// run on a pooled session, its answer: the same SFTP steps), the rows
// taking turns write by write. A layer's cost is the difference from the
// row before.
func TestBenchmarkLayers(t *testing.T) {
	if os.Getenv("SFTPGATE_BENCH_BINARY") == "" {
		t.Fatal("run it with make bench, which sets up what it measures")
	}
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "go", "test", "./gateway", "-run", "^$", "-bench", "^BenchmarkWriteLayers$", "-benchtime=20s", "-count=1")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	rows := layerRows(string(out))
	if len(rows) < 3 || rows[0].name != "harness" {
		t.Fatalf("no rows in the benchmark's output:\n%s", out)
	}
	fmt.Printf("\n%-44s %14s %16s %22s\n", "1 KiB writes in process, layer by layer", "ns per write", "CPU ns per write", "allocations per write")
	harness, bare, gateway := rows[0], rows[1], rows[len(rows)-1]
	fmt.Printf("%-44s %14.0f %16.0f %22.1f\n", "  bare handler, the same SFTP steps", bare.ns, bare.cpu, bare.allocs)
	for i, r := range rows[2:] {
		before := rows[i+1]
		fmt.Printf("%-44s %+14.0f %+16.0f %+22.1f\n", "  + "+r.name, r.ns-before.ns, r.cpu-before.cpu, r.allocs-before.allocs)
	}
	fmt.Printf("%-44s %14.0f %16.0f %22.1f\n", "  gateway, every layer", gateway.ns, gateway.cpu, gateway.allocs)
	fmt.Printf("%-44s %+14.0f %+16.0f %+22.1f\n", "  the layers together", gateway.ns-bare.ns, gateway.cpu-bare.cpu, gateway.allocs-bare.allocs)
	fmt.Printf("%-44s %14.0f %16.0f %22.1f\n", "  the benchmark's own request and writer", harness.ns, harness.cpu, harness.allocs)
	fmt.Printf("%-44s %14s %16s %22s\n", "  allocations per write, the harness apart", "", "", fmt.Sprintf("%.0f (<= 63)", gateway.allocs-harness.allocs))
}

// layerRow is a row of BenchmarkWriteLayers: its figures per write.
type layerRow struct {
	name            string
	ns, cpu, allocs float64
}

// layerRows reads BenchmarkWriteLayers' rows from go test's output, in
// their order ("harness", then "bare", then each layer, the last being
// the gateway as it serves), each the median of the runs printed.
func layerRows(out string) []layerRow {
	metric := regexp.MustCompile(`([\d.]+) (ns|cpu-ns|allocs)/(\d+)-(\S+)`)
	var names []string
	figures := map[string]map[string][]float64{}
	for line := range strings.Lines(out) {
		if !strings.HasPrefix(line, "BenchmarkWriteLayers") {
			continue
		}
		for _, m := range metric.FindAllStringSubmatch(line, -1) {
			i, _ := strconv.Atoi(m[3])
			for len(names) <= i {
				names = append(names, "")
			}
			name := strings.ReplaceAll(m[4], "-", " ")
			names[i] = name
			if figures[name] == nil {
				figures[name] = map[string][]float64{}
			}
			v, _ := strconv.ParseFloat(m[1], 64)
			figures[name][m[2]] = append(figures[name][m[2]], v)
		}
	}
	median := func(v []float64) float64 {
		if len(v) == 0 {
			return 0
		}
		v = slices.Sorted(slices.Values(v))
		return v[len(v)/2]
	}
	rows := make([]layerRow, 0, len(names))
	for _, name := range names {
		f := figures[name]
		rows = append(rows, layerRow{name: name, ns: median(f["ns"]), cpu: median(f["cpu-ns"]), allocs: median(f["allocs"])})
	}
	return rows
}

// startBare serves the least an HTTP front to SFTP does for a 1 KiB
// write, in this process: decode the request, ask the server's realpath
// (the root confinement), open, write, close and answer, over the
// gateway's own SSH stack (sftpdial) and one session, with no routing,
// keys, log or metrics. What the gateway spends beyond it is its own.
func startBare(t *testing.T, sshd *testsshd.Server) (url string) {
	target := testsftp.Target(t, sshd.Host, sshd.Port, testsshd.User, sshd.Password, sshd.HostKeyLine)
	s, err := (&sftpdial.Dialer{}).Dial(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	type writeRequest struct {
		Path string `json:"path"`
		File struct {
			Text string `json:"text"`
		} `json:"file"`
	}
	type writeResult struct {
		Path         string `json:"path"`
		BytesWritten int    `json:"bytesWritten"`
	}
	write := func(body []byte) (*writeResult, error) {
		var req writeRequest
		if err := jsonv2.Unmarshal(body, &req); err != nil {
			return nil, err
		}
		// The gateway's steps for a new file: the realpath check, the
		// temporary file's open and a look at the target at once; the
		// write; the close and the rename into place at once.
		p := path.Join(sshd.Dir, path.Clean("/"+req.Path))
		tmp := tempname.In(path.Dir(p))
		var (
			asked            sync.WaitGroup
			f                files.File
			openErr, statErr error
		)
		asked.Go(func() { f, openErr = s.Files.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL) })
		asked.Go(func() { _, statErr = s.Files.Lstat(p) })
		real, err := s.Files.RealPath(p)
		asked.Wait()
		switch {
		case err == nil && !strings.HasPrefix(real, sshd.Dir+"/"):
			err = fmt.Errorf("%s leads outside", req.Path)
		case err == nil && openErr != nil:
			err = openErr
		case err == nil && !errors.Is(statErr, os.ErrNotExist):
			err = fmt.Errorf("%s exists (%w)", req.Path, statErr)
		}
		if err != nil {
			return nil, err
		}
		n, err := f.Write([]byte(req.File.Text))
		var closeErr error
		asked.Go(func() { closeErr = f.Close() })
		if err == nil {
			err = s.Files.Rename(tmp, p)
		}
		asked.Wait()
		return &writeResult{Path: req.Path, BytesWritten: n}, cmp.Or(err, closeErr)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var res *writeResult
		if err == nil {
			res, err = write(body)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		answer, _ := json.Marshal(struct {
			Write *writeResult `json:"write"`
		}{res})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

type gatewayClient struct {
	url, token string
	http       *http.Client
}

// client sends commands to the rig's gateway for the connection of slug,
// with token.
func (r *rig) client(httpClient *http.Client, slug, token string) *gatewayClient {
	return &gatewayClient{url: "http://" + r.addr + "/" + slug + "/", token: token, http: httpClient}
}

// waitServed waits until the gateway serves each client's connection.
func waitServed(t *testing.T, clients ...*gatewayClient) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for _, c := range clients {
		for c.call("ping", "application/json", strings.NewReader(`{}`), -1) != nil {
			if time.Now().After(deadline) {
				t.Fatalf("the gateway does not serve %s", c.url)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// call runs a command and fails on anything but a result.
func (g *gatewayClient) call(command, contentType string, body io.Reader, size int64) error {
	status, answer, err := g.ask(context.Background(), command, contentType, body, size)
	if err != nil {
		return err
	}
	var out map[string]any
	if err := json.Unmarshal(answer, &out); err != nil || status != http.StatusOK || out["error"] != nil {
		return fmt.Errorf("%s: %d %v: %w", command, status, out, err)
	}
	return nil
}

// ask sends a command and returns its answer's status and body.
func (g *gatewayClient) ask(ctx context.Context, command, contentType string, body io.Reader, size int64) (int, []byte, error) {
	req, err := g.request(ctx, command, contentType, body, size)
	if err != nil {
		return 0, nil, err
	}
	resp, err := g.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(resp.Body)
	return resp.StatusCode, answer, err
}

func (g *gatewayClient) request(ctx context.Context, command, contentType string, body io.Reader, size int64) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.url+command, body)
	if err != nil {
		return nil, err
	}
	req.ContentLength = size
	req.Header.Set("Authorization", "Bearer "+g.token)
	req.Header.Set("Content-Type", contentType)
	return req, nil
}

// tusUpload sends size zero bytes to p as a resumable upload (tus), in
// parts of part bytes.
func (g *gatewayClient) tusUpload(p string, size, part int64) error {
	// send answers the status and the Location header, resolved.
	send := func(method, url string, body io.Reader, size int64, headers ...string) (int, string, error) {
		req, err := http.NewRequest(method, url, body)
		if err != nil {
			return 0, "", err
		}
		req.ContentLength = size
		req.Header.Set("Authorization", "Bearer "+g.token)
		req.Header.Set("Tus-Resumable", "1.0.0")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := g.http.Do(req)
		if err != nil {
			return 0, "", err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		loc, err := req.URL.Parse(resp.Header.Get("Location"))
		return resp.StatusCode, loc.String(), err
	}
	status, loc, err := send(http.MethodPost, g.url+"uploads/", nil, 0, "Upload-Length", strconv.FormatInt(size, 10),
		"Upload-Metadata", "path "+base64.StdEncoding.EncodeToString([]byte(p)))
	if err == nil && status != http.StatusCreated {
		err = fmt.Errorf("creating an upload: %d", status)
	}
	for offset := int64(0); err == nil && offset < size; offset += part {
		n := min(part, size-offset)
		status, _, err = send(http.MethodPatch, loc, io.LimitReader(zeros{}, n), n, "Upload-Offset", strconv.FormatInt(offset, 10),
			"Content-Type", "application/offset+octet-stream")
		if err == nil && status != http.StatusNoContent {
			err = fmt.Errorf("a part at %d: %d", offset, status)
		}
	}
	return err
}

func (g *gatewayClient) download(p string, size int64) error {
	body := `{"path": "` + p + `"}`
	req, err := g.request(context.Background(), "read", "application/json", strings.NewReader(body), int64(len(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/octet-stream")
	resp, err := g.http.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil && n != size {
		err = fmt.Errorf("downloaded %d bytes", n)
	}
	return err
}

type result struct {
	// ops are the operations done: from wrk, the answers that were a
	// result.
	ops     int
	elapsed time.Duration
	// latencies of every operation, or, from wrk, the p50 and p99 of
	// each round.
	latencies []time.Duration
	p50, p99  []time.Duration
	// From a wrk load that tallies them: the clear refusals, by status
	// and code ("503 busy"), and the other failures.
	refused map[string]int
	failed  int
}

func (r *result) add(o result) {
	r.ops += o.ops
	r.elapsed += o.elapsed
	r.latencies = append(r.latencies, o.latencies...)
	r.p50, r.p99 = append(r.p50, o.p50...), append(r.p99, o.p99...)
	for k, n := range o.refused {
		if r.refused == nil {
			r.refused = map[string]int{}
		}
		r.refused[k] += n
	}
	r.failed += o.failed
}

func (r result) rate() float64 { return float64(r.ops) / r.elapsed.Seconds() }

// percentiles are p50 and p99 of all operations, or the medians of the
// rounds' where wrk measured.
func (r result) percentiles() string {
	at := func(d []time.Duration, q float64) float64 {
		slices.Sort(d)
		return float64(d[int(q*float64(len(d)-1))].Microseconds()) / 1000
	}
	if len(r.latencies) == 0 {
		return fmt.Sprintf("%.2f/%.2fms", at(r.p50, 0.5), at(r.p99, 0.5))
	}
	return fmt.Sprintf("%.2f/%.2fms", at(r.latencies, 0.5), at(r.latencies, 0.99))
}

// wrkScript makes wrk send 1 KiB writes below $SFTPGATE_BENCH_PREFIX, as
// JSON or with $SFTPGATE_BENCH_BODY=raw as raw uploads: to new files (named
// after the phase, $SFTPGATE_BENCH_PHASE), or with
// $SFTPGATE_BENCH_NAMES=reused over 1,000 files per thread. It counts the
// answers that are a result, the clear refusals (429 or 503 with an error
// code) by status and code, and the other failures.
const wrkScript = `
local kib = string.rep("x", 1024)
local prefix = os.getenv("SFTPGATE_BENCH_PREFIX") or ""
local reused = os.getenv("SFTPGATE_BENCH_NAMES") == "reused"
local raw = os.getenv("SFTPGATE_BENCH_BODY") == "raw"
local phase = os.getenv("SFTPGATE_BENCH_PHASE") or "0"
-- Globals: setup sets id in each thread, and done reads the counts from it.
n, ok, failed, refused, id = 0, 0, 0, {}, 0
wrk.method = "POST"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("SFTPGATE_BENCH_TOKEN")
wrk.headers["Content-Type"] = raw and "application/octet-stream" or "application/json"
local threads = {}
function setup(thread)
  table.insert(threads, thread)
  thread:set("id", #threads)
end
function request()
  n = n + 1
  local name = phase .. '-' .. id .. '-' .. n
  if reused then name = 'o' .. id .. '-' .. (n % 1000) end
  local file = prefix .. 'small/' .. name .. '.txt'
  if raw then return wrk.format(nil, wrk.path .. '?path=' .. file, nil, kib) end
  return wrk.format(nil, nil, nil, '{"path": "' .. file .. '", "file": {"text": "' .. kib .. '"}}')
end
function response(status, headers, body)
  if status == 200 and not body:find('"error"', 1, true) then
    ok = ok + 1
    return
  end
  local code = body:match('"code"%s*:%s*"([%w_]+)"')
  if code and (status == 429 or status == 503) then
    local k = status .. ':' .. code
    refused[k] = (refused[k] or 0) + 1
  else
    failed = failed + 1
  end
end
-- Every status is seen by response: wrk's own count of them is left out.
function done(summary, latency, requests)
  local o, f, r = 0, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout, {}
  for _, t in ipairs(threads) do
    o, f = o + t:get("ok"), f + t:get("failed")
    for k, v in pairs(t:get("refused")) do r[k] = (r[k] or 0) + v end
  end
  local list = {}
  for k, v in pairs(r) do table.insert(list, k .. '=' .. v) end
  io.write(string.format("wrk-result %d %d %d %d %d %s\n", o, summary.duration, latency:percentile(50), latency:percentile(99), f,
    #list > 0 and table.concat(list, ',') or '-'))
end
`

// wrkLoad drives the gateway's small writes with wrk. The load generator
// shares the machine's two cores with the gateway and sshd: Go's HTTP
// client spent about as much CPU per request (0.13 ms) as the whole direct
// SFTP client, and took it from them.
type wrkLoad struct {
	url, token, script, prefix, names, body string
	// tally has run count refusals and failures in its result, for the
	// caller to judge, where by default any fails the test.
	tally bool
}

// The names of a load's files: new ones, or 1,000 per thread written again
// and again.
const (
	newNames    = "new"
	reusedNames = "reused"
)

// How a load's writes send their content: as JSON, or as a raw upload.
const (
	jsonBody = "json"
	rawBody  = "raw"
)

// phaseNumber counts the phases, whose new files are named after them.
var phaseNumber atomic.Int64

// newLoad makes a load that writes below prefix, a path the connection's
// root leads to, to names (newNames or reusedNames), with body (jsonBody or
// rawBody).
func newLoad(t *testing.T, url, token, prefix, names, body string) *wrkLoad {
	script := filepath.Join(t.TempDir(), "write.lua")
	if err := os.WriteFile(script, []byte(wrkScript), 0o600); err != nil {
		t.Fatal(err)
	}
	return &wrkLoad{url: url, token: token, script: script, prefix: prefix, names: names, body: body}
}

// run sends writes for one phase and returns them with wrk's CPU time.
func (l *wrkLoad) run(t *testing.T, concurrency int) (result, time.Duration) {
	threads := min(concurrency, 2)
	cmd := exec.Command("wrk", "-t", strconv.Itoa(threads), "-c", strconv.Itoa(concurrency),
		"-d", fmt.Sprintf("%ds", int(phase.Seconds())), "--timeout", "10s", "-s", l.script, l.url)
	cmd.Env = append(os.Environ(), "SFTPGATE_BENCH_TOKEN="+l.token, "SFTPGATE_BENCH_PREFIX="+l.prefix,
		"SFTPGATE_BENCH_NAMES="+l.names, "SFTPGATE_BENCH_BODY="+l.body, fmt.Sprintf("SFTPGATE_BENCH_PHASE=%d", phaseNumber.Load()))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("wrk: %v\n%s", err, out)
	}
	var ok, failed int
	var micros, p50, p99 int64
	var refusals string
	i := bytes.Index(out, []byte("wrk-result "))
	if i < 0 {
		t.Fatalf("wrk said:\n%s", out)
	}
	if _, err := fmt.Sscanf(string(out[i:]), "wrk-result %d %d %d %d %d %s", &ok, &micros, &p50, &p99, &failed, &refusals); err != nil {
		t.Fatalf("wrk: %v:\n%s", err, out)
	}
	refused := map[string]int{}
	for kv := range strings.SplitSeq(refusals, ",") {
		k, v, _ := strings.Cut(kv, "=")
		if n, err := strconv.Atoi(v); err == nil {
			refused[strings.Replace(k, ":", " ", 1)] += n
		}
	}
	if !l.tally && (failed > 0 || len(refused) > 0) {
		t.Fatalf("wrk: %d requests failed and %v were refused (%d answered a result):\n%s", failed, refused, ok, out)
	}
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return result{ops: ok, elapsed: time.Duration(micros) * time.Microsecond,
		p50: []time.Duration{time.Duration(p50) * time.Microsecond}, p99: []time.Duration{time.Duration(p99) * time.Microsecond},
		refused: refused, failed: failed}, cpu
}

// cpuUse is the CPU time a client and sshd used over phases of ops writes.
type cpuUse struct {
	client, sshd time.Duration
	ops          int
}

// perOp is d per write, in milliseconds.
func (u *cpuUse) perOp(d time.Duration) float64 {
	return float64(d) / float64(u.ops) / float64(time.Millisecond)
}

// measure runs a phase and adds what it cost.
func (u *cpuUse) measure(client func() time.Duration, sshd *testsshd.Server, phase func() result) result {
	c, s := client(), sshd.CPUTime()
	r := phase()
	u.client += client() - c
	u.sshd += sshd.CPUTime() - s
	u.ops += r.ops
	return r
}

// counted is op, whose CPU is added to u as one operation's.
func (u *cpuUse) counted(client func() time.Duration, sshd *testsshd.Server, op func() error) func() error {
	return func() error {
		var err error
		u.measure(client, sshd, func() result {
			err = op()
			return result{ops: 1}
		})
		return err
	}
}

func mustCPU(t *testing.T, pid int) time.Duration {
	cpu, err := procs.CPUTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	return cpu
}

// run calls op from concurrency goroutines for one phase.
func run(concurrency int, op func(i int) error) result { return runFor(phase, concurrency, op) }

// runFor calls op from concurrency goroutines for d.
func runFor(phase time.Duration, concurrency int, op func(i int) error) result {
	var (
		mu  sync.Mutex
		all result
		wg  sync.WaitGroup
	)
	start := time.Now()
	for w := range concurrency {
		wg.Go(func() {
			var mine []time.Duration
			for i := w; time.Since(start) < phase; i += concurrency {
				t0 := time.Now()
				if err := op(i); err != nil {
					panic(err)
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			all.latencies = append(all.latencies, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	all.elapsed, all.ops = time.Since(start), len(all.latencies)
	return all
}

func timed(op func() error) time.Duration {
	start := time.Now()
	if err := op(); err != nil {
		panic(err)
	}
	return time.Since(start)
}

// alternate times a and b three times each, a going first in the first
// and last of three pairs, and returns the median time of each. Each runs
// once untimed first: on this VM the first large writes into memory not
// written for a while ran at half speed or less, for the direct client as
// for the gateway. Even then single uploads of either client, alone on an
// SSH connection, took from 1x to 2.3x as long (sshd's CPU per MB swinging
// with them), and the median does not let one such run decide the ratio.
func alternate(a, b func() error) (time.Duration, time.Duration) {
	const pairs = 3
	timed(a)
	timed(b)
	var as, bs []time.Duration
	for i := range pairs {
		if i%2 == 0 {
			as, bs = append(as, timed(a)), append(bs, timed(b))
		} else {
			bs, as = append(bs, timed(b)), append(as, timed(a))
		}
	}
	slices.Sort(as)
	slices.Sort(bs)
	return as[pairs/2], bs[pairs/2]
}

func mbps(d time.Duration) float64 { return float64(largeSize) / 1e6 / d.Seconds() }

type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

// scrape reads a metric without labels from a Prometheus endpoint.
func scrape(t *testing.T, addr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		if value, ok := strings.CutPrefix(lines.Text(), name+" "); ok {
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// peakRSS is a process's peak resident memory, and currentRSS what it
// holds now, from /proc.
func peakRSS(pid int) (int64, error)    { return procMemory(pid, "VmHWM") }
func currentRSS(pid int) (int64, error) { return procMemory(pid, "VmRSS") }

func procMemory(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s", field)
}

// resetPeakRSS makes a process's peak resident memory start again from
// what it holds now (Linux's clear_refs), so that peakRSS then gives the
// peak since.
func resetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// saveProfile saves a CPU profile of the gateway over d.
func saveProfile(metricsURL, out string, d time.Duration) error {
	resp, err := http.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", metricsURL, int(d.Seconds())))
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile: %s", resp.Status)
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// smallWritesAB alternates rounds of 1 KiB JSON writes at concurrency 16
// (wrk, into small/ as the main bench's) between gateway a and gateway
// b, each serving r's connection at its client's address, and gives each
// one's writes and its process's CPU: what a feature costs, one gateway
// with it and one without, measured in the same minutes.
func smallWritesAB(t *testing.T, r *rig, rounds int, a *exec.Cmd, aAt *gatewayClient, b *exec.Cmd, bAt *gatewayClient) (ra, rb result, ca, cb cpuUse) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(r.sshd.Dir, "small"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(r.sshd.Dir, "small"), r.sshd.UID, r.sshd.GID); err != nil {
		t.Fatal(err)
	}
	aLoad := newLoad(t, aAt.url+"write", r.token, "", newNames, jsonBody)
	bLoad := newLoad(t, bAt.url+"write", r.token, "", newNames, jsonBody)
	gateway := func(pid int) func() time.Duration { return func() time.Duration { return mustCPU(t, pid) } }
	for range rounds {
		phaseNumber.Add(1)
		ra.add(ca.measure(gateway(a.Process.Pid), r.sshd, func() result { res, _ := aLoad.run(t, 16); return res }))
		phaseNumber.Add(1)
		rb.add(cb.measure(gateway(b.Process.Pid), r.sshd, func() result { res, _ := bLoad.run(t, 16); return res }))
	}
	return ra, rb, ca, cb
}
