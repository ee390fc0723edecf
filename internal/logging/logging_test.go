package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// lines decodes out, which must be one JSON object per line.
func lines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var got []map[string]any
	for line := range strings.Lines(out) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("a line that is not one JSON object: %q: %v", line, err)
		}
		got = append(got, m)
	}
	return got
}

// TestLinesAreJSONWithTheComponent: each line is one JSON object with
// time, level, msg and component, and its own attributes; --log-level
// warn drops info.
func TestLinesAreJSONWithTheComponent(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string // the messages written
	}{
		{nil, []string{"info", "warn", "error"}},
		{[]string{"--log-level=warn"}, []string{"warn", "error"}},
		{[]string{"--log-level=debug"}, []string{"debug", "info", "warn", "error"}},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		opts := RegisterFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		log, flush := newTo(&out, "worker", *opts)
		log.Debug("debug")
		log.Info("info", "namespace", "team")
		log.Warn("warn")
		log.Error("error", "error", errors.New("it broke\nbadly"))
		flush()
		got := lines(t, out.String())
		var msgs []string
		for _, l := range got {
			msgs = append(msgs, l["msg"].(string))
			for _, key := range []string{"time", "level", "msg", "component"} {
				if _, ok := l[key]; !ok {
					t.Errorf("%v: a line without %s: %v", tc.args, key, l)
				}
			}
			if l["component"] != "worker" || l["level"] != strings.ToUpper(l["msg"].(string)) {
				t.Errorf("%v: %v", tc.args, l)
			}
		}
		if strings.Join(msgs, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%v wrote %v, want %v", tc.args, msgs, tc.want)
		}
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(&bytes.Buffer{})
	RegisterFlags(fs)
	if err := fs.Parse([]string{"--log-level=loud"}); err == nil {
		t.Error("--log-level=loud was taken")
	}
}

// TestLogrWritesTheSameLines: controller-runtime's logr lines are the
// component's, their error named "error" as in the others; V(1) is
// debug.
func TestLogrWritesTheSameLines(t *testing.T) {
	var out bytes.Buffer
	log, _ := newTo(&out, "manager", Options{})
	l := Logr(log).WithName("controller")
	l.Info("reconciled", "name", "box")
	l.V(1).Info("chatter")
	l.Error(errors.New("no"), "failed")
	got := lines(t, out.String())
	if len(got) != 2 || got[0]["msg"] != "reconciled" || got[0]["component"] != "manager" || got[0]["name"] != "box" ||
		got[1]["level"] != "ERROR" || got[1]["error"] != "no" {
		t.Errorf("%s", out.String())
	}
	Logr(nil).Info("nowhere") // a nil logger writes nothing, and does not panic
	OrDiscard(nil).Error("nowhere")
}

// TestBufferedLines: with a flush interval, lines wait in the buffer
// until a warning, which writes them with it, or flush; after flush,
// lines are written at once.
func TestBufferedLines(t *testing.T) {
	// Written only from this goroutine: the buffer's own, which writes
	// every hour, does not get to.
	var out bytes.Buffer
	log, flush := newTo(&out, "gateway", Options{FlushInterval: time.Hour})
	log.Info("request")
	if out.String() != "" {
		t.Fatalf("written before its time: %s", out.String())
	}
	log.Warn("trouble")
	if got := lines(t, out.String()); len(got) != 2 || got[0]["msg"] != "request" || got[1]["msg"] != "trouble" {
		t.Fatalf("after a warning: %s", out.String())
	}
	log.Info("another")
	flush()
	log.Info("after")
	if got := lines(t, out.String()); len(got) != 4 || got[2]["msg"] != "another" || got[3]["msg"] != "after" {
		t.Fatalf("after flush: %s", out.String())
	}
	flush() // twice is harmless
}

// TestJSONWritesWhatSlogWould: a line with JSON already encoded is the
// line slog writes for it, buffered or not; a logger with attributes of
// its own writes it through slog, with them.
func TestJSONWritesWhatSlogWould(t *testing.T) {
	at := time.Date(2026, 11, 27, 1, 2, 3, 456789000, time.UTC)
	value := []byte(`{"action":"gateway.write","paths":["a<b>&c"],"seq":7}`)
	for _, opts := range []Options{{}, {FlushInterval: time.Hour}} {
		var fast, slow bytes.Buffer
		log, flush := newTo(&fast, "gateway", opts)
		JSON(t.Context(), log, at, "audit", "record", value)
		JSON(t.Context(), log.With("namespace", "team"), at, "audit", "record", value)
		flush()
		ref, _ := newTo(&slow, "gateway", Options{})
		line := slog.NewRecord(at, slog.LevelInfo, "audit", 0)
		line.AddAttrs(slog.Any("record", json.RawMessage(value)))
		if err := ref.Handler().Handle(t.Context(), line); err != nil {
			t.Fatal(err)
		}
		got := strings.SplitAfter(fast.String(), "\n")
		if len(got) != 3 || got[0] != slow.String() {
			t.Errorf("%+v: wrote\n%s\nwant\n%s", opts, fast.String(), slow.String())
		}
		if l := lines(t, got[1]); l[0]["namespace"] != "team" || l[0]["record"] == nil {
			t.Errorf("%+v: with attributes: %s", opts, got[1])
		}
	}
}
