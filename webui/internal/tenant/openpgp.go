package tenant

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/pgp"
	"github.com/sftpgate/sftpgate/webui/internal/web"
)

// An OpenPGP key the account uploaded is a Secret of its namespace, as a
// Transfer's openPGP reads it (key, passphrase), labelled with its kind
// and annotated with its fingerprints: pages show those, never the key.
const (
	labelOpenPGPKey        = "sftpgate.dev/openpgp-key"
	annotationFingerprints = "sftpgate.dev/openpgp-fingerprints"
	keyPublic, keyPrivate  = "public", "private"
	// maxOpenPGPKey bounds an uploaded key: a key block is a few KiB.
	maxOpenPGPKey = 64 << 10
)

// openPGPKey is an uploaded key as pages show it.
type openPGPKey struct {
	Name, Kind   string
	Fingerprints []string
}

// openPGPKeys are the account's keys, by name.
func (u *Pages) openPGPKeys(r *http.Request) ([]openPGPKey, error) {
	// Their metadata alone: the page needs no key to show them.
	var list metav1.PartialObjectMetadataList
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := u.Client.List(r.Context(), &list, client.InNamespace(web.AccountFrom(r.Context()).Namespace), client.HasLabels{labelOpenPGPKey}); err != nil {
		return nil, err
	}
	keys := make([]openPGPKey, 0, len(list.Items))
	for _, s := range list.Items {
		keys = append(keys, openPGPKey{Name: s.Name, Kind: s.Labels[labelOpenPGPKey],
			Fingerprints: strings.Fields(s.Annotations[annotationFingerprints])})
	}
	slices.SortFunc(keys, func(a, b openPGPKey) int { return strings.Compare(a.Name, b.Name) })
	return keys, nil
}

// ListOpenPGPKeys answers GET /openpgp.
func (u *Pages) ListOpenPGPKeys(w http.ResponseWriter, r *http.Request) error {
	return u.openPGPForm(map[string]string{})(w, r, http.StatusOK, web.Problems{})
}

// openPGPForm draws the keys page with its upload form, filled with values.
func (u *Pages) openPGPForm(values map[string]string) web.DrawForm {
	return func(w http.ResponseWriter, r *http.Request, status int, problem web.Problems) error {
		keys, err := u.openPGPKeys(r)
		if err != nil {
			return err
		}
		u.Render(w, r, status, "openpgp", web.Page{Title: "OpenPGP keys", Form: values, Error: problem.Form, Errors: problem.Fields, Data: keys})
		return nil
	}
}

// UploadOpenPGPKey keeps an uploaded key as a Secret, once it is read
// (and, private, unlocked by its passphrase).
func (u *Pages) UploadOpenPGPKey(w http.ResponseWriter, r *http.Request) error {
	// A public key pasted comes back with a mistake; a private key, or a
	// passphrase, never does.
	values := map[string]string{"name": strings.TrimSpace(r.PostFormValue("name")), "key": r.PostFormValue("key")}
	key, passphrase := []byte(values["key"]), []byte(r.PostFormValue("passphrase"))
	if strings.Contains(values["key"], "PRIVATE KEY") {
		values["key"] = ""
	}
	secret, err := OpenPGPKeySecret(web.AccountFrom(r.Context()).Namespace, values["name"], key, passphrase)
	if err == nil {
		err = u.Client.Create(r.Context(), secret)
		if apierrors.IsAlreadyExists(err) {
			err = web.FieldErrors{"name": "A Secret named " + values["name"] + " exists already: choose another name."}
		}
		err = u.quotaReached(err)
	}
	if err != nil {
		return web.OnForm(err, u.openPGPForm(values))
	}
	http.Redirect(w, r, "/openpgp", http.StatusSeeOther)
	return nil
}

