// Package statestore keeps the state of a worker's items (a watch's, a
// transfer's) in ConfigMaps of the worker's own namespace, where tenants
// cannot touch it and a replica that takes an item over finds it. A state
// larger than one ConfigMap holds is split into parts, at most MaxParts;
// the head ConfigMap names the parts of the current write and is written
// last, in one write, so that a reader never sees half of a new state,
// and a replica that lost the item (a write on a stale head) is refused.
// Each write's parts have names of their own, so that a stale write never
// touches the parts the current head names.
package statestore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/storedbytes"
)

// The bounds of a state: PartSize is what one ConfigMap holds (the API
// server refuses one over 1 MiB), MaxParts how many a state may take.
const (
	PartSize = 900 << 10
	MaxParts = 8
)

// ErrTooLarge is a state over MaxParts parts.
var ErrTooLarge = fmt.Errorf("the state is larger than %d bytes", PartSize*MaxParts)

// ErrConflict is a write on a state someone else wrote meanwhile: another
// replica holds the item now.
var ErrConflict = errors.New("the state was written by another replica meanwhile")

// Labels and annotations of the ConfigMaps.
const (
	labelOf         = "sftpgate.dev/state-of"
	labelKind       = "sftpgate.dev/state-kind"
	annotationGen   = "sftpgate.dev/state-generation"
	annotationParts = "sftpgate.dev/state-parts"
	annotationWrite = "sftpgate.dev/state-write"
	keyPart         = "part"
)

// Store keeps states of one kind of item.
type Store struct {
	// Client reads and writes at the API server: states' data is not
	// cached.
	Client client.Client
	// Cache, if set, holds the metadata of every state's ConfigMaps (the
	// worker's cache of what is stored for tenants, storedbytes.Watch):
	// Keys reads it rather than list them all at the API server.
	Cache     client.Reader
	Namespace string
	// Kind names the items ("sftpwatch"); it starts the ConfigMaps' names.
	Kind string
	// Budget admits each state against the budget of the namespace it is
	// stored for (nil: every one).
	Budget *storedbytes.Budget
}

// Version is the stored state a replica last read or wrote: its next
// write is refused if another was made since.
type Version struct {
	resourceVersion string
	generation      int64
	// parts is how many ConfigMaps that state takes, and write what
	// names them: the next write removes those past the head by name,
	// with no list.
	parts int
	write string
}

func (s *Store) head(key string) string { return s.Kind + "-" + key }

// part is the name of part i of key's state written by write of
// generation gen ("" for a state written before writes were named).
func (s *Store) part(key string, gen int64, write string, i int) string {
	if write == "" {
		return fmt.Sprintf("%s-%s-%d-%d", s.Kind, key, gen, i)
	}
	return fmt.Sprintf("%s-%s-%d-%s-%d", s.Kind, key, gen, write, i)
}

// Load reads key's state; nil (and a zero Version) when there is none.
func (s *Store) Load(ctx context.Context, key string) ([]byte, Version, error) {
	head := &corev1.ConfigMap{}
	err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.head(key)}, head)
	if apierrors.IsNotFound(err) {
		return nil, Version{}, nil
	}
	if err != nil {
		return nil, Version{}, err
	}
	gen, _ := strconv.ParseInt(head.Annotations[annotationGen], 10, 64)
	parts, _ := strconv.Atoi(head.Annotations[annotationParts])
	write := head.Annotations[annotationWrite]
	if parts < 1 || parts > MaxParts {
		return nil, Version{}, fmt.Errorf("the state of %s names %d parts", key, parts)
	}
	blob := append([]byte(nil), head.BinaryData[keyPart]...)
	for i := 1; i < parts; i++ {
		cm := &corev1.ConfigMap{}
		if err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.part(key, gen, write, i)}, cm); err != nil {
			return nil, Version{}, fmt.Errorf("reading part %d of the state of %s: %w", i, key, err)
		}
		blob = append(blob, cm.BinaryData[keyPart]...)
	}
	return blob, Version{resourceVersion: head.ResourceVersion, generation: gen, parts: parts, write: write}, nil
}

