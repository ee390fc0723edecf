package transfer

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

// TestTarget: a folder's files keep their paths below it; listed files go
// under their own names.
func TestTarget(t *testing.T) {
	for _, tc := range []struct{ base, path, want string }{
		{"/outgoing", "/outgoing/a.csv", "a.csv"},
		{"/outgoing", "/outgoing/2026/11/a.csv", "2026/11/a.csv"},
		{"/", "/a.csv", "a.csv"},
		{"/", "/x/a.csv", "x/a.csv"},
		{"", "/somewhere/deep/a.csv", "a.csv"},
		{"/outgoing/", "/outgoing/sub/a.csv", "sub/a.csv"},
		{"/out", "/out/x", "x"},
	} {
		p := &Plan{Base: tc.base}
		if got := p.Target(&File{Path: tc.path}); got != tc.want {
			t.Errorf("%s in %q: %q, want %q", tc.path, tc.base, got, tc.want)
		}
	}
}

// TestPlanEncoding: a plan comes back as it was stored.
func TestPlanEncoding(t *testing.T) {
	p := &Plan{Base: "/in", Outcome: "Succeeded"}
	for i := range 1000 {
		p.Files = append(p.Files, File{Path: "/in/f", Size: int64(i), ModTime: 1, State: FileState(i % 4), Tries: 2, Reason: "r"})
	}
	p.Files[999].Ranges = []int64{64 << 20, 3 << 20, 0, 1}
	blob, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodePlan(blob)
	if err != nil {
		t.Fatal(err)
	}
	if back.Base != p.Base || back.Outcome != p.Outcome || len(back.Files) != 1000 || !reflect.DeepEqual(back.Files[999], p.Files[999]) {
		t.Errorf("decoded %+v", back.Files[999])
	}
	if c := back.Count(); c.Total != 1000 || c.Done != 250 || c.Failed != 250 || back.Finished() {
		t.Errorf("counts %+v", c)
	}
	if _, err := DecodePlan([]byte("not gzip")); err == nil {
		t.Error("garbage decoded")
	}
}

// BenchmarkPlan: what a save (Encode) and a load (DecodePlan) of a plan
// of a transfer part-way through allocate, and the bytes stored.
func BenchmarkPlan(b *testing.B) {
	for _, files := range []int{1, 100, 10_000} {
		p := &Plan{Base: "/outgoing"}
		for i := range files {
			p.Files = append(p.Files, File{Path: fmt.Sprintf("/outgoing/partner-%02d/invoice-%07d.csv", i%7, i),
				Size: 1024 + int64(i*7919)%65536, ModTime: 1_700_000_000 + int64(i)*61, State: FileState(i % 2)})
		}
		blob, err := p.Encode()
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("Encode/files=%d", files), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Encode(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(blob)), "stored-bytes")
		})
		b.Run(fmt.Sprintf("Decode/files=%d", files), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodePlan(blob); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	for tries, want := range map[int32]time.Duration{1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second, 20: 10 * time.Minute} {
		if got := Backoff(10*time.Second, tries); got != want {
			t.Errorf("try %d: %s, want %s", tries, got, want)
		}
	}
}
