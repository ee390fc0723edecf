package expect

import (
	"testing"
	"time"

	"github.com/sftpgate/sftpgate/internal/calendar"
)

var (
	day    = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	window = calendar.Window{Opens: day, Deadline: day.Add(6 * time.Hour)}
	next   = day.Add(24 * time.Hour)
)

func at(h, m int) time.Time {
	return day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute)
}

func came(name string, size int64, t time.Time) Seen { return Seen{Name: name, Size: size, Came: t} }

func gone(f Seen, t time.Time) Seen {
	f.Gone = t
	return f
}

// TestNext: a window's outcomes from what its folder showed, at a time.
func TestNext(t *testing.T) {
	two := Rule{Globs: []string{"claims-*.csv"}, MinCount: 2, MinSize: 1, MaxSize: 1 << 20}
	one := Rule{Globs: []string{"pay*.xml", "pay*.xml.pgp"}}
	pickUp := Rule{Globs: []string{"pay*.xml"}, PickUpWithin: time.Hour}
	for _, c := range []struct {
		name  string
		rule  Rule
		files []Seen
		now   time.Time
		had   []Outcome
		want  Outcome // "" for none yet
		at    time.Time
		count int
	}{
		{"both came before the deadline", two, []Seen{came("claims-1.csv", 10, at(1, 0)), came("claims-2.csv", 10, at(5, 59))}, at(5, 59), nil, Met, at(5, 59), 2},
		{"one of two, before the deadline: nothing yet", two, []Seen{came("claims-1.csv", 10, at(1, 0))}, at(5, 59), nil, "", time.Time{}, 0},
		{"one of two at the deadline", two, []Seen{came("claims-1.csv", 10, at(1, 0))}, at(6, 0), nil, Missed, at(6, 0), 1},
		{"the second after the deadline", two, []Seen{came("claims-1.csv", 10, at(1, 0)), came("claims-2.csv", 10, at(7, 0))}, at(7, 0), []Outcome{Missed}, Late, at(7, 0), 2},
		{"a file of the day before does not count", one, []Seen{came("pay.xml", 10, day.Add(-time.Minute))}, at(6, 0), nil, Missed, at(6, 0), 0},
		{"a file of the next window does not count", one, []Seen{came("pay.xml", 10, next)}, next, []Outcome{Missed}, "", time.Time{}, 0},
		{"another name, an empty file, a huge one", two, []Seen{came("claims.txt", 10, at(1, 0)), came("claims-1.csv", 0, at(1, 0)), came("claims-2.csv", 2<<20, at(1, 0))}, at(6, 0), nil, Missed, at(6, 0), 0},
		{"any of the globs", one, []Seen{came("pay-0302.xml.pgp", 10, at(3, 0))}, at(3, 0), nil, Met, at(3, 0), 1},
		{"picked up in time", pickUp, []Seen{gone(came("pay.xml", 10, at(1, 0)), at(1, 30))}, at(1, 30), nil, Met, at(1, 30), 1},
		{"not picked up yet, within the hour", pickUp, []Seen{came("pay.xml", 10, at(1, 0))}, at(1, 59), nil, "", time.Time{}, 0},
		{"not picked up within the hour", pickUp, []Seen{came("pay.xml", 10, at(1, 0))}, at(2, 0), nil, NotProcessed, at(2, 0), 1},
		{"picked up, but too late", pickUp, []Seen{gone(came("pay.xml", 10, at(1, 0)), at(2, 30))}, at(3, 0), nil, NotProcessed, at(2, 0), 1},
		{"came in time, picked up after the deadline: Met", pickUp, []Seen{gone(came("pay.xml", 10, at(5, 30)), at(6, 10))}, at(6, 10), nil, Met, at(6, 10), 1},
		{"late, then not picked up", pickUp, []Seen{came("pay.xml", 10, at(7, 0))}, at(8, 0), []Outcome{Missed, Late}, NotProcessed, at(8, 0), 1},
		{"late, picked up: nothing more", pickUp, []Seen{gone(came("pay.xml", 10, at(7, 0)), at(7, 5))}, at(9, 0), []Outcome{Missed, Late}, "", time.Time{}, 0},
		{"met: nothing more", one, []Seen{came("pay.xml", 10, at(1, 0))}, at(9, 0), []Outcome{Met}, "", time.Time{}, 0},
		{"the worker back after the deadline: met by the file's time", one, []Seen{came("pay.xml", 10, at(5, 0))}, at(9, 0), nil, Met, at(5, 0), 1},
		{"a file not yet come by now's clock", one, []Seen{came("pay.xml", 10, at(5, 0))}, at(4, 0), nil, "", time.Time{}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, ok := Next(window, next, c.rule, c.files, c.now, c.had)
			if c.want == "" {
				if ok {
					t.Fatalf("decided %+v, want nothing yet", d)
				}
				return
			}
			if !ok || d.Outcome != c.want || !d.At.Equal(c.at) || len(d.Files) != c.count {
				t.Fatalf("decided %v %+v, want %s at %v of %d files", ok, d, c.want, c.at, c.count)
			}
		})
	}
}

// TestEventID: one id per expectation, window and outcome, whoever
// decides it.
func TestEventID(t *testing.T) {
	a := EventID("uid-1", window, Missed)
	for _, other := range []string{EventID("uid-2", window, Missed), EventID("uid-1", window, Late),
		EventID("uid-1", calendar.Window{Opens: next, Deadline: next.Add(6 * time.Hour)}, Missed)} {
		if other == a {
			t.Errorf("two outcomes share the id %s", a)
		}
	}
	if EventID("uid-1", window, Missed) != a || len(a) != 32 {
		t.Errorf("the id %q is not stable, or not 32 hex digits", a)
	}
	if got := (Decision{Outcome: NotProcessed}).EventType(); got != "dev.sftpgate.expectation.notprocessed" {
		t.Errorf("type %q", got)
	}
}
