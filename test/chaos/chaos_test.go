// Package chaos runs the whole system (test/framework) for minutes with
// several tenants doing what users do, while faults strike on a seeded
// schedule, and checks at the end that nothing was lost, half written or
// told wrong. make chaos runs it; CHAOS and CHAOS_SEED set its length and
// replay a schedule. docs/chaos.md says how its load was sized and what
// it leaves out.
package chaos

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sftpgate/sftpgate/hack/fixtures/delayproxy"
	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/fixtures/testgpg"
	"github.com/sftpgate/sftpgate/hack/fixtures/tests3"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/test/framework"
)

var (
	length = flag.Duration("chaos", 10*time.Minute, "How long the load and the faults last (make chaos CHAOS=...).")
	seed   = flag.Uint64("chaos-seed", 0, "The seed of the faults' schedule and the load; 0 picks one (printed, to replay).")
)

// The load, sized for two cores: see docs/chaos.md.
const (
	tenants          = 3
	clientsPerTenant = 3
	filesPerClient   = 6
	// Bounds the report holds the system to.
	growthBound     = 1.20      // RSS and goroutines at the end against the first minute
	writesAtRestMax = 5.0       // API server writes a second, the load stopped
	etcdBytesMax    = 512 << 20 // etcd's database after the run
	// An abandoned resumable upload's partial file is removed its grace
	// after its expiry (short here, to be seen; the grace at least the
	// gateway's request timeout and a minute).
	uploadExpiry, uploadGrace, requestTimeout = 2 * time.Minute, 2 * time.Minute, time.Minute
	// settleTimeout is how long after the faults stop the system has to
	// finish what the load began: an upload's expiry, grace and a sweep;
	// events held back by a minute's refusal; a scheduled run each way.
	settleTimeout    = uploadExpiry + uploadGrace + 90*time.Second
	auditStoreWindow = 5 * time.Second // a killed gateway's records not yet stored
)

// rig is everything the run uses: the system, the servers users bring,
// and the tenants.
type rig struct {
	t       *testing.T
	sys     *framework.System
	webuis  []*framework.Process
	near    *testsshd.Server // reached directly
	far     *testsshd.Server // reached through the delayed link
	link    *delayproxy.Proxy
	s3      *tests3.Server
	ours    *testgpg.Home // the tenants' decryption key
	partner *testgpg.Home // who signs what they are sent
	tenants []*tenant
	// messages are the encrypted files partners send.
	messages []message
	faults   *faultLog
	// refusing waits for the sinks' refusals to end.
	refusing     sync.WaitGroup
	gatewayKills kills
	// gate holds the load back while the first sample is taken: each
	// client's step holds it for reading.
	gate sync.RWMutex
	// began is when the load began, the faults' times are since;
	// healed when the faults ended; settleBy the end of settling.
	began, healed, settleBy time.Time
	rng                     *rand.Rand
	seed                    uint64
}

func TestChaos(t *testing.T) {
	if os.Getenv(framework.BinaryEnv) == "" {
		t.Fatal("run it with make chaos, which builds the binary it runs")
	}
	testcluster.LogErrors()
	r := &rig{t: t, seed: *seed, faults: &faultLog{}}
	if r.seed == 0 {
		r.seed = uint64(time.Now().UnixNano())
	}
	r.rng = rand.New(rand.NewPCG(r.seed, 2))
	fmt.Printf("chaos: %s, seed %d (CHAOS_SEED=%d replays it)\n", length.String(), r.seed, r.seed)
	r.start()

	ctx, stopLoad := context.WithCancel(context.Background())
	r.began = time.Now()
	var load sync.WaitGroup
	for _, tn := range r.tenants {
		tn.run(ctx, &load)
	}
	first := r.sampleAtRest(time.Minute)
	r.runFaults(*length - time.Minute)
	stopLoad()
	load.Wait()
	r.healAll()
	r.report(first)
}

