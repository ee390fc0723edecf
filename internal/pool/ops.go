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

// opStats are a connection's operations, shared by its pools (one per
// version of it): those its server answered (whatever it said) and those
// that failed without an answer (a dial that failed, a session that
// broke, a timeout), and how long each but streams took, from its wait
// for a session to its end (a stream's time is its file's size and its
// client's pace, not the server's). A refusal of the pool's own bounds
// (busy, queue full), a connection changed meanwhile and a caller that
// left while waiting are not counted.
type opStats struct {
	answered, failed atomic.Uint64
	// under counts the operations by the first bound each came under;
	// the last, those over every bound.
	under    [len(opBuckets) + 1]atomic.Uint64
	sumNanos atomic.Int64
}

// opResult is how an operation ended, for opStats.
type opResult int

const (
	uncounted opResult = iota
	answered
	failed
)

func (s *opStats) observe(r opResult, stream bool, d time.Duration) {
	switch r {
	case answered:
		s.answered.Add(1)
	case failed:
		s.failed.Add(1)
	default:
		return
	}
	if stream {
		return
	}
	i := 0
	for i < len(opBuckets) && d.Seconds() > opBuckets[i] {
		i++
	}
	s.under[i].Add(1)
	s.sumNanos.Add(int64(d))
}

// metrics are the stats as the connection's operations counter (by
// result) and latency histogram.
func (s *opStats) metrics(ops, latency *prometheus.Desc, labels ...string) []prometheus.Metric {
	cumulative := make(map[float64]uint64, len(opBuckets))
	var n uint64
	for i, bound := range opBuckets {
		n += s.under[i].Load()
		cumulative[bound] = n
	}
	n += s.under[len(opBuckets)].Load()
	return []prometheus.Metric{
		prometheus.MustNewConstMetric(ops, prometheus.CounterValue, float64(s.answered.Load()), append(labels, "answered")...),
		prometheus.MustNewConstMetric(ops, prometheus.CounterValue, float64(s.failed.Load()), append(labels, "failed")...),
		prometheus.MustNewConstHistogram(latency, n, time.Duration(s.sumNanos.Load()).Seconds(), cumulative, labels...),
	}
}
