// Package storedbytes keeps what sftpgate stores in its own namespace on
// a tenant's behalf (upload records, watch states, transfer plans: every
// ConfigMap labelled LabelTenant) within that tenant's budget, and all of
// it within a total that leaves etcd room for the rest of the cluster.
// Each write is admitted before it is made, never found too large after.
//
// Two replicas admitting writes of one namespace at the same moment may
// each see the other's bytes missing: a namespace can pass its budget by
// at most one write in flight per replica (a watch's or transfer's state
// of up to eight ConfigMaps, about 7 MiB; an upload record, 5 KiB). The
// total is read at most every totalEvery, plus what this process admitted
// since: each replica may pass what was left of it then by what it
// admits within totalEvery.
package storedbytes

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/internal/tenants"
)

// LabelTenant names the namespace an object is stored for; AnnotationBytes
// the bytes it counts.
const (
	LabelTenant     = "sftpgate.dev/stored-for"
	AnnotationBytes = "sftpgate.dev/stored-bytes"
	// LabelKind is KindAudit on audit records, which have budgets of
	// their own: a tenant's trail never crowds out its uploads, watches
	// and transfers, nor they its trail.
	LabelKind = "sftpgate.dev/stored-kind"
	KindAudit = "audit"
)

// Limits are the budgets; 0 is no limit.
type Limits struct {
	// PerNamespace bounds what is stored for one namespace, PerAccount
	// for a web UI account's (a stranger's).
	PerNamespace, PerAccount int64
	// AuditPerNamespace and AuditPerAccount bound the audit records
	// stored for one namespace, apart.
	AuditPerNamespace, AuditPerAccount int64
	// Total bounds everything stored, every namespace's together.
	Total int64
}

// Defaults of the limits: a watch of 100,000 files with long names
// stores about 6.4 MB; etcd refuses every write of the cluster past its
// quota (2 GiB unless raised).
const (
	DefaultPerNamespace      = 64 << 20
	DefaultPerAccount        = 16 << 20
	DefaultAuditPerNamespace = 8 << 20
	DefaultAuditPerAccount   = 4 << 20
	DefaultTotal             = 1 << 30
)

// totalEvery is how long a reading of the total serves.
const totalEvery = 10 * time.Second

// Budget admits writes. A nil *Budget admits everything.
type Budget struct {
	// Client reads what is stored from the API server's watch cache.
	Client client.Reader
	// Cache, when set, reads it instead: an informer of the metadata of
	// Namespace's ConfigMaps with LabelTenant, indexed by TenantIndex
	// (see Watch). A read at the API server filters every stored object
	// of every tenant, on every write: at thousands of watches, that
	// filtering took the API server's CPU.
	Cache     client.Reader
	Namespace string
	Limits    Limits
	Tenants   tenants.Kinds

	// locks serialise this process's admissions of one namespace, each
	// held until its write is made.
	locks tenantLocks

	mu       sync.Mutex
	total    int64
	totalAt  time.Time
	admitted int64
}

// overhead is what etcd keeps of any object besides its names and data:
// its UID, times, resourceVersion, the managed fields.
const overhead = 512

// Size is the bytes cm takes: its name, labels, annotations and data, and
// the overhead of an object.
func Size(cm *corev1.ConfigMap) int64 {
	n := overhead + len(cm.Name)
	for k, v := range cm.Labels {
		n += len(k) + len(v)
	}
	for k, v := range cm.Annotations {
		n += len(k) + len(v)
	}
	for k, v := range cm.Data {
		n += len(k) + len(v)
	}
	for k, v := range cm.BinaryData {
		n += len(k) + len(v)
	}
	return int64(n)
}

// Mark labels cm as stored for tenant and notes its size, with room for
// extra bytes it may gain later (annotations); call it once cm is
// otherwise complete.
func Mark(cm *corev1.ConfigMap, tenant string, extra int) {
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Labels[LabelTenant] = tenant
	cm.Annotations[AnnotationBytes] = "0000000000" // its own room
	cm.Annotations[AnnotationBytes] = strconv.FormatInt(Size(cm)+int64(extra), 10)
}

