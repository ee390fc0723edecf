package watches

import (
	"context"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/tracing"
	"github.com/sftpgate/sftpgate/worker/ends"
	"github.com/sftpgate/sftpgate/worker/watch"
)

// TransferName is the name of the Transfer a watch makes for the change
// whose event id is id: the same after a restart or on another replica,
// so that a second try is refused by the API server as already there.
func TransferName(watchName, id string) string {
	const max = validation.DNS1123SubdomainMaxLength - 33 // "-" and the id
	name := watchName
	if len(name) > max {
		name = strings.TrimRight(name[:max], ".-")
	}
	return name + "-" + id
}

// defaultTransferTTL deletes the Transfers a watch made an hour after
// they finished, unless its spec says otherwise: each is one file's.
const defaultTransferTTL = 3600

// transferFor is the Transfer of p's file, as wt's spec.transfer says.
func transferFor(wt *v1alpha1.SftpWatch, p watch.Pending) *v1alpha1.Transfer {
	opts := *wt.Spec.Transfer.DeepCopy()
	// The file keeps its folder below the watched path.
	opts.Destination.Path = path.Join(opts.Destination.Path, path.Dir(p.Path))
	if opts.TTLSecondsAfterFinished == nil {
		ttl := int32(defaultTransferTTL)
		opts.TTLSecondsAfterFinished = &ttl
	}
	tr := &v1alpha1.Transfer{
		ObjectMeta: metav1.ObjectMeta{Namespace: wt.Namespace, Name: TransferName(wt.Name, p.ID),
			Annotations: map[string]string{v1alpha1.AnnotationEventID: p.ID},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "SftpWatch",
				Name: wt.Name, UID: wt.UID}}},
		Spec: v1alpha1.TransferSpec{
			Source:          v1alpha1.TransferSource{ConnectionRef: wt.Spec.ConnectionRef, Path: path.Join(wt.Spec.Path, p.Path)},
			TransferOptions: opts,
		},
	}
	if len(validation.IsValidLabelValue(wt.Name)) == 0 {
		tr.Labels = map[string]string{v1alpha1.LabelWatch: wt.Name}
	}
	return tr
}

// madeBy reports whether tr is one wt made.
func madeBy(tr *v1alpha1.Transfer, wt *v1alpha1.SftpWatch) bool {
	o := tr.MadeBy()
	return o != nil && o.UID == wt.UID
}

// start makes the Transfer of the outbox's head, p, unless it is there
// already; why says why it waits.
func (w *watcher) start(ctx context.Context, wt *v1alpha1.SftpWatch, p watch.Pending) (why string, atLimit bool) {
	tr := transferFor(wt, p)
	var got v1alpha1.Transfer
	err := w.r.Cache.Get(ctx, client.ObjectKeyFromObject(tr), &got)
	switch {
	case err == nil && madeBy(&got, wt):
		return "", false // made by an earlier try
	case err == nil:
		return fmt.Sprintf("a Transfer %s is in the namespace, and not this watch's: the file of %s waits", tr.Name, p.Path), false
	case !apierrors.IsNotFound(err):
		return "reading the namespace's Transfers: " + err.Error(), false
	}
	if n, err := w.triggered(ctx, wt.Namespace); err != nil {
		return "counting the namespace's Transfers: " + err.Error(), false
	} else if n >= w.r.Limits.MaxTransfersPerNamespace {
		return fmt.Sprintf("the namespace has %d Transfers made by watches, the most it may (--max-watch-transfers-per-namespace); the next is made when one is deleted (ttlSecondsAfterFinished)",
			n), true
	}
	// The trigger is a span, which the transfer's copies link to: they
	// run later, maybe on another replica.
	ctx, span := tracing.Tracer().Start(ctx, "trigger transfer", trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("sftpgate.namespace", wt.Namespace), attribute.String("sftpgate.watch", wt.Name),
			attribute.String("cloudevents.event_id", p.ID)))
	defer span.End()
	if parent := tracing.TraceParent(ctx); parent != "" {
		tr.Annotations[v1alpha1.AnnotationTraceParent] = parent
	}
	err = w.r.Client.Create(ctx, tr)
	if err == nil {
		w.r.made.add(tr.Namespace, tr.Name)
	} else {
		span.SetStatus(codes.Error, "the Transfer was not made")
	}
	switch {
	case apierrors.IsAlreadyExists(err):
		// Made by an earlier try the cache has not shown yet: the next
		// try looks at whose it is.
		return "the Transfer " + tr.Name + " is being made", false
	case err != nil:
		return "making the Transfer of " + p.Path + ": " + err.Error(), false
	}
	w.state.Started++
	w.state.LastTransfer = tr.Name
	w.dirty = true
	return "", false
}

