package conformance

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Race has a key limited to ScopedPath race its own renames of directories
// and symlinks against its own reads and writes of the same paths, trying
// to make a path inside its scope lead outside it between the gateway's
// check of where the path leads and the operation on it (docs/gateway.md,
// "What a key's paths guarantee"). It runs twice: with symlinks leading
// out that were made beforehand by other means, and with nothing set up,
// where the key makes every link itself. No byte may be read from, or
// written to, outside the scope: outside, below the root and beyond it,
// each secret file keeps its content and nothing is added beside it.
//
// RaceTries reads and writes make each run; a run also ends after two
// minutes. No run waits by sleeping.
func Race(t *testing.T, target Target) {
	if target.ScopedToken == "" {
		t.Fatal("the target has no key limited to " + ScopedPath + ": give it a ScopedToken")
	}
	for _, premade := range []bool{true, false} {
		name := "nothing-made-beforehand"
		if premade {
			name = "links-made-beforehand"
		}
		t.Run(name, func(t *testing.T) { race(t, target, name, premade, RaceTries) })
	}
}

// RaceTries is how many reads and writes each run of Race makes, and
// raceDeadline bounds a run however slow the machine.
const (
	RaceTries    = 4000
	raceDeadline = 2 * time.Minute
)

func race(t *testing.T, target Target, name string, premade bool, tries int) {
	marker := fmt.Sprintf("SECRET-%s-%d", name, rand.Int64())
	// Outside the scope but inside the root, and beyond the root.
	below := filepath.Join(target.Dir, "race-"+name+"-outside")
	mkdirOwned(t, target, below)
	beyond, err := os.MkdirTemp(filepath.Dir(target.Dir), "race-beyond-")
	must(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(beyond) })
	if target.UID >= 0 {
		must(t, os.Chown(beyond, target.UID, target.GID))
	}
	for _, dir := range []string{below, beyond} {
		must(t, os.WriteFile(filepath.Join(dir, "secret"), []byte(marker), 0o644))
	}
	scope := filepath.Join(target.Dir, ScopedPath)
	if _, err := os.Stat(scope); os.IsNotExist(err) {
		mkdirOwned(t, target, scope)
	}
	// The race's directory, as the client names it, and on this machine.
	base := ScopedPath + "race-" + name
	local := filepath.Join(target.Dir, base)
	mkdirOwned(t, target, local)
	mkdirOwned(t, target, filepath.Join(local, "d"))
	must(t, os.WriteFile(filepath.Join(local, "d", "f"), []byte("inside"), 0o644))
	if premade {
		// Relative links, which every backend follows alike: esc leads to
		// the directory outside the scope, far beyond the root, and trap
		// is a directory holding a link to the secret outside.
		rel := func(from, to string) string {
			r, err := filepath.Rel(filepath.Dir(from), to)
			must(t, err)
			return r
		}
		link := func(at, to string) {
			must(t, os.Symlink(rel(at, to), at))
			if target.UID >= 0 {
				must(t, os.Lchown(at, target.UID, target.GID))
			}
		}
		link(filepath.Join(local, "esc"), below)
		link(filepath.Join(local, "far"), beyond)
		mkdirOwned(t, target, filepath.Join(local, "trap"))
		link(filepath.Join(local, "trap", "f"), filepath.Join(below, "secret"))
		link(filepath.Join(local, "trap", "secret"), filepath.Join(beyond, "secret"))
	}

	r := &racer{t: t, target: target, base: base, marker: marker, below: filepath.Base(below), beyond: filepath.Base(beyond)}
	deadline := time.Now().Add(raceDeadline)
	var (
		done  atomic.Bool
		wg    sync.WaitGroup
		count atomic.Int64
	)
	swappers, users := 2, 6
	if m := target.MaxInFlight; m > 0 && m < swappers+users {
		swappers, users = max(1, m/4), m-max(1, m/4)
	}
	for i := range swappers {
		wg.Go(func() {
			for n := 0; !done.Load(); n++ {
				r.swap(i, n, premade)
			}
		})
	}
	var using sync.WaitGroup
	for i := range users {
		using.Go(func() {
			for n := 0; count.Load() < int64(tries) && time.Now().Before(deadline); n++ {
				if r.use(i, n) {
					count.Add(1)
				}
			}
		})
	}
	using.Wait()
	done.Store(true)
	wg.Wait()

	tried := count.Load()
	t.Logf("%d reads and writes raced %d renames and symlinks: %d answers refused, %d failed on the server (and %d over the key's rate, not counted)",
		tried, r.swaps.Load(), r.refused.Load(), r.failed.Load(), r.throttled.Load())
	if tried < int64(tries) {
		t.Errorf("only %d of %d reads and writes ran within %s", tried, tries, raceDeadline)
	}
	if leaked := r.leaked.Load(); leaked > 0 {
		t.Errorf("%d reads returned the secret from outside the scope", leaked)
	}
	for _, dir := range []string{below, beyond} {
		entries, err := os.ReadDir(dir)
		must(t, err)
		if len(entries) != 1 || entries[0].Name() != "secret" {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("%s, outside the scope, now holds %v: a write landed outside", dir, names)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "secret")); err != nil || string(b) != marker {
			t.Errorf("the secret outside the scope in %s was changed: %q (%v)", dir, b, err)
		}
	}
}

// racer sends the race's requests with the scoped key and counts what
// came back.
type racer struct {
	t                      *testing.T
	target                 Target
	base                   string // the race's directory, as the client names it
	marker                 string
	below, beyond          string // the outside directories' names
	swaps, refused, failed atomic.Int64
	throttled              atomic.Int64
	leaked                 atomic.Int64
}