// bytesOf is what an object's annotation says it counts.
func bytesOf(o metav1.Object) int64 {
	n, _ := strconv.ParseInt(o.GetAnnotations()[AnnotationBytes], 10, 64)
	return max(n, 0)
}

// ExceededError is a write refused: it would take Tenant past its budget
// (or, Total, everything past the total).
type ExceededError struct {
	Tenant                string
	Stored, Adding, Limit int64
	Total                 bool
}

func (e *ExceededError) Error() string {
	q := func(n int64) string { return resource.NewQuantity(n, resource.BinarySI).String() }
	if e.Total {
		return fmt.Sprintf("sftpgate stores %s for all namespaces together; %s more would pass its total of %s: ask the operator", q(e.Stored), q(e.Adding), q(e.Limit))
	}
	return fmt.Sprintf("sftpgate stores %s for namespace %s (upload records, watch states, transfer plans); %s more would pass its budget of %s: finish or remove uploads, watches or transfers", q(e.Stored), e.Tenant, q(e.Adding), q(e.Limit))
}

// Admit says whether tenant may store objs (each Marked), in place of
// those of its stored objects that replaced says they replace (nil:
// none). Admitted, done must be called once the write is made or given
// up; until then another admission of tenant's in this process waits
// (as long as its ctx lets it).
func (b *Budget) Admit(ctx context.Context, tenant string, objs []*corev1.ConfigMap, replaced func(metav1.Object) bool) (done func(), err error) {
	if b == nil {
		return func() {}, nil
	}
	var adding int64
	audit := false
	for _, cm := range objs {
		adding += bytesOf(cm)
		audit = cm.Labels[LabelKind] == KindAudit
	}
	unlock, err := b.locks.lock(ctx, tenant)
	if err != nil {
		return nil, err
	}
	admitted := false
	defer func() {
		if !admitted {
			unlock() // refused, failed or panicked
		}
	}()
	items, err := b.list(ctx, tenant)
	if err != nil {
		return nil, fmt.Errorf("counting what is stored for namespace %s: %w", tenant, err)
	}
	var stored, freed int64
	for i := range items {
		if isAudit(&items[i]) != audit {
			continue
		}
		n := bytesOf(&items[i])
		stored += n
		if replaced != nil && replaced(&items[i]) {
			freed += n
		}
	}
	limit := b.Limit(ctx, tenant, audit)
	if limit > 0 && adding > freed && stored-freed+adding > limit {
		return nil, &ExceededError{Tenant: tenant, Stored: stored, Adding: adding - freed, Limit: limit}
	}
	if err := b.admitTotal(ctx, adding-freed); err != nil {
		return nil, err
	}
	admitted = true
	return unlock, nil
}

// Limit is tenant's budget: of its audit records, or of the rest.
func (b *Budget) Limit(ctx context.Context, tenant string, audit bool) int64 {
	perNamespace, perAccount := b.Limits.PerNamespace, b.Limits.PerAccount
	if audit {
		perNamespace, perAccount = b.Limits.AuditPerNamespace, b.Limits.AuditPerAccount
	}
	if !b.Tenants.IsAccount(ctx, tenant) {
		return perNamespace
	}
	return accountLimit(perNamespace, perAccount)
}

// accountLimit is a web UI account's budget, never more than any
// namespace's.
func accountLimit(perNamespace, perAccount int64) int64 {
	if perNamespace > 0 && (perAccount <= 0 || perNamespace < perAccount) {
		return perNamespace
	}
	return perAccount
}

func isAudit(o metav1.Object) bool { return o.GetLabels()[LabelKind] == KindAudit }

// TenantIndex is the index of the informer a Budget's Cache reads: the
// namespace each object is stored for.
const TenantIndex = "sftpgate.dev/stored-for"

// Watch makes the objects' informer of the cache of a manager that a
// Budget of namespace reads as its Cache: options for its cache.Options'
// ByObject, and the index to add once the manager is made.
func Watch(namespace string) (client.Object, cache.ByObject, func(context.Context, client.FieldIndexer) error) {
	stored, _ := labels.NewRequirement(LabelTenant, selection.Exists, nil)
	obj := storedObject()
	return obj, cache.ByObject{Namespaces: map[string]cache.Config{namespace: {}}, Label: labels.NewSelector().Add(*stored)},
		func(ctx context.Context, indexer client.FieldIndexer) error {
			return indexer.IndexField(ctx, storedObject(), TenantIndex, func(o client.Object) []string {
				return []string{o.GetLabels()[LabelTenant]}
			})
		}
}

