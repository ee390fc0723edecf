package worker_test

import (
	"cmp"
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsink"
	"github.com/sftpgate/sftpgate/worker"
	"github.com/sftpgate/sftpgate/worker/statestore"
	"github.com/sftpgate/sftpgate/worker/watch"
)

// apiRequests records the requests a worker replica sends the API server,
// at a transport wrapping its own: what each watch costs it.
type apiRequests struct {
	mu   sync.Mutex
	sent []apiRequest
}

// apiRequest is one request: its method and path, and the name of the
// object it writes or is about (a create's, an event's regarding object's),
// read from its body where its path does not name it; an event's reason
// and note, to say why it was sent.
type apiRequest struct {
	method, path, name, why string
}

func (r apiRequest) String() string { return r.method + " " + r.path + " " + r.name + r.why }

func (r apiRequest) event() bool { return strings.HasSuffix(r.path, "/events") }

// config is the tests' rest config, with r counting its requests.
func (r *apiRequests) config() *rest.Config {
	cfg := rest.CopyConfig(restConfig)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if err := r.record(req); err != nil {
				return nil, err
			}
			return rt.RoundTrip(req)
		})
	})
	return cfg
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func (r *apiRequests) record(req *http.Request) error {
	sent := apiRequest{method: req.Method, path: req.URL.Path}
	if req.GetBody != nil && req.Method != http.MethodGet {
		// A copy of the body: a round tripper leaves its request as it is.
		body, err := req.GetBody()
		if err != nil {
			return err
		}
		data, err := io.ReadAll(body)
		_ = body.Close()
		if err != nil {
			return err
		}
		// An object, as JSON or protobuf as the client chose; a patch's
		// body is none, and its path names it.
		obj, _, _ := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
		switch o := obj.(type) {
		case *eventsv1.Event:
			sent.name, sent.why = o.Regarding.Name, " ("+o.Reason+": "+o.Note+")"
		case metav1.Object:
			sent.name = o.GetName()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, sent)
	return nil
}

// writesOf is the writes for w: its status and its events (in its own
// namespace), and its state (ConfigMaps of the worker's namespace named
// after its UID). Leases are the replica's, shared by every watch: not
// counted here.
func (r *apiRequests) writesOf(w *v1alpha1.SftpWatch) []apiRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	state := "sftpwatch-" + string(w.UID)
	var out []apiRequest
	for _, s := range r.sent {
		if s.method == http.MethodGet {
			continue
		}
		switch {
		case s.path == "/apis/sftpgate.dev/v1alpha1/namespaces/"+w.Namespace+"/sftpwatches/"+w.Name+"/status",
			strings.Contains(s.path, "/namespaces/"+w.Namespace+"/events") && s.name == w.Name,
			strings.Contains(s.path, "/configmaps") && strings.HasPrefix(cmp.Or(s.name, s.path[strings.LastIndex(s.path, "/")+1:]), state):
			out = append(out, s)
		}
	}
	return out
}

// readState reports whether the replica has read w's stored state: its
// watcher has made its first step, to the poll.
func (r *apiRequests) readState(w *v1alpha1.SftpWatch) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.sent, func(s apiRequest) bool {
		return s.method == http.MethodGet && strings.HasSuffix(s.path, "/configmaps/sftpwatch-"+string(w.UID))
	})
}

