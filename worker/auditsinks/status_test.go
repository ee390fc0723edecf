package auditsinks

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/audit"
)

// TestConditions: a sink is Ready only while nothing says otherwise; a
// delivery that fails says so, and records waiting past StuckAfter with
// no failure to blame say the delivery is stuck, and since when.
func TestConditions(t *testing.T) {
	r := &Runner{Limits: Limits{StuckAfter: 10 * time.Minute}}
	old := time.Now().Add(-11 * time.Minute)
	for _, c := range []struct {
		name    string
		f       facts
		failing string
		want    string
	}{
		{"delivering", facts{}, "", "True/" + v1alpha1.ReasonDelivering},
		{"pending, recent", facts{pending: 3, oldestPending: time.Now().Add(-time.Minute)}, "", "True/" + v1alpha1.ReasonDelivering},
		{"pending past the bound", facts{pending: 3, oldestPending: old}, "", "False/" + v1alpha1.ReasonDeliveryStuck},
		{"failing", facts{pending: 3, oldestPending: old}, "503", "False/" + v1alpha1.ReasonDeliveryFailing},
		{"invalid", facts{invalid: "no", oldestPending: old}, "", "False/" + v1alpha1.ReasonInvalidSpec},
	} {
		s := &v1alpha1.AuditSink{}
		setConditions(s, c.f, &outbox{r: r, failing: c.failing})
		ready := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
		if got := string(ready.Status) + "/" + ready.Reason; got != c.want {
			t.Errorf("%s: %s (%s), want %s", c.name, got, ready.Message, c.want)
		}
	}
}

// TestBatchOf: a batch is at most maxBatch records and maxBatchBytes, but
// always at least one record, however large.
func TestBatchOf(t *testing.T) {
	c := &audit.Chains{Replica: "r"}
	small := c.Link(audit.Record{Action: "gateway.read", Namespace: "a", Result: audit.ResultOK})
	large := c.Link(audit.Record{Action: "gateway.read", Namespace: "a", Paths: slices.Repeat([]string{strings.Repeat("x", 5000)}, audit.MaxPaths)})
	for _, c := range []struct {
		records  []audit.Record
		maxBatch int
		want     int
	}{
		{slices.Repeat([]audit.Record{small}, 10), 4, 4},
		{slices.Repeat([]audit.Record{small}, 3), 100, 3},
		{slices.Repeat([]audit.Record{large}, 100), 100, maxBatchBytes / (len(large.Line()) + 1)},
		{[]audit.Record{large}, 1, 1},
	} {
		if got := len(batchOf(c.records, c.maxBatch)); got != c.want {
			t.Errorf("%d records of %d bytes, maxBatch %d: %d, want %d", len(c.records), len(c.records[0].Line()), c.maxBatch, got, c.want)
		}
	}
}