// start builds the system and the servers, and makes the tenants.
func (r *rig) start() {
	t := r.t
	// The processes' logs outlive a run that failed, to be read.
	dir, err := os.MkdirTemp("", "sftpgate-chaos-")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("  the processes' logs: %s\n", dir)
	t.Cleanup(func() {
		if !t.Failed() {
			_ = os.RemoveAll(dir)
		}
	})
	// The web UIs reach the gateways as through a Service: each request
	// goes to the next replica.
	var next atomic.Int64
	service := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		gateways := r.sys.Gateways
		u, _ := url.Parse(gateways[int(next.Add(1))%len(gateways)].URL)
		pr.SetURL(u)
	}, ErrorLog: log.New(io.Discard, "", 0)}) // a replica down answers 502, as behind a Service
	t.Cleanup(service.Close)
	r.sys = framework.New(t, framework.Options{Dir: dir, WebUI: true, Flags: map[string][]string{
		// Profiles, to name what grew when the goroutines did.
		"gateway": {"--upload-expiry=" + uploadExpiry.String(), "--request-timeout=" + requestTimeout.String(), "--profiling"},
		// Sessions idle past 30 s close: the end, at rest, then shows
		// what stays, not the sessions of the last transfers.
		"worker": {"--upload-sweep-interval=30s", "--upload-expiry-grace=" + uploadGrace.String(), "--lease-duration=10s", "--idle-timeout=30s", "--profiling"},
		"webui":  {"--gateway-url=" + service.URL},
	}})
	second, err := r.sys.Add(context.Background(), "webui")
	if err != nil {
		t.Fatal(err)
	}
	r.webuis = []*framework.Process{r.sys.WebUI, second}
	r.near, r.far = testsshd.Start(t), testsshd.Start(t)
	if r.link, err = delayproxy.Start(delayproxy.Options{Target: fmt.Sprintf("%s:%d", r.far.Host, r.far.Port), Delay: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.link.Close() })
	r.s3 = tests3.Start(t)
	r.ours = testgpg.Start(t, "ours", testgpg.Curve25519)
	r.partner = testgpg.Start(t, "partner", testgpg.Curve25519)
	r.partner.Trust(t, r.ours)
	for i := range 4 {
		clear := fmt.Appendf(nil, "employee,net\n%d,%d.00\n", i, 1000+i)
		// One in four is signed by a key the tenants do not trust.
		signer := r.partner
		if i == 3 {
			signer = r.ours
		}
		r.messages = append(r.messages, message{clear: clear, cipher: signer.EncryptSign(t, clear, []*testgpg.Home{r.ours}), good: i != 3})
	}
	for i := range tenants {
		r.tenants = append(r.tenants, r.newTenant(i))
	}
}

// message is an encrypted file a partner sends: its clear text, and
// whether the partner signed it.
type message struct {
	clear, cipher []byte
	good          bool
}

// report checks every invariant, prints each with its counts, and fails
// the test on any breach.
func (r *rig) report(first samples) {
	t := r.t
	checks := []check{
		r.checkWrites(),
		r.checkWatchEvents(),
		r.checkDecryption(),
		r.checkTransfers(),
		r.checkTemporaries(),
		r.checkShares(),
		r.checkAudit(),
		// At rest, as the first: the load stopped, what it began finished.
		r.checkGrowth(first, r.sample("last")),
		r.checkControlPlane(),
	}
	fmt.Printf("\nchaos: %s, seed %d, %d tenants; faults injected:\n%s\n", length.String(), r.seed, tenants, r.faults)
	for _, c := range checks {
		verdict := "ok"
		if len(c.breaches) > 0 {
			verdict = fmt.Sprintf("BREACHED (%d)", len(c.breaches))
		}
		fmt.Printf("  %-58s %s: %s\n", c.name, verdict, c.counts)
		for i, b := range c.breaches {
			if i == 20 {
				fmt.Printf("      ... and %d more\n", len(c.breaches)-20)
				break
			}
			fmt.Printf("      %s\n", b)
		}
		if len(c.breaches) > 0 {
			t.Errorf("%s: %d breaches", c.name, len(c.breaches))
		}
	}
	fmt.Println()
}

// check is one invariant's outcome: what it counted, and each breach.
type check struct {
	name     string
	counts   string
	breaches []string
}

func (c *check) breach(format string, args ...any) {
	c.breaches = append(c.breaches, fmt.Sprintf(format, args...))
}

// faultLog is the faults injected, in order.
type faultLog struct {
	mu    sync.Mutex
	lines []string
	count map[string]int
}

func (f *faultLog) add(at time.Duration, what string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	line := fmt.Sprintf("    %6s %s", at.Round(time.Second), what)
	fmt.Println(line)
	f.lines = append(f.lines, line)
	if f.count == nil {
		f.count = map[string]int{}
	}
	f.count[strings.Fields(what)[0]]++
}

func (f *faultLog) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.lines, "\n")
}
