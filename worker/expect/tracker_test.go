package expect

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/sftpgate/sftpgate/internal/calendar"
)

func daily(t *testing.T, expr, tz string, length time.Duration) *calendar.Windows {
	t.Helper()
	w, err := calendar.NewWindows(expr, tz, length, nil)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// clock is a test's time: hours after midnight of day (UTC).
func clock(h, m int) time.Time { return at(h, m) }

func entry(name string, mod time.Time) Entry { return Entry{Name: name, Size: 10, ModTime: mod} }

func outcomes(ds []Decision) string {
	s := ""
	for _, d := range ds {
		s += fmt.Sprintf("%s@%s ", d.Outcome, d.At.UTC().Format("01-02T15:04"))
	}
	return s
}

// TestTracker: a folder listed now and then, its windows decided, each
// outcome once, in order, by the time the rules say.
func TestTracker(t *testing.T) {
	rule := Rule{Globs: []string{"pay*.xml"}}
	begun := day.Add(-time.Hour)
	for _, c := range []struct {
		name     string
		listings []struct {
			at      time.Time
			entries []Entry
		}
		until time.Time
		want  string
	}{
		{"a file before the deadline", []struct {
			at      time.Time
			entries []Entry
		}{{clock(0, 30), nil}, {clock(1, 0), []Entry{entry("pay.xml", clock(0, 50))}}}, clock(1, 0), "Met@03-02T00:50 "},
		{"nothing, then a file late", []struct {
			at      time.Time
			entries []Entry
		}{{clock(5, 0), nil}, {clock(6, 0), nil}, {clock(7, 0), []Entry{entry("pay.xml", clock(6, 59))}}}, clock(7, 0), "Missed@03-02T06:00 Late@03-02T06:59 "},
		{"the worker down over the deadline: the file's time says it came on time", []struct {
			at      time.Time
			entries []Entry
		}{{clock(4, 0), nil}, {clock(9, 0), []Entry{entry("pay.xml", clock(5, 30))}}}, clock(9, 0), "Met@03-02T05:30 "},
		{"the worker down over the deadline: the file came after it", []struct {
			at      time.Time
			entries []Entry
		}{{clock(4, 0), nil}, {clock(9, 0), []Entry{entry("pay.xml", clock(7, 0))}}}, clock(9, 0), "Missed@03-02T06:00 Late@03-02T07:00 "},
		{"a file with an old time, moved in: it came when listed", []struct {
			at      time.Time
			entries []Entry
		}{{clock(5, 0), nil}, {clock(7, 0), []Entry{entry("pay.xml", clock(-48, 0))}}}, clock(7, 0), "Missed@03-02T06:00 Late@03-02T07:00 "},
		{"two days: missed, then met the next", []struct {
			at      time.Time
			entries []Entry
		}{{clock(3, 0), nil}, {clock(24, 0), nil}, {clock(25, 0), []Entry{entry("pay.xml", clock(24, 30))}}}, clock(25, 0), "Missed@03-02T06:00 Met@03-03T00:30 "},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := &Tracker{Windows: daily(t, "0 0 * * *", "UTC", 6*time.Hour), Rule: rule}
			var got []Decision
			for _, l := range c.listings {
				k.Observe(l.entries, l.at, l.at)
				got = append(got, k.Decide(l.at, begun)...)
			}
			got = append(got, k.Decide(c.until, begun)...)
			if s := outcomes(got); s != c.want {
				t.Errorf("decided %q, want %q", s, c.want)
			}
		})
	}
}

