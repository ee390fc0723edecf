// Package audit is the trail of what was done to a tenant's files and
// resources: the record, the chain that lets a reader tell that none was
// removed or changed between two it holds, and its verification.
//
// Each replica chains its records per namespace: the n-th record of a
// chain carries Seq n and the Hash of the record before it, and its own
// Hash covers both. A chain starts with Seq 1 when its replica starts
// (Replica names the process: a restart is a new chain) and ends with a
// closing record when the replica stops cleanly; a chain that ends
// without one ended with its replica, and may have lost the records of
// its last moments.
package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sftpgate/sftpgate/internal/logging"
)

// Actor is who acted: an ApiKey (Name its key id), a ServiceAccount
// (system:serviceaccount:<namespace>:<name>), a web UI account (its
// email), or an SftpWatch or Transfer (its name) acting for its tenant.
type Actor struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// Actors' kinds.
const (
	ActorKey            = "ApiKey"
	ActorServiceAccount = "ServiceAccount"
	ActorAccount        = "Account"
	ActorWatch          = "SftpWatch"
	ActorTransfer       = "Transfer"
	ActorShareLink      = "ShareLink"
	ActorExpectation    = "FileExpectation"
	// ActorSftpgate is sftpgate itself: a chain's closing and drop records.
	ActorSftpgate = "sftpgate"
)

// Results other than an error code.
const (
	ResultOK = "ok"
)

// Actions of sftpgate's own.
const (
	// ActionClosed closes a chain: its replica stopped cleanly, and
	// nothing follows.
	ActionClosed = "audit.closed"
	// ActionDropped says records were dropped (past a bound): Count of
	// them, Lost which, the drop itself recorded.
	ActionDropped = "audit.dropped"
)

// Record is one action. Its members are in the order of their JSON keys,
// sorted: the form its Hash covers. Object names the resource acted on
// ("ApiKey/ci"), Paths the files.
type Record struct {
	Action     string    `json:"action"`
	Actor      Actor     `json:"actor"`
	Bytes      int64     `json:"bytes,omitempty"`
	Client     string    `json:"client,omitempty"`
	Connection string    `json:"connection,omitempty"`
	Count      int64     `json:"count,omitempty"`
	Hash       string    `json:"hash,omitempty"`
	Lost       []Span    `json:"lost,omitempty"`
	Namespace  string    `json:"namespace"`
	Object     string    `json:"object,omitempty"`
	Paths      []string  `json:"paths,omitempty"`
	Prev       string    `json:"prev"`
	Replica    string    `json:"replica"`
	RequestID  string    `json:"requestID,omitempty"`
	Result     string    `json:"result"`
	Seq        uint64    `json:"seq"`
	SHA256     string    `json:"sha256,omitempty"`
	Time       time.Time `json:"time"`
	TraceID    string    `json:"traceID,omitempty"`

	// line is the record's JSON, as Link made it: logged and stored as
	// it is, not encoded again.
	line []byte
}

// Span names records of one replica's chain (of the namespace of the
// record that names it), Seq From to To: those a drop record says were
// dropped.
type Span struct {
	From    uint64 `json:"from"`
	Replica string `json:"replica"`
	To      uint64 `json:"to"`
}

// Sum is the hash of r: the hex SHA-256 of its JSON without hash, keys
// sorted, no spaces, no HTML escaping, times in RFC 3339 with nanoseconds.
func (r Record) Sum() string {
	r.Hash = ""
	r.Time = r.Time.UTC()
	sum := sha256.Sum256(r.encode())
	return hex.EncodeToString(sum[:])
}

// encode is r as JSON, its keys sorted (the members' order), no HTML
// escaping.
func (r Record) encode() []byte { return r.appendJSON(make([]byte, 0, 512)) }

// ReplicaName names a process's chains: the component, the host (a pod's
// name) and the moment it started, so that a restart starts new chains.
func ReplicaName(component string) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%s/%d", component, host, time.Now().UnixNano())
}

