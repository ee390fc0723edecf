package pool

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// opBuckets bound, in seconds, a connection's operation latency
// histogram: few, since every connection a replica serves has its own
// series.
var opBuckets = [...]float64{.0025, .01, .025, .1, .25, 1, 2.5, 10}

// opStats are a pool's operations: those its server answered (whatever
// it said) and those that failed without an answer (no session, one
// that broke, a timeout), and how long each took from its wait for a
// session to its end. A caller that left while waiting is neither.
type opStats struct {
	answered, failed atomic.Uint64
	// under counts the operations by the first bound each came under;
	// the last, those over every bound.
	under    [len(opBuckets) + 1]atomic.Uint64
	sumNanos atomic.Int64
}

func (s *opStats) observe(d time.Duration, answered bool) {
	if answered {
		s.answered.Add(1)
	} else {
		s.failed.Add(1)
	}
	i := 0
	for i < len(opBuckets) && d.Seconds() > opBuckets[i] {
		i++
	}
	s.under[i].Add(1)
	s.sumNanos.Add(int64(d))
}

// opTotals are the opStats of a connection's pools, added up.
type opTotals struct {
	answered, failed uint64
	under            [len(opBuckets) + 1]uint64
	sum              time.Duration
}

func (t *opTotals) add(s *opStats) {
	t.answered += s.answered.Load()
	t.failed += s.failed.Load()
	for i := range s.under {
		t.under[i] += s.under[i].Load()
	}
	t.sum += time.Duration(s.sumNanos.Load())
}

// metrics are the totals as a connection's operations counter (by
// result) and latency histogram.
func (t *opTotals) metrics(ops, latency *prometheus.Desc, labels ...string) []prometheus.Metric {
	cumulative := make(map[float64]uint64, len(opBuckets))
	var n uint64
	for i, bound := range opBuckets {
		n += t.under[i]
		cumulative[bound] = n
	}
	n += t.under[len(opBuckets)]
	return []prometheus.Metric{
		prometheus.MustNewConstMetric(ops, prometheus.CounterValue, float64(t.answered), append(labels, "answered")...),
		prometheus.MustNewConstMetric(ops, prometheus.CounterValue, float64(t.failed), append(labels, "failed")...),
		prometheus.MustNewConstHistogram(latency, n, t.sum.Seconds(), cumulative, labels...),
	}
}