// TestTrackerPickUp: a file counts once picked up in time; a window
// waits for it; one not picked up is NotProcessed at its limit.
func TestTrackerPickUp(t *testing.T) {
	k := &Tracker{Windows: daily(t, "0 0 * * *", "UTC", 6*time.Hour), Rule: Rule{Globs: []string{"*.csv"}, PickUpWithin: time.Hour}}
	begun := day.Add(-time.Hour)
	k.Observe(nil, clock(0, 30), clock(0, 30))
	k.Observe([]Entry{entry("a.csv", clock(1, 0))}, clock(1, 0), clock(1, 0))
	if got := k.Decide(clock(1, 0), begun); len(got) != 0 {
		t.Fatalf("before the pick-up: %s", outcomes(got))
	}
	k.Observe(nil, clock(1, 40), clock(1, 40))
	if got := outcomes(k.Decide(clock(1, 40), begun)); got != "Met@03-02T01:40 " {
		t.Errorf("picked up: %q", got)
	}
	// The next day's file is never picked up.
	k.Observe([]Entry{entry("b.csv", clock(25, 0))}, clock(25, 0), clock(25, 0))
	if got := outcomes(k.Decide(clock(26, 0), begun)); got != "NotProcessed@03-03T02:00 " {
		t.Errorf("not picked up: %q", got)
	}
}

// TestTrackerAcrossTheClocksChange: Europe/Berlin's window from 00:00 to
// 06:00 on the night the clocks go forward ends at 06:00 summer time.
func TestTrackerAcrossTheClocksChange(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	local := func(h, m int) time.Time { return time.Date(2026, 3, 29, h, m, 0, 0, berlin) }
	for _, c := range []struct {
		came time.Time
		want string
	}{
		{local(5, 30), "Met@03-29T03:30 "},                     // 05:30 CEST
		{local(6, 30), "Missed@03-29T04:00 Late@03-29T04:30 "}, // after 06:00 CEST
	} {
		k := &Tracker{Windows: daily(t, "0 0 * * *", "Europe/Berlin", 6*time.Hour), Rule: Rule{Globs: []string{"*"}}}
		begun := local(0, 0).Add(-time.Minute)
		k.Observe(nil, local(0, 30), local(0, 30))
		k.Observe([]Entry{entry("x", c.came)}, c.came.Add(time.Minute), c.came.Add(time.Minute))
		if got := outcomes(k.Decide(c.came.Add(time.Minute), begun)); got != c.want {
			t.Errorf("a file at %s: %q, want %q", c.came.Format("15:04 MST"), got, c.want)
		}
	}
}

// TestTrackerScheduleEdited: a window under way keeps its deadline when
// the schedule changes; the next one is the new schedule's.
func TestTrackerScheduleEdited(t *testing.T) {
	k := &Tracker{Windows: daily(t, "0 0 * * *", "UTC", 6*time.Hour), Rule: Rule{Globs: []string{"*"}}}
	begun := day.Add(-time.Hour)
	k.Observe(nil, clock(1, 0), clock(1, 0))
	k.Decide(clock(1, 0), begun)
	k.Windows = daily(t, "0 12 * * *", "UTC", 2*time.Hour)
	k.Observe(nil, clock(15, 0), clock(15, 0))
	if got := outcomes(k.Decide(clock(15, 0), begun)); got != "Missed@03-02T06:00 Missed@03-02T14:00 " {
		t.Errorf("decided %q", got)
	}
}

// TestTrackerTakenOver: another replica takes the stored state over and
// decides nothing twice.
func TestTrackerTakenOver(t *testing.T) {
	windows := daily(t, "0 0 * * *", "UTC", 6*time.Hour)
	rule := Rule{Globs: []string{"*"}}
	begun := day.Add(-time.Hour)
	first := &Tracker{Windows: windows, Rule: rule}
	first.Observe(nil, clock(5, 0), clock(5, 0))
	first.Observe(nil, clock(6, 0), clock(6, 0))
	if got := outcomes(first.Decide(clock(6, 0), begun)); got != "Missed@03-02T06:00 " {
		t.Fatalf("the first replica: %q", got)
	}
	stored, err := json.Marshal(first.State)
	if err != nil {
		t.Fatal(err)
	}
	second := &Tracker{Windows: windows, Rule: rule}
	if err := json.Unmarshal(stored, &second.State); err != nil {
		t.Fatal(err)
	}
	second.Observe([]Entry{entry("x", clock(6, 30))}, clock(7, 0), clock(7, 0))
	if got := outcomes(second.Decide(clock(7, 0), begun)); got != "Late@03-02T06:30 " {
		t.Errorf("the second replica: %q, want the Late alone", got)
	}
}

