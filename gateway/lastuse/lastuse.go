// Package lastuse records when API keys were last used, in
// ApiKey.status.lastUsedTime, so that unused keys can be found and
// removed. A replica writes it at most once a minute per key, in the
// background: recording never delays a request, and a write that fails
// fails no request (the next use a minute later tries again).
package lastuse

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/logging"
)

// Every is how often a replica writes a key's last use at most.
const Every = time.Minute

// The writes waiting are bounded: at most queueSize in all, and perNamespace
// of one namespace's keys, so that one namespace using key after key
// cannot crowd out another's. Past a bound, a use is not recorded (the
// key's next use, a minute later, is).
const (
	queueSize    = 1024
	perNamespace = 64
)

// use is one write to make.
type use struct {
	key  types.NamespacedName
	uid  types.UID
	time metav1.Time
}

// Recorder writes last uses through a client.
type Recorder struct {
	client client.Client
	now    func() time.Time
	log    *slog.Logger

	mu sync.Mutex
	// noted is when each key's use was last queued: no key is written
	// twice within Every.
	noted map[types.UID]time.Time
	// waiting holds each namespace's writes, and turns the namespaces
	// that have some, in the order they are served: one write each in
	// turn.
	waiting map[string][]use
	turns   []string
	queued  int
	wake    chan struct{}
}

// New returns a recorder writing through c, and logging the writes that
// failed to log (nil: nowhere); run it with Run.
func New(c client.Client, log *slog.Logger) *Recorder {
	return &Recorder{client: c, now: time.Now, log: logging.OrDiscard(log), noted: map[types.UID]time.Time{}, waiting: map[string][]use{}, wake: make(chan struct{}, 1)}
}

// Used notes that key let a request in. It never waits.
func (r *Recorder) Used(key *v1alpha1.ApiKey) {
	if r == nil {
		return
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	last, seen := r.noted[key.UID]
	if seen && now.Sub(last) < Every || r.queued >= queueSize || len(r.waiting[key.Namespace]) >= perNamespace {
		return
	}
	r.noted[key.UID] = now
	if len(r.waiting[key.Namespace]) == 0 {
		r.turns = append(r.turns, key.Namespace)
	}
	r.waiting[key.Namespace] = append(r.waiting[key.Namespace],
		use{key: types.NamespacedName{Namespace: key.Namespace, Name: key.Name}, uid: key.UID, time: metav1.NewTime(now.Truncate(time.Second))})
	r.queued++
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// next takes the next write, the namespaces taking turns; false when none
// waits.
func (r *Recorder) next() (use, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.turns) == 0 {
		return use{}, false
	}
	ns := r.turns[0]
	r.turns = r.turns[1:]
	u, rest := r.waiting[ns][0], r.waiting[ns][1:]
	if len(rest) == 0 {
		delete(r.waiting, ns)
	} else {
		r.waiting[ns] = rest
		r.turns = append(r.turns, ns)
	}
	r.queued--
	return u, true
}

// Run writes the uses noted until ctx ends, and forgets keys unused for
// longer than Every, so that deleted keys do not stay noted.
func (r *Recorder) Run(ctx context.Context) {
	sweep := time.NewTicker(10 * Every)
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
			for u, ok := r.next(); ok && ctx.Err() == nil; u, ok = r.next() {
				if err := r.write(ctx, u); err != nil {
					r.log.Info("could not record an API key's last use", "namespace", u.key.Namespace, "name", u.key.Name, "error", err)
				}
			}
		case <-sweep.C:
			r.forget()
		}
	}
}

func (r *Recorder) forget() {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid, t := range r.noted {
		if now.Sub(t) >= Every {
			delete(r.noted, uid)
		}
	}
}

// write patches the key's status with a JSON patch of that one field,
// which leaves the manager's fields as they are, on the condition that
// the key is still the one that was used: a key deleted and made again
// under its name never gets its predecessor's use.
func (r *Recorder) write(ctx context.Context, u use) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": u.uid},
		{"op": "add", "path": "/status/lastUsedTime", "value": u.time},
	})
	if err != nil {
		return err
	}
	key := &v1alpha1.ApiKey{}
	key.Namespace, key.Name = u.key.Namespace, u.key.Name
	return r.client.Status().Patch(ctx, key, client.RawPatch(types.JSONPatchType, patch))
}
