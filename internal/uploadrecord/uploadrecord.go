// Package uploadrecord keeps the records of resumable uploads (tus) in
// ConfigMaps of sftpgate's namespace: whose upload it is, of which file on
// which connection, how large, and until when it may go on. The bytes are
// on the SFTP server, in a partial file beside the target; the record is
// what lets any gateway replica continue an upload another began, and the
// worker remove what was abandoned. Tenants cannot read or write it.
package uploadrecord

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Labels of the records: every record has LabelUpload; LabelNamespace
// names the namespace of its connection, to count a namespace's uploads.
const (
	LabelUpload    = "sftpgate.dev/upload"
	LabelNamespace = "sftpgate.dev/upload-namespace"
)

// namePrefix starts a record's ConfigMap name; the id follows.
const namePrefix = "sftpgate-upload-"

// dataKey holds the record's JSON in its ConfigMap.
const dataKey = "record"

// Record is one resumable upload.
type Record struct {
	ID string `json:"id"`
	// Namespace, Connection and ConnectionUID name the connection it
	// writes to: a connection made again under the same name is another.
	Namespace     string    `json:"namespace"`
	Connection    string    `json:"connection"`
	ConnectionUID types.UID `json:"connectionUID"`
	// Owner is the UID of the API key or ServiceAccount that began it:
	// nobody else may see, continue or end it.
	Owner types.UID `json:"owner"`
	// Target and Partial are server paths: the file it makes, and where
	// its bytes gather meanwhile.
	Target  string `json:"target"`
	Partial string `json:"partial"`
	// Root is the connection's root when it began, for the paths the
	// worker names in its log.
	Root      string            `json:"root"`
	Size      int64             `json:"size"`
	Overwrite bool              `json:"overwrite"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	Created   time.Time         `json:"created"`
	Expires   time.Time         `json:"expires"`
	// Finished is when its file was put in place; the record stays until
	// it expires, so that a client that lost the last answer learns that
	// its upload is complete.
	Finished *time.Time `json:"finished,omitempty"`

	uid             types.UID
	resourceVersion string
}

// NewID is a new upload id: 130 random bits, unguessable, in lower-case
// base32 (a ConfigMap name's alphabet).
func NewID() string { return strings.ToLower(rand.Text()) }

// ErrNotFound is an id no record has.
var ErrNotFound = errors.New("no such upload")

// Store reads and writes records in Namespace.
type Store struct {
	Client    client.Client
	Namespace string
}

// Create stores a new record.
func (s *Store) Create(ctx context.Context, r *Record) error {
	cm, err := s.configMap(r)
	if err != nil {
		return err
	}
	if err := s.Client.Create(ctx, cm); err != nil {
		return err
	}
	r.uid, r.resourceVersion = cm.UID, cm.ResourceVersion
	return nil
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
		return nil, err
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

// Finish records that r's file is in place.
func (s *Store) Finish(ctx context.Context, r *Record, at time.Time) error {
	r.Finished = &at
	cm, err := s.configMap(r)
	if err != nil {
		return err
	}
	cm.UID, cm.ResourceVersion = r.uid, r.resourceVersion
	if err := s.Client.Update(ctx, cm); err != nil {
		return err
	}
	r.resourceVersion = cm.ResourceVersion
	return nil
}

// Delete removes r's record, unless it was made again meanwhile; one
// already gone is no error.
func (s *Store) Delete(ctx context.Context, r *Record) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: namePrefix + r.ID}}
	err := s.Client.Delete(ctx, cm, client.Preconditions{UID: &r.uid})
	return client.IgnoreNotFound(err)
}

// Count is how many uploads of namespace's connections have a record.
func (s *Store) Count(ctx context.Context, namespace string) (int, error) {
	var list metav1.PartialObjectMetadataList
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := s.Client.List(ctx, &list, client.InNamespace(s.Namespace), client.MatchingLabels{LabelNamespace: namespace}); err != nil {
		return 0, err
	}
	return len(list.Items), nil
}

// List reads every record. One that does not decode comes with its id
// alone: it has expired, and names no partial file.
func (s *Store) List(ctx context.Context) ([]*Record, error) {
	var list corev1.ConfigMapList
	if err := s.Client.List(ctx, &list, client.InNamespace(s.Namespace), client.HasLabels{LabelUpload}); err != nil {
		return nil, err
	}
	records := make([]*Record, 0, len(list.Items))
	for i := range list.Items {
		cm := &list.Items[i]
		r, err := decode(cm)
		if err != nil {
			r = &Record{ID: strings.TrimPrefix(cm.Name, namePrefix), uid: cm.UID}
		}
		records = append(records, r)
	}
	return records, nil
}

func (s *Store) configMap(r *Record) (*corev1.ConfigMap, error) {
	data, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.Namespace,
			Name:      namePrefix + r.ID,
			Labels:    map[string]string{LabelUpload: "", LabelNamespace: r.Namespace},
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
	r.uid, r.resourceVersion = cm.UID, cm.ResourceVersion
	return &r, nil
}