// TestWatchWrites: what a watch costs the API server, counted at the
// worker replicas' own transport. A new watch of an empty folder takes
// three writes (its state, its status and that status's event) and no
// more while it polls on; a replica that takes it over from one stopped
// takes one (the status naming it), and the stopped one none, as it held
// nothing new; a watch whose first poll does not come (its server never
// lists, or its namespace's polls are all held by such a watch) says so
// within the bound, with no event, and costs that one write more once it
// polls, while one whose poll comes within the bound costs nothing more.
// Not parallel: its replicas, of a worker namespace of their own, hold
// every watch.
func TestWatchWrites(t *testing.T) {
	ctx := context.Background()
	const ns = "sftpgate-writes-test"
	must(t, testcluster.EnsureNamespace(ctx, restConfig, ns))
	replica := func(identity string) (*apiRequests, func()) {
		sent := &apiRequests{}
		stop := runWorkerOn(t, sent.config(), identity, func(o *worker.Options) {
			o.Namespace = ns
			// A poll that finds nothing new writes nothing, as by default.
			o.Limits.PollTimeEvery = 0
			// One watch whose poll hangs holds its namespace's polls, and
			// the replica's.
			o.Limits.PollsPerNamespace, o.Limits.Polls = 1, 1
		})
		return sent, stop
	}
	tn := newTenant(t)
	sink := testsink.Start(t)
	get := func(w *v1alpha1.SftpWatch) *v1alpha1.SftpWatch {
		var got v1alpha1.SftpWatch
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(w), &got))
		return &got
	}
	ready := func(w *v1alpha1.SftpWatch) *metav1.Condition {
		return meta.FindStatusCondition(get(w).Status.Conditions, v1alpha1.ConditionReady)
	}
	// sentAfterPolls puts file in the watched folder and waits until its
	// event comes, held by the sink: the watch polled twice more
	// meanwhile, and its replica waits for the sink's answer.
	sentAfterPolls := func(file string) *testsink.Held {
		held := sink.HoldNext(t)
		tn.put(t, file, "x")
		eventually(t, "the event of "+file+" comes", func() bool {
			select {
			case <-held.Arrived:
				return true
			default:
				return false
			}
		})
		return held
	}
	atMost := func(what string, writes []apiRequest, n int) {
		t.Helper()
		t.Logf("%s: %d writes %v", what, len(writes), writes)
		if len(writes) > n {
			t.Errorf("%s: %d writes, want at most %d: %v", what, len(writes), n, writes)
		}
	}

	aSent, stopA := replica("a")
	defer stopA()
	w := tn.watch(t, "incoming", sink.URL)
	defer func() { _ = k8s.Delete(ctx, w) }()
	eventually(t, "replica a says the watch is Ready", func() bool {
		c := ready(w)
		return c != nil && c.Status == metav1.ConditionTrue && get(w).Status.Worker == "a"
	})
	held := sentAfterPolls("in/1.csv")
	atMost("a new watch of an empty folder", aSent.writesOf(w), 3)
	held.Release() // answered 503: tried again, and taken
	states := &statestore.Store{Client: k8s, Namespace: ns, Kind: "sftpwatch"}
	eventually(t, "the event is delivered and the state stored", func() bool {
		blob, _, err := states.Load(ctx, string(w.UID))
		must(t, err)
		if blob == nil {
			return false
		}
		s, err := watch.DecodeState(blob)
		must(t, err)
		return s.Delivered == 1 && len(s.Outbox) == 0
	})
	// And its status says so: the 503 may have turned Ready for a while,
	// and under load its return be written after the state. A replica
	// stopping does not write what it has not yet (the next one does).
	eventually(t, "replica a's status says the watch is Ready again", func() bool {
		c := ready(w)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonWatching && get(w).Status.Delivered == 1
	})

	before := len(aSent.writesOf(w))
	stopA()
	// Events are sent on their own goroutine: one of the delivery's may
	// come late. Its state and status A writes no more.
	atMost("replica a stopping, holding nothing new", slices.DeleteFunc(aSent.writesOf(w)[before:], apiRequest.event), 0)
	bSent, stopB := replica("b")
	defer stopB()
	held = sentAfterPolls("in/2.csv")
	atMost("replica b taking the watch over", bSent.writesOf(w), 1)
	if got := get(w).Status.Worker; got != "b" {
		t.Errorf("the status names replica %q, want b", got)
	}
	held.Release()

	var stuck, starved, elsewhere, brief *v1alpha1.SftpWatch
	other := newTenant(t)
	firstPoll := func(w *v1alpha1.SftpWatch) bool {
		c := ready(w)
		return c != nil && c.Status == metav1.ConditionUnknown && c.Reason == v1alpha1.ReasonFirstPoll
	}
	t.Run("while a poll hangs", func(t *testing.T) {
		tarpit := testsftp.Tarpit(t) // it lets go when this subtest ends
		testkit.ReadyConnection(t, k8s, tn.ns, "tarpit", tarpit.Login())
		stuck = tn.watch(t, "stuck", sink.URL, func(w *v1alpha1.SftpWatch) { w.Spec.ConnectionRef.Name, w.Spec.Path = "tarpit", "/" })
		eventually(t, "the stuck watch's poll hangs, holding its namespace's", func() bool { return tarpit.Held() > 0 })
		starved = tn.watch(t, "starved", sink.URL)
		elsewhere = other.watch(t, "elsewhere", sink.URL) // waits for the replica's poll slot
		eventually(t, "all say they wait for their first poll", func() bool {
			return firstPoll(stuck) && firstPoll(starved) && firstPoll(elsewhere)
		})
		for _, w := range []*v1alpha1.SftpWatch{stuck, starved, elsewhere} {
			if writes := bSent.writesOf(w); len(writes) != 1 {
				t.Errorf("%s waiting for its first poll: %d writes %v, want its status alone", w.Name, len(writes), writes)
			}
		}
		brief = tn.watch(t, "brief", sink.URL)
		eventually(t, "the third watch's first step", func() bool { return bSent.readState(brief) })
	})
	defer func() {
		for _, w := range []*v1alpha1.SftpWatch{stuck, starved, elsewhere, brief} {
			if w != nil {
				_ = k8s.Delete(ctx, w)
			}
		}
	}()
	if t.Failed() {
		return
	}
	eventually(t, "the watches poll once the stuck one's poll ended", func() bool {
		for _, w := range []*v1alpha1.SftpWatch{starved, elsewhere, brief} {
			if c := ready(w); c == nil || c.Status != metav1.ConditionTrue {
				return false
			}
		}
		return true
	})
	atMost("a watch that waited past the bound for its first poll", bSent.writesOf(starved), 4)
	atMost("a watch that waited past the bound for the replica's polls", bSent.writesOf(elsewhere), 4)
	atMost("a watch that waited within the bound", bSent.writesOf(brief), 3)
}
