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
	dataKey             = "records.jsonl.gz"
)

// NamePrefix starts every segment's name.
const NamePrefix = "sftpgate-audit-"

// maxSegment is the most a segment's data may take; more is split.
const maxSegment = 900 << 10

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
	// Bytes is what it counts against its tenant's audit budget.
	Bytes int64
	// Time is its first record's.
	Time time.Time
	uid  types.UID
}

// Pending is how many of its records are not delivered yet.
func (s Segment) Pending() int { return s.Records - s.Delivered }

// Keep stores records of namespace, one replica's, as one segment (or
// more, if one would be too large): audit.Keeper.
func (s *Store) Keep(ctx context.Context, namespace string, records []audit.Record) error {
	if len(records) == 0 {
		return nil
	}
	records = slices.Clone(records)
	slices.SortFunc(records, func(a, b audit.Record) int { return cmp.Compare(a.Seq, b.Seq) })
	data, err := encode(records)
	if err != nil {
		return err
	}
	if len(data) > maxSegment && len(records) > 1 {
		half := len(records) / 2
		if err := s.Keep(ctx, namespace, records[:half]); err != nil {
			return err
		}
		return s.Keep(ctx, namespace, records[half:])
	}
	first, last := records[0], records[len(records)-1]
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: segmentName(first.Replica, namespace, first.Seq),
			Labels: map[string]string{LabelSegment: "", storedbytes.LabelKind: storedbytes.KindAudit},
			Annotations: map[string]string{
				annotationReplica: first.Replica,
				annotationFirst:   strconv.FormatUint(first.Seq, 10),
				annotationLast:    strconv.FormatUint(last.Seq, 10),
				annotationRecords: strconv.Itoa(len(records)),
				annotationTime:    first.Time.UTC().Format(time.RFC3339Nano),
			}},
		BinaryData: map[string][]byte{dataKey: data},
	}
	storedbytes.Mark(cm, namespace, len(annotationDelivered)+10)
	done, err := s.Budget.Admit(ctx, namespace, []*corev1.ConfigMap{cm}, nil)
	if err != nil {
		return err
	}
	defer done()
	if err := s.Client.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// segmentName names the segment of a chain from Seq first: the same
// records make the same name, so a store tried again after a failure it
// did not see is found made. It starts with NamePrefix and the replica's
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

// Read reads seg's records, in Seq order.
func (s *Store) Read(ctx context.Context, seg Segment) ([]audit.Record, error) {
	var cm corev1.ConfigMap
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: seg.Name}, &cm); err != nil {
		return nil, err
	}
	z, err := gzip.NewReader(bytes.NewReader(cm.BinaryData[dataKey]))
	if err != nil {
		return nil, fmt.Errorf("audit segment %s: %w", seg.Name, err)
	}
	records, err := audit.Read(io.LimitReader(z, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("audit segment %s: %w", seg.Name, err)
	}
	return records[:min(len(records), maxRecords)], nil
}

// MarkDelivered notes that seg's first n records were delivered.
func (s *Store) MarkDelivered(ctx context.Context, seg Segment, n int) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: seg.Name}}
	patch := fmt.Appendf(nil, `{"metadata":{"uid":%q,"annotations":{%q:%q}}}`, seg.uid, annotationDelivered, strconv.Itoa(n))
	return s.Client.Patch(ctx, cm, client.RawPatch(types.MergePatchType, patch))
}

// Delete removes seg.
func (s *Store) Delete(ctx context.Context, seg Segment) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: seg.Name}}
	return client.IgnoreNotFound(s.Client.Delete(ctx, cm, client.Preconditions{UID: &seg.uid}))
}
