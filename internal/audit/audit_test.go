package audit

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// chainOf links n records of each namespace, from goroutines at once, and
// closes the chains; it returns them as JSON Lines read back.
func chainOf(t *testing.T, n int, namespaces ...string) []Record {
	t.Helper()
	c := &Chains{Replica: "gateway-abc-1"}
	var (
		mu  sync.Mutex
		out bytes.Buffer
		wg  sync.WaitGroup
	)
	for _, ns := range namespaces {
		for i := range n {
			wg.Go(func() {
				r := c.Link(Record{Action: "gateway.write", Actor: Actor{Kind: ActorKey, Name: "k-1"}, Namespace: ns,
					Connection: "reports", Paths: []string{fmt.Sprintf("/in/<%d>&.csv", i)}, Bytes: int64(i), Result: ResultOK,
					Client: "10.0.0.1", RequestID: fmt.Sprint(i)})
				mu.Lock()
				fmt.Fprintln(&out, r)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	for _, r := range c.Close() {
		fmt.Fprintln(&out, r)
	}
	records, _, err := Read(&out)
	if err != nil {
		t.Fatal(err)
	}
	return records
}

// TestChainsVerify: records read back in any order verify whole; a
// record removed shows as missing, a record changed (its hash kept, or
// computed anew) as broken; repeats of a record are no gap.
func TestChainsVerify(t *testing.T) {
	records := chainOf(t, 50, "team-a", "team-b")
	reports := Verify(records)
	if len(reports) != 2 {
		t.Fatalf("%d chains, want 2", len(reports))
	}
	for _, r := range reports {
		if !r.Whole() || !r.Closed || r.Records != 51 || r.Last != 51 {
			t.Errorf("%s: %+v", r.Namespace, r)
		}
	}

	a := slices.DeleteFunc(slices.Clone(records), func(r Record) bool { return r.Namespace != "team-a" })
	slices.Reverse(a)
	removed := slices.DeleteFunc(slices.Clone(a), func(r Record) bool { return r.Seq == 10 || r.Seq == 11 })
	if r := Verify(removed)[0]; r.Whole() || !slices.Equal(r.Missing, []Gap{{10, 11}}) || len(r.Broken) != 0 {
		t.Errorf("two removed: %+v", r)
	}
	if r := Verify(append(slices.Clone(a), a[3], a[7]))[0]; !r.Whole() {
		t.Errorf("repeats: %+v", r)
	}

	changed := slices.Clone(a)
	i := slices.IndexFunc(changed, func(r Record) bool { return r.Seq == 20 })
	changed[i].Paths = []string{"/elsewhere"}
	if r := Verify(changed)[0]; !slices.Equal(r.Broken, []uint64{20}) {
		t.Errorf("a record changed: %+v", r)
	}
	changed[i].Hash = changed[i].Sum() // its hash made anew: the next record's link breaks
	if r := Verify(changed)[0]; !slices.Equal(r.Broken, []uint64{21}) {
		t.Errorf("a record changed and hashed anew: %+v", r)
	}

	tail := slices.DeleteFunc(slices.Clone(a), func(r Record) bool { return r.Action == ActionClosed })
	if r := Verify(tail)[0]; r.Closed || !r.Whole() {
		t.Errorf("a chain whose replica ended: %+v", r)
	}
	late := slices.DeleteFunc(slices.Clone(a), func(r Record) bool { return r.Seq < 5 })
	if r := Verify(late)[0]; r.Whole() || r.First != 5 {
		t.Errorf("a chain held from its fifth record: %+v", r)
	}
}

// TestRecordForm: the hash covers the record's JSON with keys sorted and
// no HTML escaping, times in UTC; a line carries no secret field.
func TestRecordForm(t *testing.T) {
	c := &Chains{Replica: "r", Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600)) }}
	r := c.Link(Record{Action: "webui.login", Actor: Actor{Kind: ActorAccount, Name: "a&b@example.com"}, Namespace: "n", Result: "invalid_credentials"})
	line := r.String()
	if want := `{"action":"webui.login","actor":{"kind":"Account","name":"a&b@example.com"},"hash":"` + r.Hash +
		`","namespace":"n","prev":"","replica":"r","result":"invalid_credentials","seq":1,"time":"2026-01-02T02:04:05.000000006Z"}`; line != want {
		t.Errorf("line\n%s\nwant\n%s", line, want)
	}
	if strings.Contains(line, `\u0026`) {
		t.Error("HTML-escaped")
	}
	records, _, err := Read(strings.NewReader(line + "\n\n"))
	if err != nil || len(records) != 1 || records[0].Sum() != r.Hash {
		t.Fatalf("read back: %v %v", records, err)
	}
}

// TestVerifyCommand: what sftpgate audit verify prints, and that it fails
// unless every chain is whole.
func TestVerifyCommand(t *testing.T) {
	records := chainOf(t, 5, "team-a")
	var in bytes.Buffer
	for _, r := range records {
		if r.Seq != 3 {
			fmt.Fprintln(&in, r)
		}
	}
	var out bytes.Buffer
	err := verify(&out, &in)
	if err == nil || out.String() != "team-a gateway-abc-1: 5 records, 1 to 6: missing 3; closed\n" {
		t.Errorf("%v\n%s", err, out.String())
	}
}

// TestRecentReport: a stored trail's chains are checked from their first
// record held: what lies before, missing or named by a drop record, is
// not the trail's to show; a gap after it still fails.
func TestRecentReport(t *testing.T) {
	records := chainOf(t, 5, "team-a") // seq 1 to 6, the last closing it
	drop := (&Chains{Replica: "worker-1"}).Link(Record{Action: ActionDropped, Namespace: "team-a", Result: ResultOK,
		Lost: []Span{{Replica: "gateway-abc-1", From: 1, To: 1}}})
	var held []Record
	for _, r := range records {
		if r.Seq >= 3 {
			held = append(held, r)
		}
	}
	var out bytes.Buffer
	if err := WriteReport(&out, append(held, drop), Unreadable{}, true); err != nil ||
		!strings.Contains(out.String(), "gateway-abc-1: 4 records, 3 to 6: from 3 (those before were removed); whole; closed") {
		t.Errorf("the recent part: %v\n%s", err, out.String())
	}
	if err := WriteReport(&out, append(held, drop), Unreadable{}, false); err == nil {
		t.Error("the recent part, read as a whole trail, passes")
	}
	if err := WriteReport(&out, append(held[:1], held[2:]...), Unreadable{}, true); err == nil {
		t.Error("a gap after the first record held passes")
	}
}
