package expect

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// FuzzTracker: a partner's server lists whatever it likes (names of any
// bytes, any sizes, modification times far past or future, the same name
// twice); the tracker never panics, keeps at most MaxFiles, decides each
// window's outcomes in an order a window may have them, and its state
// survives a store and a load.
func FuzzTracker(f *testing.F) {
	f.Add("report.csv\x00pay.xml", int64(10), int64(0), int64(3600))
	f.Add("\xff\xfe.csv\x00\xff\xfe.csv", int64(-1), int64(-1<<62), int64(1<<62))
	f.Add(strings.Repeat("a.csv\x00", 50), int64(1<<40), int64(86400), int64(-86400))
	f.Fuzz(func(t *testing.T, names string, size, mod, step int64) {
		w := daily(t, "0 0 * * *", "UTC", 6*time.Hour)
		k := &Tracker{Windows: w, Rule: Rule{Globs: []string{"*.csv", "*"}, MinCount: 2, MinSize: 1, PickUpWithin: time.Hour},
			Settle: time.Minute, Hold: 2 * time.Minute}
		now := day.Add(-time.Hour)
		var decided []Decision
		for i := range 6 {
			var listing []Entry
			for j, n := range strings.Split(names, "\x00") {
				listing = append(listing, Entry{Name: n, Size: size + int64(j), ModTime: time.Unix(mod, 0).Add(time.Duration(i) * time.Hour)})
			}
			if i%2 == 1 {
				listing = listing[:len(listing)/2]
			}
			k.Observe(listing, now, now)
			decided = append(decided, k.Decide(now, day.Add(-2*time.Hour))...)
			now = now.Add(time.Duration(step%int64(48*time.Hour)) + 7*time.Hour)
		}
		if len(k.State.Files) > MaxFiles {
			t.Fatalf("%d files kept", len(k.State.Files))
		}
		last := map[int64]Outcome{}
		for _, d := range decided {
			was := last[d.Window.Opens.Unix()]
			ok := was == "" && (d.Outcome == Met || d.Outcome == Missed || d.Outcome == NotProcessed) ||
				was == Missed && d.Outcome == Late || was == Late && d.Outcome == NotProcessed
			if !ok {
				t.Fatalf("%s after %q in a window", d.Outcome, was)
			}
			last[d.Window.Opens.Unix()] = d.Outcome
		}
		blob, err := json.Marshal(k.State)
		if err != nil {
			t.Fatal(err)
		}
		var again State
		if err := json.Unmarshal(blob, &again); err != nil {
			t.Fatal(err)
		}
	})
}
