// Package uploadrecord keeps the records of resumable uploads (tus) in
// ConfigMaps of sftpgate's namespace: whose upload it is, of which file on
// which connection, how large, and until when it may go on. The bytes are
// on the SFTP server, in a partial file beside the target; the record is
// what lets any gateway replica continue an upload another began, and the
// worker remove what was abandoned. Tenants cannot read or write it.
package uploadrecord

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/internal/plainjson"
	"github.com/sftpgate/sftpgate/internal/storedbytes"
)

// Labels of the records: every record has LabelUpload; LabelNamespace
// names the namespace of its connection, to count a namespace's uploads,
// and labelExpires when it expires (Unix seconds), so that an expired
// upload stops counting at once, before the worker removes it.
const (
	LabelUpload    = "sftpgate.dev/upload"
	LabelNamespace = "sftpgate.dev/upload-namespace"
	labelExpires   = "sftpgate.dev/upload-expires"
)

// namePrefix starts a record's ConfigMap name; the id follows.
const namePrefix = "sftpgate-upload-"

// dataKey holds the record's JSON in its ConfigMap.
const dataKey = "record"

// Record is one resumable upload.
type Record struct {
	ID string `json:"id"`
	// Namespace, Kind, Connection and ConnectionUID name the connection
	// it writes to: a connection made again under the same name is
	// another. Kind is "" for an SftpConnection (records before kinds).
	Namespace     string    `json:"namespace"`
	Kind          string    `json:"kind,omitempty"`
	Connection    string    `json:"connection"`
	ConnectionUID types.UID `json:"connectionUID"`
	// Owner is the UID of the API key or ServiceAccount that began it:
	// nobody else may see, continue or end it.
	Owner types.UID `json:"owner"`
	// Target and Partial are server paths: the file it makes, and where
	// its bytes gather meanwhile.
	Target    string            `json:"target"`
	Partial   string            `json:"partial"`
	Size      int64             `json:"size"`
	Overwrite bool              `json:"overwrite"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	// Root is the connection's root when the upload began: under another
	// root the upload is over (its target may now be outside).
	Root    string    `json:"root,omitempty"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`

	uid types.UID
	// holder holds the upload until heldUntil (Hold), as read.
	holder    string
	heldUntil time.Time
	// failedSweeps counts the sweeps that could not remove it
	// (FailedSweep), as read.
	failedSweeps int
}

// NewID is a new upload id: 130 random bits, unguessable, in lower-case
// base32 (a ConfigMap name's alphabet).
func NewID() string { return strings.ToLower(rand.Text()) }

// APIError is a failure of the Kubernetes API server's to keep records.
type APIError struct{ Err error }

func (e *APIError) Error() string { return "upload records: " + e.Err.Error() }
func (e *APIError) Unwrap() error { return e.Err }

// apiError marks err as the API server's; nil stays nil.
func apiError(err error) error {
	if err == nil {
		return nil
	}
	return &APIError{Err: err}
}

// ErrNotFound is an id no record has.
var ErrNotFound = errors.New("no such upload")

// Store reads and writes records in Namespace.
type Store struct {
	Client    client.Client
	Namespace string
	// Budget admits each new record against its namespace's budget (nil:
	// every one).
	Budget *storedbytes.Budget
	// Reader, when set, is where Expired looks for expired records: a
	// cache of the metadata of Namespace's ConfigMaps stored for tenants
	// (storedbytes.Watch), which every record admitted by a Budget is.
	// Without it Expired lists at the API server, which reads every
	// ConfigMap of Namespace to find the records.
	Reader client.Reader
}

// laterRoom is what the annotations a record gets after its creation add
// to it, counted from its creation: a hold (annotationHeld) and the
// failed sweeps' count (annotationFailedSweeps, a few digits).
const laterRoom = len(annotationHeld) + 64 + len(annotationFailedSweeps) + 8

// Create stores a new record, if its namespace's budget has room for it:
// else a *storedbytes.ExceededError.
func (s *Store) Create(ctx context.Context, r *Record) error {
	cm, err := s.configMap(r)
	if err != nil {
		return err
	}
	storedbytes.Mark(cm, r.Namespace, laterRoom)
	done, err := s.Budget.Admit(ctx, r.Namespace, []*corev1.ConfigMap{cm}, nil)
	if err != nil {
		if _, ok := errors.AsType[*storedbytes.ExceededError](err); ok {
			return err
		}
		return apiError(err)
	}
	defer done()
	if err := s.Client.Create(ctx, cm); err != nil {
		return apiError(err)
	}
	r.uid = cm.UID
	return nil
}

// MetadataSize is the bytes meta takes in a record, as stored: a control
// byte or an invalid UTF-8 byte, escaped, takes six.
func MetadataSize(meta map[string]string) int {
	data, err := plainjson.Marshal(meta)
	if err != nil {
		return math.MaxInt
	}
	return len(data)
}

// Get reads the record of id, at the API server.
func (s *Store) Get(ctx context.Context, id string) (*Record, error) {
	if !validID(id) {
		return nil, ErrNotFound
	}
	var cm corev1.ConfigMap
	err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: namePrefix + id}, &cm)
	if apierrors.IsNotFound(err) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, apiError(err)
	}
	return decode(&cm)
}

// validID says whether id could be one NewID made: anything else is no
// upload, and never reaches the API server as a name.
func validID(id string) bool {
	if len(id) != 26 {
		return false
	}
	for _, c := range id {
		if (c < 'a' || c > 'z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}

// annotationHeld names who holds an upload, and until when: one request
// at a time writes to it, whichever gateway replica it reaches.
const annotationHeld = "sftpgate.dev/held-by"

// ErrHeld is an upload another request holds.
var ErrHeld = errors.New("another request is writing to this upload")

// Hold takes the upload's hold for holder until until (or extends it),
// unless another holder's has not lapsed: ErrHeld.
func (s *Store) Hold(ctx context.Context, id, holder string, until time.Time) error {
	return s.modify(ctx, id, func(cm *corev1.ConfigMap) (bool, error) {
		if other, lapses := heldBy(cm); other != "" && other != holder && time.Now().Before(lapses) {
			return false, ErrHeld
		}
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[annotationHeld] = holder + " " + until.UTC().Format(time.RFC3339Nano)
		return true, nil
	})
}

// Release gives the upload's hold back, if holder still has it.
func (s *Store) Release(ctx context.Context, id, holder string) error {
	err := s.modify(ctx, id, func(cm *corev1.ConfigMap) (bool, error) {
		if other, _ := heldBy(cm); other != holder {
			return false, nil
		}
		delete(cm.Annotations, annotationHeld)
		return true, nil
	})
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// Held says whether a holder's hold on r had not lapsed when it was read.
func (r *Record) Held(now time.Time) bool { return r.holder != "" && now.Before(r.heldUntil) }

func heldBy(cm *corev1.ConfigMap) (string, time.Time) {
	holder, until, _ := strings.Cut(cm.Annotations[annotationHeld], " ")
	t, err := time.Parse(time.RFC3339Nano, until)
	if err != nil {
		return "", time.Time{}
	}
	return holder, t
}

// modify changes id's ConfigMap with change (which says whether it
// changed anything), again on a conflict with another writer.
func (s *Store) modify(ctx context.Context, id string, change func(*corev1.ConfigMap) (bool, error)) error {
	if !validID(id) {
		return ErrNotFound
	}
	for {
		var cm corev1.ConfigMap
		err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: namePrefix + id}, &cm)
		if apierrors.IsNotFound(err) {
			return ErrNotFound
		}
		if err != nil {
			return apiError(err)
		}
		changed, err := change(&cm)
		if err != nil || !changed {
			return err
		}
		err = s.Client.Update(ctx, &cm)
		if !apierrors.IsConflict(err) {
			if apierrors.IsNotFound(err) {
				return ErrNotFound
			}
			return apiError(err)
		}
	}
}

// annotationFailedSweeps counts the worker's sweeps that could not remove
// an expired upload's partial file.
const annotationFailedSweeps = "sftpgate.dev/failed-sweeps"

// FailedSweeps is how many sweeps could not remove r's partial file, as
// read.
func (r *Record) FailedSweeps() int { return r.failedSweeps }

// FailedSweep counts one more sweep that could not remove r's partial
// file, and says how many have: ErrNotFound when r is gone (or was made
// again meanwhile).
func (s *Store) FailedSweep(ctx context.Context, r *Record) (int, error) {
	n := 0
	err := s.modify(ctx, r.ID, func(cm *corev1.ConfigMap) (bool, error) {
		if cm.UID != r.uid {
			return false, ErrNotFound
		}
		n = failedSweeps(cm) + 1
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[annotationFailedSweeps] = strconv.Itoa(n)
		return true, nil
	})
	if err != nil {
		return 0, err
	}
	r.failedSweeps = n
	return n, nil
}

func failedSweeps(cm *corev1.ConfigMap) int {
	n, err := strconv.Atoi(cm.Annotations[annotationFailedSweeps])
	if err != nil {
		return 0
	}
	return max(n, 0)
}

// Delete removes r's record, unless it was made again meanwhile; one
// already gone is no error.
func (s *Store) Delete(ctx context.Context, r *Record) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: namePrefix + r.ID}}
	err := s.Client.Delete(ctx, cm, client.Preconditions{UID: &r.uid})
	return apiError(client.IgnoreNotFound(err))
}

// Count is how many uploads of namespace's connections are under way at
// now: those that expired no longer count.
func (s *Store) Count(ctx context.Context, namespace string, now time.Time) (int, error) {
	var list metav1.PartialObjectMetadataList
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := s.Client.List(ctx, &list, client.InNamespace(s.Namespace), client.MatchingLabels{LabelNamespace: namespace}); err != nil {
		return 0, apiError(err)
	}
	n := 0
	for _, cm := range list.Items {
		expires, err := strconv.ParseInt(cm.Labels[labelExpires], 10, 64)
		if err != nil || now.Before(time.Unix(expires, 0)) {
			n++
		}
	}
	return n, nil
}

// Expired reads every record that expired at or before by, by its label.
// One that does not decode comes with its id alone: it names no partial
// file. A record that could not be read is left out, and the first such
// failure returned with the others.
func (s *Store) Expired(ctx context.Context, by time.Time) ([]*Record, error) {
	var list metav1.PartialObjectMetadataList
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	opts := []client.ListOption{client.InNamespace(s.Namespace), client.HasLabels{LabelUpload}}
	reader := client.Reader(s.Client)
	if s.Reader != nil {
		reader = s.Reader
	}
	if err := reader.List(ctx, &list, opts...); err != nil {
		return nil, apiError(err)
	}
	var (
		records []*Record
		failed  error
	)
	for i := range list.Items {
		m := &list.Items[i]
		if expires, err := strconv.ParseInt(m.Labels[labelExpires], 10, 64); err == nil && time.Unix(expires, 0).After(by) {
			continue
		}
		var cm corev1.ConfigMap
		switch err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: m.Name}, &cm); {
		case apierrors.IsNotFound(err):
			continue
		case err != nil && ctx.Err() != nil:
			return records, apiError(err)
		case err != nil:
			// This one waits for the next sweep; the others go on.
			failed = cmp.Or(failed, apiError(err))
			continue
		}
		r, err := decode(&cm)
		if err != nil {
			r = &Record{ID: strings.TrimPrefix(cm.Name, namePrefix), uid: cm.UID}
		}
		records = append(records, r)
	}
	return records, failed
}

func (s *Store) configMap(r *Record) (*corev1.ConfigMap, error) {
	data, err := plainjson.Marshal(r)
	if err != nil {
		return nil, err
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.Namespace,
			Name:      namePrefix + r.ID,
			Labels: map[string]string{LabelUpload: "", LabelNamespace: r.Namespace,
				labelExpires: strconv.FormatInt(r.Expires.Unix(), 10)},
		},
		Data: map[string]string{dataKey: string(data)},
	}, nil
}

func decode(cm *corev1.ConfigMap) (*Record, error) {
	var r Record
	if err := json.Unmarshal([]byte(cm.Data[dataKey]), &r); err != nil {
		return nil, fmt.Errorf("upload record %s: %w", cm.Name, err)
	}
	if namePrefix+r.ID != cm.Name {
		return nil, fmt.Errorf("upload record %s names another id", cm.Name)
	}
	r.uid = cm.UID
	r.holder, r.heldUntil = heldBy(cm)
	r.failedSweeps = failedSweeps(cm)
	return &r, nil
}
