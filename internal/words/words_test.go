package words

import (
	"testing"
	"time"
)

// TestWords: counts agree with their nouns, and times say their zone.
func TestWords(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 28, 22, 46, 4, 0, time.UTC)
	for got, want := range map[string]string{
		Count(0, "file", "files"):                 "0 files",
		Count(1, "file", "files"):                 "1 file",
		Count(2, "file", "files"):                 "2 files",
		Sentence("enter an email address"):        "Enter an email address",
		Sentence("élan"):                          "Élan",
		Sentence(""):                              "",
		Ago(now, now):                             "just now",
		Ago(now.Add(-30*time.Second), now):        "30 seconds ago",
		Ago(now.Add(-time.Minute), now):           "1 minute ago",
		Ago(now.Add(-59*time.Minute), now):        "59 minutes ago",
		Ago(now.Add(-time.Hour-time.Minute), now): "1 hour ago",
		Ago(now.Add(-47*time.Hour), now):          "47 hours ago",
		Ago(now.Add(-72*time.Hour), now):          "25 Nov 2026",
		Time(now.In(time.FixedZone("CET", 3600))): "28 Nov 2026, 22:46 UTC",
		Percent(1, 3):                             "33%",
		Percent(0, 0):                             "100%",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}
