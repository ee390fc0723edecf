// Package auditstore keeps tenants' audit records in ConfigMaps of
// sftpgate's namespace, where tenants cannot touch them: the outbox their
// AuditSink is delivered from and the recent records the web UI shows.
// Each component's replica stores its records every second, a segment per
// namespace (gzipped JSON Lines, never changed after), counted against the
// namespace's audit budget (apart from the rest of its state); the
// worker marks what it delivered and
// removes what is no longer needed.
package auditstore

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/storedbytes"
)

// Labels and annotations of a segment.
const (
	LabelSegment        = "sftpgate.dev/audit"
	annotationReplica   = "sftpgate.dev/audit-replica"
	annotationFirst     = "sftpgate.dev/audit-first"
	annotationLast      = "sftpgate.dev/audit-last"
	annotationRecords   = "sftpgate.dev/audit-records"
	annotationTime      = "sftpgate.dev/audit-time"
	annotationDelivered = "sftpgate.dev/audit-delivered"
	annotationLost      = "sftpgate.dev/audit-lost-recorded"
	dataKey             = "records.jsonl.gz"
)

// NamePrefix starts every segment's name.
const NamePrefix = "sftpgate-audit-"

// maxSegment is the most a segment's data may take; more is split. (A
// variable for the tests, which split with less.)
var maxSegment = 900 << 10

// Store keeps segments in Namespace.
type Store struct {
	// Client writes at the API server; Reader, when set, lists segments
	// (the worker's cache of what is stored), else Client does.
	Client    client.Client
	Reader    client.Reader
	Namespace string
	// Budget admits each segment against its tenant's budget.
	Budget *storedbytes.Budget
}

// Segment is one stored run of records of one replica's chain of one
// namespace, as its metadata says.
type Segment struct {
	Name, Tenant, Replica string
	First, Last           uint64
	Records, Delivered    int
	// LostRecorded: the records of it that could not be read are named
	// by a drop record already.
	LostRecorded bool
	// Bytes is what it counts against its tenant's audit budget.
	Bytes int64
	// Time is its first record's.
	Time time.Time
	uid  types.UID
}

// Pending is how many of its records are not delivered yet.
func (s Segment) Pending() int { return s.Records - s.Delivered }

// Keep stores records of namespace, one replica's, as one segment (or
// more, if one would be too large), and says how many from the first are
// stored: audit.Keeper.
func (s *Store) Keep(ctx context.Context, namespace string, records []audit.Record) (int, error) {
	records = slices.Clone(records)
	slices.SortFunc(records, func(a, b audit.Record) int { return cmp.Compare(a.Seq, b.Seq) })
	stored := 0
	for stored < len(records) {
		n, err := s.keepSegment(ctx, namespace, records[stored:])
		stored += n
		if err != nil {
			return stored, err
		}
	}
	return stored, nil
}

// keepSegment stores as many of records, from the first, as one segment
// holds, and says how many of them are stored.
func (s *Store) keepSegment(ctx context.Context, namespace string, records []audit.Record) (int, error) {
	n := len(records)
	data, err := encode(records)
	for err == nil && len(data) > maxSegment && n > 1 {
		n /= 2
		data, err = encode(records[:n])
	}
	if err != nil {
		return 0, err
	}
	first, last := records[0], records[n-1]
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: segmentName(first.Replica, namespace, first.Seq),
			Labels: map[string]string{LabelSegment: "", storedbytes.LabelKind: storedbytes.KindAudit},
			Annotations: map[string]string{
				annotationReplica: first.Replica,
				annotationFirst:   strconv.FormatUint(first.Seq, 10),
				annotationLast:    strconv.FormatUint(last.Seq, 10),
				annotationRecords: strconv.Itoa(n),
				annotationTime:    first.Time.UTC().Format(time.RFC3339Nano),
			}},
		BinaryData: map[string][]byte{dataKey: data},
	}
	storedbytes.Mark(cm, namespace, len(annotationDelivered)+10+len(annotationLost)+10)
	done, err := s.Budget.Admit(ctx, namespace, []*corev1.ConfigMap{cm}, nil)
	if err != nil {
		return 0, err
	}
	defer done()
	err = s.Client.Create(ctx, cm)
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return 0, err
		}
		return n, nil
	}
	// A store whose answer was lost made it, maybe of fewer records (split
	// elsewhere) or more: what it holds is stored, the rest goes on from
	// its last.
	var made corev1.ConfigMap
	if err := s.Client.Get(ctx, client.ObjectKeyFromObject(cm), &made); err != nil {
		return 0, err
	}
	madeLast, err := strconv.ParseUint(made.Annotations[annotationLast], 10, 64)
	if err != nil || made.Annotations[annotationReplica] != first.Replica {
		return 0, fmt.Errorf("audit segment %s holds other records", cm.Name)
	}
	return sort.Search(len(records), func(i int) bool { return records[i].Seq > madeLast }), nil
}

// segmentName names the segment of a chain from Seq first: a store tried
// again after a failure it did not see finds it made, and goes on from
// what it holds. It starts with NamePrefix and the replica's
// component, the prefix each component's service account may write
// (config/rbac/system_objects_policy.yaml).
func segmentName(replica, namespace string, first uint64) string {
	component, _, _ := strings.Cut(replica, "/")
	sum := sha256.Sum256([]byte(replica + "\n" + namespace))
	return fmt.Sprintf("%s%s-%s-%d", NamePrefix, component, hex.EncodeToString(sum[:10]), first)
}