// TestTrackerBounded: a folder that fills keeps MaxFiles of a window.
func TestTrackerBounded(t *testing.T) {
	k := &Tracker{Windows: daily(t, "0 0 * * *", "UTC", 6*time.Hour), Rule: Rule{Globs: []string{"*"}, MinCount: MaxFiles + 1}}
	var many []Entry
	for i := range 3 * MaxFiles {
		many = append(many, entry(fmt.Sprint(i), clock(1, 0)))
	}
	k.Observe(many, clock(1, 0), clock(1, 0))
	if n := len(k.State.Files); n != MaxFiles {
		t.Errorf("%d files kept, want %d", n, MaxFiles)
	}
}

// TestTrackerTurnover: files that come and are picked up, far more than
// MaxFiles in a window, keep the state bounded and the next window's
// file counted; a file of the same name the next day is a new one.
func TestTrackerTurnover(t *testing.T) {
	k := &Tracker{Windows: daily(t, "0 0 * * *", "UTC", 6*time.Hour), Rule: Rule{Globs: []string{"*.csv"}, MinCount: 2}}
	begun := day.Add(-time.Hour)
	var got []Decision
	for i := range 3 * MaxFiles {
		at := clock(1, 0).Add(time.Duration(i) * time.Second)
		k.Observe([]Entry{entry(fmt.Sprintf("f%d.csv", i), at)}, at, at)
		got = append(got, k.Decide(at, begun)...)
		if len(k.State.Files) > MaxFiles {
			t.Fatalf("%d files kept", len(k.State.Files))
		}
	}
	// report.csv comes and is picked up; the next day's has its name.
	k.Observe([]Entry{entry("report.csv", clock(22, 0))}, clock(22, 30), clock(22, 30))
	k.Observe(nil, clock(23, 30), clock(23, 30))
	k.Observe([]Entry{entry("report.csv", clock(24, 10)), entry("other.csv", clock(24, 20))}, clock(24, 30), clock(24, 30))
	got = append(got, k.Decide(clock(24, 30), begun)...)
	if s := outcomes(got); s != "Met@03-02T01:00 Met@03-03T00:20 " {
		t.Errorf("decided %q", s)
	}
}

// TestTrackerFileLeftInPlace: a file never picked up is not the next
// windows' file; one rewritten under its name is a new one.
func TestTrackerFileLeftInPlace(t *testing.T) {
	k := &Tracker{Windows: daily(t, "0 0 * * *", "UTC", 6*time.Hour), Rule: Rule{Globs: []string{"*.csv"}}}
	begun := day.Add(-time.Hour)
	var got []Decision
	list := func(at time.Time, entries ...Entry) {
		k.Observe(entries, at, at)
		got = append(got, k.Decide(at, begun)...)
	}
	list(clock(0, 30))
	list(clock(1, 0), entry("report.csv", clock(0, 50)))
	for h := 2; h < 72; h += 2 {
		list(clock(h, 0), entry("report.csv", clock(0, 50)))
	}
	list(clock(73, 0), entry("report.csv", clock(72, 40))) // rewritten on the fourth day
	if s := outcomes(got); s != "Met@03-02T00:50 Missed@03-03T06:00 Missed@03-04T06:00 Met@03-05T00:40 " {
		t.Errorf("decided %q", s)
	}
}