// Chains numbers and links the records of one replica, a chain per
// namespace. Safe for concurrent use.
type Chains struct {
	// Replica names this process's chains: unique per start.
	Replica string
	// Now is the clock; nil is time.Now.
	Now func() time.Time

	mu     sync.Mutex
	chains map[string]*chain
	// scratch holds a record's JSON without its hash while Link hashes
	// it: one buffer for every record, under mu.
	scratch []byte
}

type chain struct {
	seq  uint64
	last string
}

// Link gives r its place in its namespace's chain (Replica, Seq, Prev,
// Hash, and Time if unset) and returns it, each member within its bound
// (bounds.go): the hash covers exactly what is stored.
func (c *Chains) Link(r Record) Record {
	r = bounded(r)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.chains == nil {
		c.chains = map[string]*chain{}
	}
	ch := c.chains[r.Namespace]
	if ch == nil {
		ch = &chain{}
		c.chains[r.Namespace] = ch
	}
	if r.Time.IsZero() {
		now := time.Now
		if c.Now != nil {
			now = c.Now
		}
		r.Time = now()
	}
	r.Time = r.Time.UTC()
	ch.seq++
	r.Replica, r.Seq, r.Prev, r.Hash = bound(c.Replica, MaxMember), ch.seq, ch.last, ""
	c.scratch = r.appendJSON(c.scratch[:0])
	r.line = withHash(c.scratch, &r)
	ch.last = r.Hash
	return r
}

// withHash sets r's Hash, the hash of line (r without a hash, encoded),
// and returns r's line with it, in a new slice: the hash's member goes
// where its key sorts, before lost or namespace, so the line need not be
// encoded again.
func withHash(line []byte, r *Record) []byte {
	sum := sha256.Sum256(line)
	var digits [2 * sha256.Size]byte
	r.Hash = string(hex.AppendEncode(digits[:0], sum[:]))
	at := bytes.Index(line, []byte(`,"lost":`))
	if at < 0 {
		at = bytes.Index(line, []byte(`,"namespace":`))
	}
	out := make([]byte, 0, len(line)+len(`,"hash":""`)+len(r.Hash))
	out = append(out, line[:at]...)
	out = append(out, `,"hash":"`...)
	out = append(out, r.Hash...)
	out = append(out, '"')
	return append(out, line[at:]...)
}

// Close returns the closing record of every chain, linked.
func (c *Chains) Close() []Record {
	c.mu.Lock()
	namespaces := make([]string, 0, len(c.chains))
	for ns := range c.chains {
		namespaces = append(namespaces, ns)
	}
	c.mu.Unlock()
	out := make([]Record, 0, len(namespaces))
	for _, ns := range namespaces {
		out = append(out, c.Link(Record{Action: ActionClosed, Actor: Actor{Kind: ActorSftpgate}, Namespace: ns, Result: ResultOK}))
	}
	return out
}

// String is the record as a line of JSON Lines, in the form its hash
// covers.
func (r Record) String() string { return string(r.Line()) }

// Line is the record as a line of JSON Lines, without the newline: as
// Link made it, or encoded now.
func (r Record) Line() []byte {
	if r.line != nil {
		return r.line
	}
	return r.encode()
}

// MarshalJSON is Line: a batch of records encodes without reflection.
func (r Record) MarshalJSON() ([]byte, error) { return r.Line(), nil }

// Trail links records in its chains and writes each to a log, a line of
// its own ("msg":"audit"): the operator's view of every tenant's records;
// with a Keeper (Keep), it also stores each namespace's records for its
// tenant, every StoreEvery (Run). A nil Trail records nothing.
type Trail struct {
	Chains *Chains
	Log    *slog.Logger
	// Dropped counts the records dropped past the bounds before they
	// were stored (each named by a drop record); nil counts nothing.
	Dropped prometheus.Counter

	out *outbox
	// linking makes linking and holding one step: a namespace's records
	// are held in the order of their Seq.
	linking sync.Mutex
	storing sync.Mutex
}