func encode(records []audit.Record) ([]byte, error) {
	var b bytes.Buffer
	z, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed) // a valid level
	for _, r := range records {
		if _, err := z.Write(r.Line()); err != nil {
			return nil, err
		}
		if _, err := z.Write([]byte{'\n'}); err != nil {
			return nil, err
		}
	}
	if err := z.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// List returns the segments of tenant ("" for every tenant's), oldest
// first (by their first record's time, then chain and Seq).
func (s *Store) List(ctx context.Context, tenant string) ([]Segment, error) {
	var list metav1.PartialObjectMetadataList
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	opts := []client.ListOption{client.InNamespace(s.Namespace), client.HasLabels{LabelSegment}}
	if tenant != "" {
		opts = append(opts, client.MatchingLabels{storedbytes.LabelTenant: tenant})
	}
	if err := cmp.Or[client.Reader](s.Reader, s.Client).List(ctx, &list, opts...); err != nil {
		return nil, err
	}
	out := make([]Segment, 0, len(list.Items))
	for _, o := range list.Items {
		if o.DeletionTimestamp != nil {
			continue
		}
		a := o.Annotations
		seg := Segment{Name: o.Name, Tenant: o.Labels[storedbytes.LabelTenant], Replica: a[annotationReplica], uid: o.UID}
		seg.First, _ = strconv.ParseUint(a[annotationFirst], 10, 64)
		seg.Last, _ = strconv.ParseUint(a[annotationLast], 10, 64)
		seg.Records, _ = strconv.Atoi(a[annotationRecords])
		seg.Delivered, _ = strconv.Atoi(a[annotationDelivered])
		seg.LostRecorded = a[annotationLost] != ""
		seg.Time, _ = time.Parse(time.RFC3339Nano, a[annotationTime])
		seg.Bytes, _ = strconv.ParseInt(a[storedbytes.AnnotationBytes], 10, 64)
		out = append(out, seg)
	}
	slices.SortFunc(out, func(a, b Segment) int {
		return cmp.Or(a.Time.Compare(b.Time), cmp.Compare(a.Replica, b.Replica), cmp.Compare(a.First, b.First))
	})
	return out, nil
}

// maxRecords bounds what one segment read yields, whatever it holds.
const maxRecords = 100000

// Read reads seg's records, in Seq order, and names the spans of its
// chain it holds but could not read (a line or the rest of its data
// unreadable): they are lost, and whoever reads past them says so. err is
// only the API server's.
func (s *Store) Read(ctx context.Context, seg Segment) ([]audit.Record, []audit.Span, error) {
	var cm corev1.ConfigMap
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: seg.Name}, &cm); err != nil {
		return nil, nil, err
	}
	records := decode(cm.BinaryData[dataKey])
	return records, lostOf(seg, records), nil
}

// decode reads a segment's data as far as it can be read, up to
// maxRecords.
func decode(data []byte) []audit.Record {
	z, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil
	}
	records, _, _ := audit.Read(io.LimitReader(z, 64<<20))
	slices.SortStableFunc(records, func(a, b audit.Record) int { return cmp.Compare(a.Seq, b.Seq) })
	return records[:min(len(records), maxRecords)]
}

// lostOf are the runs of seg's Seqs, First to Last, that records lack,
// when it holds fewer than it was stored with (a run may also have been
// dropped before the store, and is then said twice, never not at all).
func lostOf(seg Segment, records []audit.Record) []audit.Span {
	if len(records) >= seg.Records {
		return nil
	}
	var lost []audit.Span
	next := seg.First
	add := func(to uint64) {
		if to >= next {
			lost = append(lost, audit.Span{Replica: seg.Replica, From: next, To: to})
		}
	}
	for _, r := range records {
		if r.Replica != seg.Replica || r.Seq < next || r.Seq > seg.Last {
			continue
		}
		add(r.Seq - 1)
		next = r.Seq + 1
	}
	add(seg.Last)
	return lost
}

// MarkDelivered notes that seg's first n records (of those Read reads)
// were delivered.
func (s *Store) MarkDelivered(ctx context.Context, seg Segment, n int) error {
	return s.annotate(ctx, seg, annotationDelivered, strconv.Itoa(n))
}

// MarkLostRecorded notes that a drop record names what of seg could not
// be read.
func (s *Store) MarkLostRecorded(ctx context.Context, seg Segment) error {
	return s.annotate(ctx, seg, annotationLost, "true")
}

func (s *Store) annotate(ctx context.Context, seg Segment, key, value string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: seg.Name}}
	patch := fmt.Appendf(nil, `{"metadata":{"uid":%q,"annotations":{%q:%q}}}`, seg.uid, key, value)
	return s.Client.Patch(ctx, cm, client.RawPatch(types.MergePatchType, patch))
}

// Delete removes seg.
func (s *Store) Delete(ctx context.Context, seg Segment) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: seg.Name}}
	return client.IgnoreNotFound(s.Client.Delete(ctx, cm, client.Preconditions{UID: &seg.uid}))
}