// Save writes blob as key's state, stored for namespace tenant, on v
// (what was last read or written, which it updates), and removes the
// parts of older generations. A state past tenant's budget is refused
// before anything is written: a *storedbytes.ExceededError.
func (s *Store) Save(ctx context.Context, key, tenant string, blob []byte, v *Version) error {
	parts := (len(blob) + PartSize - 1) / PartSize
	if parts > MaxParts {
		return ErrTooLarge
	}
	parts = max(parts, 1)
	gen, write := v.generation+1, ""
	annotations := map[string]string{annotationGen: strconv.FormatInt(gen, 10), annotationParts: strconv.Itoa(parts)}
	if parts > 1 {
		write = strings.ToLower(rand.Text()[:8])
		annotations[annotationWrite] = write
	}
	head := s.configMap(key, tenant, s.head(key), blob[:min(len(blob), PartSize)], annotations)
	objs := []*corev1.ConfigMap{head}
	for i := 1; i < parts; i++ {
		objs = append(objs, s.configMap(key, tenant, s.part(key, gen, write, i), blob[i*PartSize:min(len(blob), (i+1)*PartSize)], nil))
	}
	// The new state replaces the whole of the old one.
	done, err := s.Budget.Admit(ctx, tenant, objs, func(o metav1.Object) bool {
		return o.GetLabels()[labelOf] == key && o.GetLabels()[labelKind] == s.Kind
	})
	if err != nil {
		return err
	}
	defer done()
	// This write's parts, removed again unless its head names them.
	written := Version{generation: gen, parts: 1, write: write}
	for _, cm := range objs[1:] {
		if err := s.Client.Create(ctx, cm.DeepCopy()); err != nil {
			_ = s.sweep(ctx, key, written)
			return err
		}
		written.parts++
	}
	if v.resourceVersion == "" {
		err = s.Client.Create(ctx, head)
	} else {
		head.ResourceVersion = v.resourceVersion
		err = s.Client.Update(ctx, head)
	}
	if refused(err) {
		// Surely not written: its parts go. After any other failure (a
		// timeout, a connection cut) the head may have been written, and
		// then names them.
		_ = s.sweep(ctx, key, written)
	}
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) && v.resourceVersion != "" {
		return ErrConflict
	}
	if err != nil {
		return err
	}
	old := *v
	*v = Version{resourceVersion: head.ResourceVersion, generation: gen, parts: parts, write: write}
	done() // the sweep only frees bytes
	return s.sweep(ctx, key, old)
}

// refused reports whether the API server surely did not make a write
// that failed with err.
func refused(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) ||
		apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsRequestEntityTooLargeError(err)
}

// Delete removes key's state, every part of it.
func (s *Store) Delete(ctx context.Context, key string) error {
	return client.IgnoreNotFound(s.Client.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(s.Namespace),
		client.MatchingLabels{labelOf: key, labelKind: s.Kind}))
}

// Keys lists the items that have a state stored, reading the ConfigMaps'
// metadata only, from the Cache if there is one: a state written or
// removed a moment ago may be missed or still listed, which the sweep it
// serves bears (it runs again, and Delete of what is gone does nothing).
func (s *Store) Keys(ctx context.Context) ([]string, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	var reader client.Reader = s.Client
	if s.Cache != nil {
		reader = s.Cache
	}
	// The cache's own objects, which are only read here.
	if err := reader.List(ctx, list, client.InNamespace(s.Namespace), client.MatchingLabels{labelKind: s.Kind},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var keys []string
	for _, cm := range list.Items {
		if key := cm.Labels[labelOf]; key != "" && !seen[key] {
			seen[key] = true
			keys = append(keys, key)
		}
	}
	return keys, nil
}

// sweep removes the parts of old past its head (the new head replaced
// it), by name: a list per write would read every state of the
// namespace, for every item. Parts a replica left when it died between
// a head and its sweep are removed with the item's state (Delete).
func (s *Store) sweep(ctx context.Context, key string, old Version) error {
	for i := 1; i < old.parts; i++ {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.part(key, old.generation, old.write, i)}}
		if err := s.Client.Delete(ctx, cm); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

func (s *Store) configMap(key, tenant, name string, data []byte, annotations map[string]string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: name, Annotations: annotations,
			Labels: map[string]string{labelOf: key, labelKind: s.Kind, v1alpha1.LabelManagedBy: v1alpha1.ManagedBy}},
		BinaryData: map[string][]byte{keyPart: data},
	}
	storedbytes.Mark(cm, tenant, 0)
	return cm
}
