// Package lastuse records when API keys were last used, in
// ApiKey.status.lastUsedTime, so that unused keys can be found and
// removed. A replica writes it at most once a minute per key, in the
// background: recording never delays a request, and a write that fails
// fails no request (the next use a minute later tries again).
package lastuse

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// Every is how often a replica writes a key's last use at most.
const Every = time.Minute

// queueSize bounds the writes waiting: past it, a use is not recorded
// (the key's next use, a minute later, is).
const queueSize = 1024

// use is one write to make.
type use struct {
	key  types.NamespacedName
	time metav1.Time
}

// Recorder writes last uses through a client.
type Recorder struct {
	client client.Client
	now    func() time.Time

	mu sync.Mutex
	// noted is when each key's use was last queued: no key is written
	// twice within Every.
	noted map[types.UID]time.Time
	queue chan use
}

// New returns a recorder writing through c; run it with Run.
func New(c client.Client) *Recorder {
	return &Recorder{client: c, now: time.Now, noted: map[types.UID]time.Time{}, queue: make(chan use, queueSize)}
}

// Used notes that key let a request in. It never waits.
func (r *Recorder) Used(key *v1alpha1.ApiKey) {
	if r == nil {
		return
	}
	now := r.now()
	r.mu.Lock()
	last, seen := r.noted[key.UID]
	if seen && now.Sub(last) < Every {
		r.mu.Unlock()
		return
	}
	r.noted[key.UID] = now
	r.mu.Unlock()
	select {
	case r.queue <- use{key: types.NamespacedName{Namespace: key.Namespace, Name: key.Name}, time: metav1.NewTime(now.Truncate(time.Second))}:
	default:
	}
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
		case u := <-r.queue:
			if err := r.write(ctx, u); err != nil {
				slog.Info("could not record an API key's last use", "namespace", u.key.Namespace, "name", u.key.Name, "error", err)
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

// write patches the key's status with a merge patch of that one field,
// which leaves the manager's fields as they are.
func (r *Recorder) write(ctx context.Context, u use) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stamp, err := u.time.MarshalJSON()
	if err != nil {
		return err
	}
	patch := fmt.Appendf(nil, `{"status":{"lastUsedTime":%s}}`, stamp)
	key := &v1alpha1.ApiKey{}
	key.Namespace, key.Name = u.key.Namespace, u.key.Name
	return r.client.Status().Patch(ctx, key, client.RawPatch(types.MergePatchType, patch))
}