func storedObject() *metav1.PartialObjectMetadata {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	return obj
}

// list reads the metadata of the objects stored for tenant (every tenant
// for ""): from the Cache, or from the API server's watch cache
// (resourceVersion 0; a consistent read would wait for it to catch up
// with etcd on every write, and under load time out). What either may
// miss is a write of the last moments, which a budget of megabytes can
// bear. The Cache's items are its own objects, not copies of every one
// on every write: they are only read.
func (b *Budget) list(ctx context.Context, tenant string) ([]metav1.PartialObjectMetadata, error) {
	var list metav1.PartialObjectMetadataList
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	opts := []client.ListOption{client.InNamespace(b.Namespace), client.UnsafeDisableDeepCopy}
	reader := b.Cache
	switch {
	case reader != nil && tenant != "":
		opts = append(opts, client.MatchingFields{TenantIndex: tenant})
	case reader != nil:
		opts = append(opts, client.HasLabels{LabelTenant})
	case tenant != "":
		reader, opts = b.Client, append(opts, client.MatchingLabels{LabelTenant: tenant}, fromWatchCache())
	default:
		reader, opts = b.Client, append(opts, client.HasLabels{LabelTenant}, fromWatchCache())
	}
	if err := reader.List(ctx, &list, opts...); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// fromWatchCache is a list from the API server's watch cache: new on each
// call, since a List writes into the options it is given (shared, two at
// once raced).
func fromWatchCache() *client.ListOptions {
	return &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}}
}

// Used is the bytes stored for tenant, as the budget counts them: its
// audit records apart.
func (b *Budget) Used(ctx context.Context, tenant string) (int64, error) {
	items, err := b.list(ctx, tenant)
	var n int64
	for i := range items {
		if isAudit(&items[i]) {
			continue
		}
		n += bytesOf(&items[i])
	}
	return n, err
}

// admitTotal admits delta more bytes in all.
func (b *Budget) admitTotal(ctx context.Context, delta int64) error {
	if b.Limits.Total <= 0 || delta <= 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if time.Since(b.totalAt) >= totalEvery {
		items, err := b.list(ctx, "")
		if err != nil {
			return fmt.Errorf("counting what sftpgate stores: %w", err)
		}
		b.total, b.admitted, b.totalAt = 0, 0, time.Now()
		for i := range items {
			b.total += bytesOf(&items[i])
		}
	}
	if b.total+b.admitted+delta > b.Limits.Total {
		return &ExceededError{Stored: b.total + b.admitted, Adding: delta, Limit: b.Limits.Total, Total: true}
	}
	b.admitted += delta
	return nil
}

// tenantLocks is a lock per namespace, held only while used.
type tenantLocks struct {
	mu   sync.Mutex
	held map[string]*tenantLock
}

type tenantLock struct {
	ch    chan struct{}
	users int
}

// lock takes tenant's lock, waiting while ctx lets it; unlock gives it
// back (once, however often it is called).
func (l *tenantLocks) lock(ctx context.Context, tenant string) (unlock func(), err error) {
	l.mu.Lock()
	if l.held == nil {
		l.held = map[string]*tenantLock{}
	}
	tl := l.held[tenant]
	if tl == nil {
		tl = &tenantLock{ch: make(chan struct{}, 1)}
		l.held[tenant] = tl
	}
	tl.users++
	l.mu.Unlock()
	leave := func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if tl.users--; tl.users == 0 {
			delete(l.held, tenant)
		}
	}
	select {
	case tl.ch <- struct{}{}:
		return sync.OnceFunc(func() { <-tl.ch; leave() }), nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}