// TestTrackerBaseline: the first listing's files were there before,
// unless their times say they came in the window under way; a size the
// rule refuses keeps its file from counting, and from coming again.
func TestTrackerBaseline(t *testing.T) {
	k := &Tracker{Windows: daily(t, "0 0 * * *", "UTC", 6*time.Hour), Rule: Rule{Globs: []string{"*.csv"}, MinSize: 5}}
	begun := day.Add(-time.Hour)
	k.Observe([]Entry{entry("old.csv", clock(-30, 0))}, clock(-1, 0), clock(-1, 0))
	k.Decide(clock(-1, 0), begun)
	k.Observe([]Entry{entry("old.csv", clock(-30, 0)), {Name: "empty.csv", Size: 0, ModTime: clock(1, 0)}}, clock(2, 0), clock(2, 0))
	k.Observe([]Entry{entry("old.csv", clock(-30, 0)), {Name: "empty.csv", Size: 0, ModTime: clock(1, 0)}}, clock(7, 0), clock(7, 0))
	if got := outcomes(k.Decide(clock(7, 0), begun)); got != "Missed@03-02T06:00 " {
		t.Errorf("decided %q", got)
	}
	// After a reset (another folder), what is there counts only by its time.
	k.State.Files, k.State.Listed = nil, time.Time{}
	k.Observe([]Entry{entry("old.csv", clock(-30, 0)), entry("new.csv", clock(7, 30))}, clock(8, 0), clock(8, 0))
	if got := outcomes(k.Decide(clock(8, 0), begun)); got != "Late@03-02T07:30 " {
		t.Errorf("after a reset: %q", got)
	}
}

// TestTrackerSettles: a file counts once two listings Settle apart show
// it unchanged, as having come when it first showed so; Missed waits for
// a file that came before the deadline and still settles, at most Hold.
func TestTrackerSettles(t *testing.T) {
	begun := day.Add(-time.Hour)
	grow := func(size int64, mod time.Time) Entry { return Entry{Name: "pay.xml", Size: size, ModTime: mod} }
	for _, c := range []struct {
		name     string
		listings []struct {
			at      time.Time
			entries []Entry
		}
		want string
	}{
		{"written across the deadline, settled after it: came when it stopped changing", []struct {
			at      time.Time
			entries []Entry
		}{{clock(5, 50), nil}, {clock(5, 59), []Entry{grow(5, clock(5, 58))}}, {clock(6, 0), []Entry{grow(10, clock(5, 59).Add(30*time.Second))}}, {clock(6, 1), []Entry{grow(10, clock(5, 59).Add(30*time.Second))}}},
			"Met@03-02T05:59 "},
		{"still written at the deadline, settled after it", []struct {
			at      time.Time
			entries []Entry
		}{{clock(5, 50), nil}, {clock(6, 0), []Entry{grow(5, clock(5, 59))}}, {clock(6, 0).Add(20 * time.Second), []Entry{grow(10, clock(6, 0))}}, {clock(6, 2), []Entry{grow(10, clock(6, 0))}}},
			"Missed@03-02T06:00 Late@03-02T06:00 "},
		{"never settles: Missed after Hold", []struct {
			at      time.Time
			entries []Entry
		}{{clock(5, 50), nil}, {clock(5, 59), []Entry{grow(5, clock(5, 58))}}, {clock(6, 0), []Entry{grow(6, clock(5, 59))}}, {clock(6, 5), []Entry{grow(7, clock(6, 4))}}},
			"Missed@03-02T06:00 "},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := &Tracker{Windows: daily(t, "0 0 * * *", "UTC", 6*time.Hour), Rule: Rule{Globs: []string{"pay*.xml"}, MinSize: 8},
				Settle: time.Minute, Hold: 2 * time.Minute}
			var got []Decision
			for _, l := range c.listings {
				k.Observe(l.entries, l.at, l.at)
				got = append(got, k.Decide(l.at, begun)...)
			}
			if s := outcomes(got); s != c.want {
				t.Errorf("decided %q, want %q", s, c.want)
			}
		})
	}
}
