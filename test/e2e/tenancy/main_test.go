// Package tenancy tests the web UI with the rest of the system, each
// component a process of the built binary as a deployment runs it, each
// as its service account of config/default: a person's flow from sign-up
// to a watched folder, a connection's test by the manager as its page
// shows it, the file browser and share links through the gateway, what
// the worker does with watches and transfers made in the UI, the Activity
// page, and the isolation matrix, one tenant against another
// (TestIsolation). The web UI's own tests, of the UI alone, are in
// webui/.
package tenancy

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testwebui"
	"github.com/sftpgate/sftpgate/test/framework"
)

// The test kit's, as every test package has them.
var must = testkit.Must

// maxRequestsPerNamespace is the gateway's bound, and the others the
// worker's: small, so that the isolation test's attacker can fill them.
const (
	maxRequestsPerNamespace = 4
	maxUploadsPerNamespace  = 5
	maxWatchesPerNamespace  = 3
	// maxWatchTransfersPerNamespace bounds the Transfers watches keep.
	maxWatchTransfersPerNamespace = 2
	maxTransfersPerNamespace      = 2
	// statePerAccount is what sftpgate may store for an account (gateway
	// and worker): a few uploads with large metadata fill it.
	statePerAccount = 16 << 10
)

// flags are what the tests need of the components beside their defaults.
var flags = map[string][]string{
	// Four connection tests at once (the default is 8): fewer than the
	// isolation test's attacker hangs.
	"manager": {"--max-concurrent-tests=4"},
	"gateway": {"--idle-timeout=1m", "--max-body-bytes=1048576", "--max-upload-bytes=67108864", "--request-timeout=30s",
		// Small, so that the isolation test's attacker can fill them.
		"--memory-budget=8Mi", "--max-requests-per-namespace=" + strconv.Itoa(maxRequestsPerNamespace), "--large-transfer-share=0.2",
		"--max-uploads-per-namespace=" + strconv.Itoa(maxUploadsPerNamespace), "--max-state-bytes-per-account=" + strconv.Itoa(statePerAccount)},
	// Statuses written at once, expired uploads swept twice a second, a
	// replica's work taken over within seconds.
	"worker": {"--lease-duration=3s", "--upload-sweep-interval=500ms", "--write-interval=200ms", "--poll-time-interval=1ms",
		"--max-state-bytes-per-account=" + strconv.Itoa(statePerAccount),
		"--max-watches-per-namespace=" + strconv.Itoa(maxWatchesPerNamespace),
		"--max-watch-transfers-per-namespace=" + strconv.Itoa(maxWatchTransfersPerNamespace),
		"--max-transfers-per-namespace=" + strconv.Itoa(maxTransfersPerNamespace),
		"--max-transfer-streams=4", "--max-transfer-streams-per-namespace=2"},
	// The tests make many more accounts and log-ins than the defaults
	// leave room for; envtest runs no quota controller, so a deleted
	// object stays counted against its account, and the isolation test
	// makes many watches.
	"webui": {"--auth-per-minute=1000", "--max-watches-per-account=100", "--max-account-watches-total=0", "--max-account-expectations-total=0"},
}

var (
	// sys is the system under test: the manager, a gateway, a worker and
	// the web UI.
	sys *framework.System
	// k8s is an administrator's client: what tenants' owners apply with
	// kubectl, and what the tests read.
	k8s        client.Client
	uiURL      string
	gatewayURL string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	var err error
	sys, err = framework.Start(context.Background(), framework.Options{Gateways: 1, Workers: 1, WebUI: true, ServiceAccounts: true, Flags: flags})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer sys.Stop()
	k8s, uiURL, gatewayURL = sys.Client, sys.WebUI.URL, sys.Gateways[0].URL
	code := m.Run()
	if code == 0 && flag.Lookup("test.run").Value.String() == "" && !testing.Short() {
		// The whole package ran: it walked every page of the web UI.
		missing, err := testwebui.Unwalked("../../../webui/internal/web/templates")
		if err != nil || len(missing) > 0 {
			fmt.Fprintf(os.Stderr, "no test checked a page of these templates (testwebui.CheckPage): %v %v\n", missing, err)
			code = 1
		}
	}
	if code != 0 {
		for _, p := range sys.Processes() {
			fmt.Fprintf(os.Stderr, "%s's log ends:\n%s\n", p.Name, p.LogTail(30))
		}
	}
	return code
}

// What the tests know of sftpgate as its users do, from its docs: they
// import none of its components.
const (
	// audience is the gateway's --audience by default (docs/gateway.md).
	audience = "sftpgate.dev"
	// rangedFile is the size from which the worker copies a file in
	// ranges, each on sessions of its own (docs/transfer.md).
	rangedFile = 64 << 20
	// labelFilesKey marks the file browser's own key (docs/webui.md).
	labelFilesKey = "sftpgate.dev/webui-files"
)

// accountUser is the user a web UI account's person is to RBAC, whom a
// team's RoleBindings name (docs/webui.md).
func accountUser(email string) string { return "sftpgate:account:" + email }

// newClient is a person at the web UI, not yet signed up.
func newClient(t *testing.T) *testwebui.Client { return testwebui.New(t, uiURL) }