// swap runs one of the ways a key holder could make d, a directory inside
// the scope that the other goroutines read and write through, lead
// outside for a moment, and puts d back. Goroutine i uses names of its own
// for what it moves aside.
func (r *racer) swap(i, n int, premade bool) {
	b := r.base
	aside := fmt.Sprintf("%s/d%d", b, i)
	way := n % 4
	if !premade {
		way = 2 + n%2
	}
	switch way {
	case 0: // a link leading out, moved into d's place
		r.send("rename", fmt.Sprintf(`{"from": %q, "to": %q}`, b+"/d", aside))
		r.send("rename", fmt.Sprintf(`{"from": %q, "to": %q}`, b+"/esc", b+"/d"))
		r.send("rename", fmt.Sprintf(`{"from": %q, "to": %q}`, b+"/d", b+"/esc"))
	case 1: // a directory holding links leading out, moved into d's place, or linked to
		r.send("rename", fmt.Sprintf(`{"from": %q, "to": %q}`, b+"/d", aside))
		if n%8 == 1 {
			r.send("rename", fmt.Sprintf(`{"from": %q, "to": %q}`, b+"/trap", b+"/d"))
			r.send("rename", fmt.Sprintf(`{"from": %q, "to": %q}`, b+"/d", b+"/trap"))
		} else {
			r.send("symlink", fmt.Sprintf(`{"path": %q, "target": %q}`, b+"/d", b+"/trap"))
			r.send("unlink", fmt.Sprintf(`{"path": %q}`, b+"/d"))
		}
	case 2: // a link the key makes deep down, moved up into d's place
		deep := fmt.Sprintf("%s/m%d/x/y", b, i)
		r.send("mkdir", fmt.Sprintf(`{"path": %q, "parents": true}`, deep))
		r.send("symlink", fmt.Sprintf(`{"path": %q, "target": %q}`, deep+"/l", b))
		r.send("rename", fmt.Sprintf(`{"from": %q, "to": %q}`, b+"/d", aside))
		r.send("rename", fmt.Sprintf(`{"from": %q, "to": %q}`, deep+"/l", b+"/d"))
		r.send("unlink", fmt.Sprintf(`{"path": %q}`, b+"/d"))
	case 3: // the same link moved up with the directory holding it
		deep := fmt.Sprintf("%s/n%d/w/x", b, i)
		r.send("mkdir", fmt.Sprintf(`{"path": %q, "parents": true}`, deep))
		r.send("symlink", fmt.Sprintf(`{"path": %q, "target": %q}`, deep+"/l", b))
		r.send("rename", fmt.Sprintf(`{"from": %q, "to": %q}`, b+"/d", aside))
		r.send("rename", fmt.Sprintf(`{"from": %q, "to": %q}`, deep, b+"/d"))
		r.send("rename", fmt.Sprintf(`{"from": %q, "to": %q}`, b+"/d", deep))
		r.send("rmdir", fmt.Sprintf(`{"path": %q, "recursive": true}`, fmt.Sprintf("%s/n%d", b, i)))
	}
	r.send("rename", fmt.Sprintf(`{"from": %q, "to": %q}`, aside, b+"/d"))
}

// use reads or writes through d, where the secret would be if d led
// outside; it reports whether the request ran.
func (r *racer) use(i, n int) bool {
	d := r.base + "/d"
	targets := []string{d + "/f", d + "/secret", d + "/" + r.below + "/secret", d + "/" + r.beyond + "/secret",
		d + "/l/" + r.below + "/secret"}
	p := targets[n%len(targets)]
	if n%3 == 2 {
		// A write: where it lands is checked after the race.
		dir := p[:strings.LastIndex(p, "/")]
		_, ran := r.send("write", fmt.Sprintf(`{"path": %q, "file": {"text": "w"}, "overwrite": true}`, fmt.Sprintf("%s/w%d-%d", dir, i, n)))
		return ran
	}
	body, ran := r.send("read", fmt.Sprintf(`{"path": %q}`, p))
	if strings.Contains(body, r.marker) {
		r.leaked.Add(1)
	}
	return ran
}

// send posts a command with the scoped key and returns the answer's body,
// and whether the command ran: not when refused over the key's rate or
// requests in flight (429). A refusal is counted; an answer other than a
// result, a refusal or the server's failure fails the test.
func (r *racer) send(command, body string) (string, bool) {
	if command == "rename" || command == "symlink" {
		r.swaps.Add(1)
	}
	req, err := http.NewRequest(http.MethodPost, r.target.URL+"/"+command, strings.NewReader(body))
	if err != nil {
		r.t.Error(err)
		return "", false
	}
	req.Header.Set("Authorization", "Bearer "+r.target.ScopedToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		r.t.Error(err)
		return "", false
	}
	raw, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		r.t.Error(err)
		return "", false
	}
	var answer struct {
		Error *struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(raw, &answer)
	switch {
	case resp.StatusCode == http.StatusOK && answer.Error != nil:
		r.failed.Add(1)
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusForbidden:
		r.refused.Add(1)
	case resp.StatusCode == http.StatusTooManyRequests:
		// The key's rate or its requests in flight: refused before it
		// ran, which tests nothing.
		r.throttled.Add(1)
		return "", false
	default:
		r.t.Errorf("%s %s: %d %s", command, body, resp.StatusCode, raw)
	}
	return string(raw), true
}