// WithDefaults is l with each zero limit set to its default; a negative
// one is no limit.
func (l Limits) WithDefaults() Limits {
	or := func(v *int64, def int64) {
		if *v == 0 {
			*v = def
		}
	}
	or(&l.PerNamespace, DefaultPerNamespace)
	or(&l.PerAccount, DefaultPerAccount)
	or(&l.AuditPerNamespace, DefaultAuditPerNamespace)
	or(&l.AuditPerAccount, DefaultAuditPerAccount)
	or(&l.Total, DefaultTotal)
	return l
}

// ForAccounts is l for a component whose every tenant is a web UI
// account (the web UI): each per-namespace budget is the account's, so
// its Budget need not ask which namespaces are accounts.
func (l Limits) ForAccounts() Limits {
	l.PerNamespace = accountLimit(l.PerNamespace, l.PerAccount)
	l.AuditPerNamespace = accountLimit(l.AuditPerNamespace, l.AuditPerAccount)
	return l
}

// RegisterFlags adds the budget's flags, which the gateway and the worker
// both take (set them alike): each a quantity such as 64Mi, 0 for no
// limit. l holds the defaults.
func RegisterFlags(fs *flag.FlagSet, l *Limits) {
	for _, f := range []struct {
		p     *int64
		name  string
		usage string
	}{
		{&l.PerNamespace, "max-state-bytes-per-namespace", "Bytes sftpgate may store in its namespace for one namespace's upload records, watch states and transfer plans"},
		{&l.PerAccount, "max-state-bytes-per-account", "The same for a web UI account's namespace"},
		{&l.AuditPerNamespace, "max-audit-bytes-per-namespace", "Bytes sftpgate may store in its namespace for one namespace's audit records (apart from the rest)"},
		{&l.AuditPerAccount, "max-audit-bytes-per-account", "The same for a web UI account's namespace"},
		{&l.Total, "max-state-bytes-total", "Bytes sftpgate may store in its namespace for all namespaces together; keep it well below etcd's quota"},
	} {
		usage := fmt.Sprintf("%s, as a quantity; 0 is no limit (default %s).", f.usage, resource.NewQuantity(*f.p, resource.BinarySI))
		fs.Func(f.name, usage, func(v string) error {
			q, err := resource.ParseQuantity(v)
			if err != nil || q.Value() < 0 {
				return fmt.Errorf("want a quantity such as 64Mi, or 0, not %q", v)
			}
			*f.p = q.Value()
			if *f.p == 0 {
				*f.p = -1
			}
			return nil
		})
	}
}

// The bytes stored for each namespace, and its budget, for the alert on
// one near it: read at each scrape from the Cache (a Budget without one
// gives none).
var (
	storedDesc = prometheus.NewDesc("sftpgate_stored_bytes",
		"Bytes sftpgate stores for the namespace, as its budget counts them: kind audit (its audit records) or state (the rest).",
		[]string{"namespace", "kind"}, nil)
	limitDesc = prometheus.NewDesc("sftpgate_stored_bytes_limit",
		"The namespace's budget of stored bytes, of the kind (--max-state-bytes-per-namespace and its kin).", []string{"namespace", "kind"}, nil)
)

// Describe and Collect make a Budget a Prometheus collector.
func (b *Budget) Describe(ch chan<- *prometheus.Desc) {
	ch <- storedDesc
	ch <- limitDesc
}

// Collect gives each namespace's stored bytes and budget, by kind.
func (b *Budget) Collect(ch chan<- prometheus.Metric) {
	if b.Cache == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	items, err := b.list(ctx, "")
	if err != nil {
		return
	}
	type key struct {
		tenant string
		audit  bool
	}
	used := map[key]int64{}
	for i := range items {
		used[key{items[i].GetLabels()[LabelTenant], isAudit(&items[i])}] += bytesOf(&items[i])
	}
	for k, n := range used {
		kind := "state"
		if k.audit {
			kind = KindAudit
		}
		ch <- prometheus.MustNewConstMetric(storedDesc, prometheus.GaugeValue, float64(n), k.tenant, kind)
		if limit := b.Limit(ctx, k.tenant, k.audit); limit > 0 {
			ch <- prometheus.MustNewConstMetric(limitDesc, prometheus.GaugeValue, float64(limit), k.tenant, kind)
		}
	}
}
