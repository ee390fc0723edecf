package accounts

import (
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
)

// k8s is a client of the tests' control plane: what the store keeps
// lives in the API server.
var k8s client.Client

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m, testcluster.Client(&k8s))) }
