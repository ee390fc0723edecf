package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/procs"
	"github.com/sftpgate/sftpgate/hack/fixtures/testhttp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsink"
	"github.com/sftpgate/sftpgate/worker/expectations"
)

const (
	// The load: expectations in namespaces of expectationsPerNamespace,
	// on expectationReplicas worker replicas, each a window a minute due
	// a minute after it opens, listed every expectationPoll. Half get
	// their file each window (Met), half never (Missed).
	benchExpectations        = 1000
	expectationsPerNamespace = 10
	expectationReplicas      = 3
	expectationPoll          = 10 * time.Second
	// expectationWindows is how many whole windows are measured, after
	// the first (which opens while the expectations start).
	expectationWindows = 3
)

// TestBenchmarkExpectations measures a thousand expectations across a
// hundred namespaces on three worker replicas: the replicas' CPU and
// memory, and how long after a deadline a missed window's event reaches
// the sink.
func TestBenchmarkExpectations(t *testing.T) {
	binary := os.Getenv("SFTPGATE_BENCH_BINARY")
	if binary == "" {
		t.Fatal("run it with make bench, which builds the binary it measures")
	}
	namespaces := benchExpectations / expectationsPerNamespace
	r := startRig(t, binary, "expect-0", map[string]string{"box-0": ""}, io.Discard)
	for n := 1; n < namespaces; n++ {
		r.addTenant(t, fmt.Sprintf("expect-%d", n), r.sshd, map[string]string{fmt.Sprintf("box-%d", n): ""})
	}
	for i := range benchExpectations {
		fill(t, r.sshd, fmt.Sprintf("e-%04d", i), 0)
	}
	sink := testsink.Start(t)
	var pids []int
	for i := range expectationReplicas {
		w := r.startWorker(t, binary, fmt.Sprintf("w%d", i), "--metrics-address="+testhttp.FreeAddr(t))
		pids = append(pids, w.Process.Pid)
	}
	var all []*v1alpha1.FileExpectation
	for i := range benchExpectations {
		n := i / expectationsPerNamespace
		e := &v1alpha1.FileExpectation{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("expect-%d", n), Name: fmt.Sprintf("e-%04d", i)},
			Spec: v1alpha1.FileExpectationSpec{
				ConnectionRef: v1alpha1.ConnectionReference{Name: fmt.Sprintf("box-%d", n)}, Path: fmt.Sprintf("/e-%04d", i),
				Files:        v1alpha1.ExpectedFiles{Include: []string{"report-*.csv"}},
				Schedule:     v1alpha1.ExpectationSchedule{Opens: "* * * * *", Deadline: metav1.Duration{Duration: time.Minute}},
				PollInterval: &metav1.Duration{Duration: expectationPoll}, Stability: v1alpha1.Stability{MinAge: &metav1.Duration{}},
				Sink: &v1alpha1.Destination{URI: sink.URL}}}
		r.create(t, e)
		all = append(all, e)
	}
	started := time.Now()
	waitExpecting(t, r.k8s, all)
	settled := time.Since(started)

	// From the next minute on: the files of the even expectations come
	// 20 seconds into each window.
	from := time.Now().Truncate(time.Minute).Add(time.Minute)
	until := from.Add(expectationWindows * time.Minute)
	time.Sleep(time.Until(from))
	cpu := make([]time.Duration, len(pids))
	for i, pid := range pids {
		if err := resetPeakRSS(pid); err != nil {
			t.Fatal(err)
		}
		cpu[i] = procs.TreeCPUTime(pid)
	}
	for w := range expectationWindows {
		time.Sleep(time.Until(from.Add(time.Duration(w)*time.Minute + 20*time.Second)))
		for i := 0; i < benchExpectations; i += 2 {
			name := filepath.Join(r.sshd.Dir, fmt.Sprintf("e-%04d", i), fmt.Sprintf("report-%d.csv", w))
			if err := os.WriteFile(name, []byte("id,total\n1,42\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(time.Until(until))
	var cores float64
	var peak int64
	for i, pid := range pids {
		cores += (procs.TreeCPUTime(pid) - cpu[i]).Seconds() / until.Sub(from).Seconds()
		rss, err := peakRSS(pid)
		if err != nil {
			t.Fatal(err)
		}
		peak = max(peak, rss)
	}

	// The events of the measured windows: one Missed of each odd
	// expectation's and one Met of each even one's per window, each once.
	want := benchExpectations / 2 * expectationWindows
	var delays []time.Duration
	var met int
	deadline := time.Now().Add(2 * time.Minute)
	for {
		delays, met = delays[:0], 0
		ids := map[string]bool{}
		for _, got := range sink.Taken() {
			var d expectations.Data
			if err := json.Unmarshal(got.Event.Data(), &d); err != nil {
				t.Fatal(err)
			}
			if d.Window.Opens.Before(from) || !d.Window.Opens.Before(until) {
				continue
			}
			if ids[got.Event.ID()] {
				t.Fatalf("the event %s twice", got.Event.ID())
			}
			ids[got.Event.ID()] = true
			switch d.Outcome {
			case string(v1alpha1.OutcomeMissed):
				delays = append(delays, got.At.Sub(d.Window.Deadline))
			case string(v1alpha1.OutcomeMet):
				met++
			default:
				t.Fatalf("%s: %s", d.Expectation, d.Outcome)
			}
		}
		if len(delays) == want && met == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d missed and %d met events of the measured windows, want %d each", len(delays), met, want)
		}
		time.Sleep(time.Second)
	}
	slices.Sort(delays)
	q := func(p int) float64 { return delays[(len(delays)-1)*p/100].Seconds() }

	fmt.Printf("\n%-62s %12s %12s\n", fmt.Sprintf("%d expectations, %d namespaces, %d replicas", benchExpectations, namespaces, expectationReplicas), "measured", "target")
	fmt.Printf("%-62s %12.0f %12s\n", "created → all Ready (s)", settled.Seconds(), "")
	fmt.Printf("%-62s %12.3f %12s\n", fmt.Sprintf("CPU of the replicas together, a window a minute, %s polls (cores)", expectationPoll), cores, "")
	fmt.Printf("%-62s %12.0f %12s\n", "peak RSS of a replica meanwhile (MB)", float64(peak)/1e6, "")
	fmt.Printf("%-62s %12s %12s\n", "deadline → missed event received, p50 / p99 / max (s)",
		fmt.Sprintf("%.1f / %.1f / %.1f", q(50), q(99), delays[len(delays)-1].Seconds()), fmt.Sprintf("p99 <= %.0f", (expectationPoll+time.Second).Seconds()))
	fmt.Printf("%-62s %12d %12s\n", "events of the measured windows (missed and met, each once)", len(delays)+met, fmt.Sprint(2*want))
}

// waitExpecting waits until every expectation is Ready, having listed
// its folder.
func waitExpecting(t *testing.T, c client.Client, all []*v1alpha1.FileExpectation) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(5 * time.Second) {
		var list v1alpha1.FileExpectationList
		if err := c.List(context.Background(), &list, client.Limit(int64(len(all)))); err != nil {
			t.Fatal(err)
		}
		ready, why := 0, map[string]int{}
		for _, e := range list.Items {
			if c := meta.FindStatusCondition(e.Status.Conditions, v1alpha1.ConditionReady); c != nil && c.Status == metav1.ConditionTrue {
				ready++
			} else if c != nil {
				why[c.Reason]++
			}
		}
		if ready == len(all) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d expectations Ready; the others: %v", ready, len(all), why)
		}
	}
}