// triggered counts the Transfers watches made in ns: those the cache
// shows, and those this replica made that it does not show yet.
func (w *watcher) triggered(ctx context.Context, ns string) (int, error) {
	var list v1alpha1.TransferList
	if err := w.r.Cache.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	n := 0
	shown := make(map[string]bool, len(list.Items))
	for i := range list.Items {
		if list.Items[i].MadeBy() != nil {
			n++
			shown[list.Items[i].Name] = true
		}
	}
	return n + w.r.made.unshown(ns, shown), nil
}

// recentlyMade is the Transfers a replica made, by namespace and name,
// until its cache shows them (or a minute passed: deleted meanwhile).
type recentlyMade struct {
	mu sync.Mutex
	of map[string]map[string]time.Time
}

func (m *recentlyMade) add(ns, name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.of == nil {
		m.of = map[string]map[string]time.Time{}
	}
	if m.of[ns] == nil {
		m.of[ns] = map[string]time.Time{}
	}
	m.of[ns][name] = time.Now()
}

// unshown counts ns's Transfers made and not among shown, forgetting
// those shown or older than goneAfter.
func (m *recentlyMade) unshown(ns string, shown map[string]bool) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for name, at := range m.of[ns] {
		if shown[name] || time.Since(at) > goneAfter {
			delete(m.of[ns], name)
			continue
		}
		n++
	}
	if len(m.of[ns]) == 0 {
		delete(m.of, ns)
	}
	return n
}

// goneAfter is how long a Transfer made may be missing from the cache
// before the watch takes it for deleted.
const goneAfter = time.Minute

// settle does what afterDelivery says with the files whose Transfers
// finished.
func (w *watcher) settle(ctx context.Context, wt *v1alpha1.SftpWatch, conn *ends.End) {
	kept := w.state.Running[:0]
	for _, r := range w.state.Running {
		var tr v1alpha1.Transfer
		err := w.r.Cache.Get(ctx, client.ObjectKey{Namespace: wt.Namespace, Name: TransferName(wt.Name, r.ID)}, &tr)
		switch {
		case apierrors.IsNotFound(err) && time.Since(r.Made) < goneAfter, err == nil && madeBy(&tr, wt) && !tr.Finished():
			kept = append(kept, r)
			continue
		case err != nil && !apierrors.IsNotFound(err):
			kept = append(kept, r)
			continue
		case err != nil || !madeBy(&tr, wt):
			w.lastErr = fmt.Sprintf("the Transfer of %s was deleted before it finished: the file stays where it is", r.Path)
		default:
			// A file its Transfer skipped (overwrite Never, a copy already
			// there) is not where the transfer should have put it.
			ok := meta.IsStatusConditionTrue(tr.Status.Conditions, v1alpha1.ConditionReady) && tr.Status.Files.Skipped == 0
			switch {
			case ok:
				w.state.Succeeded++
			case tr.Status.Files.Skipped > 0:
				w.state.TransfersFailed++
				w.lastErr = fmt.Sprintf("the Transfer %s skipped %s: a file is at its destination already (its overwrite policy)", tr.Name, r.Path)
			default:
				w.state.TransfersFailed++
				w.lastErr = fmt.Sprintf("the Transfer %s of %s failed", tr.Name, r.Path)
			}
			w.after(ctx, wt, conn, r.Event, ok && !r.Failed)
		}
		w.dirty = true
	}
	clear(w.state.Running[len(kept):])
	w.state.Running = kept
}