// DroppedCounter is a component's count of audit records dropped (name:
// sftpgate_<component>_audit_records_dropped_total), by
// reason: held (past the bounds of what a replica holds before storing)
// or undelivered (past an AuditSink's outbox). On-call is told of both
// (config/prometheus).
func DroppedCounter(name string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: name,
		Help: "Audit records dropped, each named by a drop record: held (past what the replica holds before storing) or undelivered (past an AuditSink's outbox).",
	}, []string{"reason"})
}

// NewTrail is the trail of a component's process.
func NewTrail(component string, log *slog.Logger) *Trail {
	return &Trail{Chains: &Chains{Replica: ReplicaName(component)}, Log: log}
}

// Keep has the trail store its records with k, within bounds; call it
// before the trail records anything, and Run.
func (t *Trail) Keep(k Keeper, bounds Bounds) *Trail {
	t.out = &outbox{keeper: k, bounds: bounds.WithDefaults(), held: map[string]*held{}, closed: make(chan struct{})}
	return t
}

// Record links r, holds it to be stored, and logs it.
func (t *Trail) Record(ctx context.Context, r Record) Record {
	if t == nil {
		return r
	}
	r = t.link(r)
	t.log(ctx, r)
	return r
}

// link links r and holds it to be stored.
func (t *Trail) link(r Record) Record {
	t.linking.Lock()
	defer t.linking.Unlock()
	r = t.Chains.Link(r)
	if t.out != nil {
		t.out.hold(r)
	}
	return r
}

// log writes r's line, whatever the log's level.
func (t *Trail) log(ctx context.Context, r Record) {
	if t.Log == nil {
		return
	}
	logging.JSON(ctx, t.Log, r.Time, "audit", "record", r.Line())
}

// Close records the closing record of every chain, and stores what is
// held: the process stops, and its chains end whole. Call it once
// nothing records any more, after Run returned.
func (t *Trail) Close(ctx context.Context) {
	if t == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	if t.out != nil {
		t.out.closeOnce.Do(func() { close(t.out.closed) })
		// What is held first, so that a drop it records is not the
		// closing record's successor.
		t.store(ctx)
	}
	t.linking.Lock()
	closing := t.Chains.Close()
	if t.out != nil {
		for _, r := range closing {
			t.out.hold(r)
		}
	}
	t.linking.Unlock()
	for _, r := range closing {
		t.log(ctx, r)
	}
	if t.out != nil {
		t.store(ctx)
	}
}

// ResultOfStatus is the result of a request answered with an HTTP
// status and no error code of sftpgate's own (a resumable upload's
// answers, a web UI page): ok, or what the status means.
func ResultOfStatus(status int) string {
	switch {
	case status < 400:
		return ResultOK
	case status == http.StatusUnauthorized:
		return "invalid_credentials"
	case status == http.StatusForbidden:
		return "permission_denied"
	case status == http.StatusNotFound, status == http.StatusGone:
		return "not_found"
	case status == http.StatusConflict:
		return "conflict"
	case status == http.StatusRequestEntityTooLarge:
		return "too_large"
	case status == http.StatusTooManyRequests:
		return "rate_limited"
	case status == http.StatusServiceUnavailable:
		return "busy"
	case status < 500:
		return "invalid_request"
	}
	return "failed"
}

// ResultOf is an error's result in a record: ok, or what it means.
func ResultOf(err error) string {
	switch {
	case err == nil:
		return ResultOK
	case errors.Is(err, fs.ErrNotExist):
		return "not_found"
	case errors.Is(err, fs.ErrPermission):
		return "permission_denied"
	case errors.Is(err, fs.ErrExist):
		return "already_exists"
	}
	return "failed"
}
