package auditstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/auditstore"
)

var k8s client.Client

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, testcluster.Client(&k8s)))
}

// failingCreate fails the at-th Create: before it is made, or (made)
// with its answer lost.
type failingCreate struct {
	client.Client
	at, n int
	made  bool
}

func (f *failingCreate) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if f.n++; f.n != f.at {
		return f.Client.Create(ctx, obj, opts...)
	}
	if f.made {
		if err := f.Client.Create(ctx, obj, opts...); err != nil {
			return err
		}
	}
	return errors.New("injected: the API server's answer was lost")
}

// TestKeepFailsAnywhere: a store of records large enough to be split in
// several segments, failing at each of its writes (before the write is
// made, or after, its answer lost), then tried again with newer records
// added (as the trail does), stores every record once.
func TestKeepFailsAnywhere(t *testing.T) {
	auditstore.SetMaxSegment(t, 8<<10)
	ns := testkit.Namespace(t, k8s, "audit-keep-")
	ctx := context.Background()
	for at := 1; at <= 4; at++ {
		for _, made := range []bool{false, true} {
			t.Run(fmt.Sprintf("write %d, made %v", at, made), func(t *testing.T) {
				tenant := fmt.Sprintf("tenant-%d-%v", at, made)
				chains := &audit.Chains{Replica: "gateway/keep/" + tenant}
				var records []audit.Record
				link := func(n int) {
					for range n {
						records = append(records, chains.Link(audit.Record{Action: "gateway.write", Namespace: tenant,
							Paths: noise(2), Result: audit.ResultOK}))
					}
				}
				link(120)
				store := &auditstore.Store{Client: &failingCreate{Client: k8s, at: at, made: made}, Namespace: ns}
				stored, err := store.Keep(ctx, tenant, records)
				if err == nil {
					t.Fatalf("stored %d with no failure: the records fit in fewer than %d segments", stored, at)
				}
				link(15) // held since, stored with what is given back
				rest, err := store.Keep(ctx, tenant, records[stored:])
				if err != nil || stored+rest != len(records) {
					t.Fatalf("tried again: %d and %d of %d stored: %v", stored, rest, len(records), err)
				}
				var seqs []uint64
				segments, err := store.List(ctx, tenant)
				testkit.Must(t, err)
				for _, seg := range segments {
					read, lost, err := store.Read(ctx, seg)
					testkit.Must(t, err)
					if len(lost) > 0 || len(read) != seg.Records {
						t.Errorf("segment %s: %d records read of %d, lost %v", seg.Name, len(read), seg.Records, lost)
					}
					for _, r := range read {
						seqs = append(seqs, r.Seq)
					}
				}
				slices.Sort(seqs)
				if len(seqs) != 135 || !slices.Equal(slices.Compact(slices.Clone(seqs)), seqs) || seqs[0] != 1 || seqs[134] != 135 {
					t.Errorf("%d segments hold %v, want 1 to 135 once each", len(segments), seqs)
				}
			})
		}
	}
}

// noise is n paths of random hex, which gzip cannot shrink below half.
func noise(n int) []string {
	out := make([]string, n)
	for i := range out {
		b := make([]byte, 200)
		_, _ = rand.Read(b)
		out[i] = "/in/" + hex.EncodeToString(b)
	}
	return out
}
