package chaos

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sftpgate/sftpgate/test/framework"
)

// fault is one kind of failure; strike injects it (the i-th time) and
// returns once what it broke runs again, but for the sink's refusal,
// which lasts a minute on its own.
type fault struct {
	name   string
	strike func(ctx context.Context, i int) string
}

func (r *rig) faultKinds() []fault {
	replica := func(ps []*framework.Process, i int) *framework.Process { return ps[i%len(ps)] }
	return []fault{
		{"kill gateway", func(ctx context.Context, i int) string { return r.bounce(ctx, replica(r.sys.Gateways, i), true) }},
		{"stop gateway", func(ctx context.Context, i int) string { return r.bounce(ctx, replica(r.sys.Gateways, i), false) }},
		{"kill worker", func(ctx context.Context, i int) string { return r.bounce(ctx, replica(r.sys.Workers, i), true) }},
		{"stop worker", func(ctx context.Context, i int) string { return r.bounce(ctx, replica(r.sys.Workers, i), false) }},
		{"kill webui", func(ctx context.Context, i int) string { return r.bounce(ctx, replica(r.webuis, i), true) }},
		{"stop webui", func(ctx context.Context, i int) string { return r.bounce(ctx, replica(r.webuis, i), false) }},
		{"kill manager", func(ctx context.Context, _ int) string { return r.bounce(ctx, r.sys.Manager, true) }},
		{"restart sshd", func(context.Context, int) string { r.near.Restart(r.t); return "restart sshd (near)" }},
		{"restart s3", func(context.Context, int) string { r.s3.Restart(r.t); return "restart s3 (versitygw)" }},
		{"cut link", func(context.Context, int) string { r.link.Cut(); return "cut link to the far sshd" }},
		{"restart apiserver", func(ctx context.Context, _ int) string {
			if err := r.sys.APIServer.Restart(ctx); err != nil {
				r.t.Errorf("the API server did not come back: %v", err)
			}
			return "restart apiserver"
		}},
		{"refuse sink", func(_ context.Context, i int) string {
			tn := r.tenants[i%len(r.tenants)]
			r.refusing.Add(1)
			tn.events.SetAnswer(503)
			tn.audits.SetAnswer(503)
			go func() {
				defer r.refusing.Done()
				time.Sleep(time.Minute)
				tn.events.SetAnswer(0)
				tn.audits.SetAnswer(0)
			}()
			return "refuse sink of " + tn.ns + " for 1m"
		}},
	}
}

// runFaults strikes faults for d, one at a time at seeded intervals, in
// a seeded order that goes through every kind before repeating one.
func (r *rig) runFaults(d time.Duration) {
	ctx := context.Background()
	start := time.Now()
	kinds := r.faultKinds()
	struck := map[string]int{}
	for round := 0; ; round++ {
		order := r.rng.Perm(len(kinds))
		for _, k := range order {
			pause(ctx, time.Duration(15+r.rng.IntN(20))*time.Second)
			if time.Since(start) >= d {
				return
			}
			f := kinds[k]
			at := time.Since(start) + time.Minute
			what := f.strike(ctx, struck[f.name])
			struck[f.name]++
			r.faults.add(at, what)
		}
	}
}

// bounce kills (SIGKILL) or stops (SIGTERM) p, and starts it again after
// a seeded 5 to 15 seconds; only one replica is ever down at once.
func (r *rig) bounce(ctx context.Context, p *framework.Process, kill bool) string {
	verb, end := "stop", p.Stop
	if kill {
		verb, end = "kill", p.Kill
	}
	if err := end(); err != nil {
		r.t.Errorf("%s %s: %v", verb, p.Name, err)
	}
	if kill && slices.Contains(r.sys.Gateways, p) {
		// Once it is dead: an answer its client read just before counts
		// as before the kill (chaos seed 1).
		r.gatewayKills.add(p, time.Now())
	}
	down := time.Duration(5+r.rng.IntN(10)) * time.Second
	pause(ctx, down)
	if err := p.Start(ctx); err != nil {
		r.t.Errorf("%s did not come back: %v", p.Name, err)
	}
	return fmt.Sprintf("%s %s (down %s)", verb, p.Name, down)
}

// healAll ends every fault: each process runs, every sink answers.
func (r *rig) healAll() {
	fmt.Println("  healing: the load stopped; every process starts, every sink answers")
	r.refusing.Wait()
	for _, p := range r.sys.Processes() {
		if !p.Running() {
			if err := p.Start(context.Background()); err != nil {
				r.t.Errorf("%s: %v", p.Name, err)
			}
		}
	}
	r.healed = time.Now()
	r.settleBy = r.healed.Add(settleTimeout)
}

// kills remembers when each gateway replica was killed: the records of
// its last moments may be lost, and a gap names them.
type kills struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func (k *kills) add(p *framework.Process, at time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.at == nil {
		k.at = map[string][]time.Time{}
	}
	k.at[p.URL] = append(k.at[p.URL], at)
}

// excused says whether an answer from the replica serving url, at
// answered, came within the window before one of its kills.
func (k *kills) excused(url string, answered time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for replica, kills := range k.at {
		if !strings.HasPrefix(url, replica+"/") {
			continue
		}
		for _, at := range kills {
			if !answered.After(at) && at.Sub(answered) <= auditStoreWindow {
				return true
			}
		}
	}
	return false
}

// inFlight says whether a file last written at mtime may be a write in
// flight in a gateway replica when it was killed: no later than the
// kill, and no earlier than a request may last.
func (k *kills) inFlight(mtime time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, kills := range k.at {
		for _, at := range kills {
			if !mtime.After(at.Add(time.Second)) && at.Sub(mtime) <= requestTimeout {
				return true
			}
		}
	}
	return false
}

func splitHostPort(addr string) (string, int32) {
	host, port, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(port)
	return host, int32(n)
}