// keyProblem says which field a key that does not read is about, and
// what to do, in words for the person: pgp's own name the Secret and the
// library's errors.
func keyProblem(err error) (field, msg string) {
	switch {
	case errors.Is(err, pgp.ErrLocked):
		return "passphrase", "This private key is locked: enter its passphrase."
	case errors.Is(err, pgp.ErrWrongPassphrase):
		return "passphrase", "This passphrase does not unlock the key."
	case errors.Is(err, pgp.ErrNotAKey):
		return "key", "This is not an OpenPGP key. Paste the whole block, from its -----BEGIN PGP line to its -----END PGP line, as gpg --export --armor writes it."
	case errors.Is(err, pgp.ErrTooManyKeys):
		return "key", "Give one key at a time: this holds more than may be kept together."
	}
	return "key", "This key cannot be used: " + err.Error() + "."
}

// OpenPGPKeySecret checks an OpenPGP key (armored; a private one unlocked
// by passphrase) and makes the Secret that keeps it, named name in ns, as
// the OpenPGP keys page makes and lists it: labelled with its kind and
// annotated with its fingerprints.
func OpenPGPKeySecret(ns, name string, key, passphrase []byte) (*corev1.Secret, error) {
	mistakes := web.FieldErrors{}
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		mistakes.Add("name", "Name the key with lower-case letters, digits and dashes, such as partner-bank.")
	}
	if len(key) > maxOpenPGPKey {
		mistakes.Add("key", "The key is larger than 64 KiB: give one key, armored (gpg --export --armor).")
		return nil, mistakes
	}
	keys, err := pgp.ReadKeys(key, passphrase, "the key")
	if err != nil {
		field, msg := keyProblem(err)
		mistakes.Add(field, msg)
	}
	if err := mistakes.Err(); err != nil {
		return nil, err
	}
	kind := keyPublic
	data := map[string][]byte{v1alpha1.OpenPGPSecretKey: key}
	if pgp.Private(keys) {
		kind = keyPrivate
		if len(passphrase) > 0 {
			data[v1alpha1.OpenPGPSecretPassphrase] = passphrase
		}
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels:      map[string]string{labelOpenPGPKey: kind},
		Annotations: map[string]string{annotationFingerprints: strings.Join(pgp.Fingerprints(keys), " ")}},
		Data: data}, nil
}

// openPGPKeyOf is the uploaded key the path names: only a Secret
// labelled as one, its metadata alone.
func (u *Pages) openPGPKeyOf(r *http.Request) (*metav1.PartialObjectMetadata, error) {
	var s metav1.PartialObjectMetadata
	s.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := u.teamObject(r, &s); err != nil {
		return nil, err
	}
	if s.Labels[labelOpenPGPKey] == "" {
		return nil, web.ErrNotFound
	}
	return &s, nil
}

// ConfirmDeleteOpenPGPKey answers GET /openpgp/{name}/delete.
func (u *Pages) ConfirmDeleteOpenPGPKey(w http.ResponseWriter, r *http.Request) error {
	s, err := u.openPGPKeyOf(r)
	if err != nil {
		return err
	}
	return u.Confirm(w, r, web.Confirmation{Question: "Delete the OpenPGP key " + s.Name + "?",
		Consequence: "Watches and transfers that use it fail until they are given another key. Files already decrypted or encrypted stay as they are.",
		Action:      r.URL.Path, Button: "Delete the key", Back: "/openpgp"})
}

// DeleteOpenPGPKey deletes an uploaded key: only a Secret labelled as one.
func (u *Pages) DeleteOpenPGPKey(w http.ResponseWriter, r *http.Request) error {
	s, err := u.openPGPKeyOf(r)
	if err != nil {
		return err
	}
	if err := client.IgnoreNotFound(u.Client.Delete(r.Context(), s, client.Preconditions{UID: &s.UID})); err != nil {
		return err
	}
	u.Notify(w, r, "The OpenPGP key "+s.Name+" is deleted.")
	http.Redirect(w, r, "/openpgp", http.StatusSeeOther)
	return nil
}
