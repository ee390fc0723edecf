package worker_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/internal/egress"
	"github.com/sftpgate/sftpgate/worker"
)

// TestWorkerMetrics: a replica's metrics say it is a member, how many
// items of each kind it runs, and what it asked of the API server: what
// the alerts of config/prometheus read. Not parallel: a replica of a
// worker namespace of its own.
func TestWorkerMetrics(t *testing.T) {
	ctx := context.Background()
	const ns = "sftpgate-metrics-test"
	must(t, testcluster.EnsureNamespace(ctx, restConfig, ns))
	w, err := worker.New(restConfig, worker.Options{Namespace: ns, Identity: "m", Networks: egress.Networks{DeniedNetworks: testcluster.LoopbackNetworks},
		LeaseDuration: 3 * time.Second, MetricsAddr: "0", ProbeAddr: "0"})
	must(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Start(runCtx) }()
	defer func() { cancel(); <-done }()
	srv := httptest.NewServer(w.MetricsHandler(false))
	defer srv.Close()
	var page string
	eventually(t, "the replica's metrics say it is a member and name its kinds", func() bool {
		resp, err := http.Get(srv.URL + "/metrics")
		must(t, err)
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		must(t, err)
		page = string(body)
		return strings.Contains(page, "sftpgate_worker_member_live 1") && strings.Contains(page, `sftpgate_worker_tasks{kind="watch"}`) &&
			strings.Contains(page, `sftpgate_worker_tasks{kind="expectation"}`) && strings.Contains(page, "rest_client_requests_total{")
	})
}
