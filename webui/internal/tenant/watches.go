package tenant

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/webui/internal/web"
)

// watchView is a watched folder as a connection's page shows it.
type watchView struct {
	Name, Path, Sink string
	// Transfer is where files go (connection:folder), and how, when the
	// watch transfers them; Transfers how many it started and how they
	// ended.
	Transfer  string
	Transfers v1alpha1.WatchTransferCounts
	Events    string
	// State is "testing" (not polled yet), "ready" or "failed".
	State, Headline, Message string
	Delivered                int64
	Pending                  int32
	LastPoll                 time.Time
}

// watchHeadlines say in words what a watch's Ready reason means.
var watchHeadlines = map[string]string{
	v1alpha1.ReasonWatching:           "Watching",
	v1alpha1.ReasonFirstPoll:          "Looking at the folder for the first time…",
	v1alpha1.ReasonConnectionNotReady: "The connection is not ready",
	v1alpha1.ReasonSinkNotFound:       "The webhook's address is not known",
	v1alpha1.ReasonSinkNotAllowed:     "This address is not allowed from here",
	v1alpha1.ReasonSinkUnreachable:    "The webhook does not answer",
	v1alpha1.ReasonPathNotFound:       "The folder does not exist on the server",
	v1alpha1.ReasonDirectoryTooLarge:  "The folder holds too many files to watch",
	v1alpha1.ReasonDeliveryFailing:    "The webhook does not take the events",
	v1alpha1.ReasonInvalidSpec:        "The settings cannot work",
	v1alpha1.ReasonOverQuota:          "Over a limit on watches, this account's or the service's",
	v1alpha1.ReasonTransfersAtLimit:   "This account keeps too many transfers: the next waits",
}

// watches lists the account's watches of connection c, newest first.
func (u *Pages) watches(ctx context.Context, c *v1alpha1.SftpConnection) ([]watchView, error) {
	var list v1alpha1.SftpWatchList
	if err := u.Client.List(ctx, &list, client.InNamespace(c.Namespace)); err != nil {
		return nil, err
	}
	slices.SortFunc(list.Items, func(a, b v1alpha1.SftpWatch) int { return b.CreationTimestamp.Compare(a.CreationTimestamp.Time) })
	var views []watchView
	for _, w := range list.Items {
		if w.Spec.ConnectionRef.Name != c.Name {
			continue
		}
		events := make([]string, 0, len(w.Spec.Events))
		for _, e := range w.Spec.Events {
			events = append(events, strings.ToLower(string(e)))
		}
		v := watchView{Name: w.Name, Path: w.Spec.Path, Events: strings.Join(events, ", "),
			State: "testing", Headline: "Waiting for the worker…", Delivered: w.Status.Delivered, Pending: w.Status.Pending}
		if w.Spec.Sink != nil {
			v.Sink = w.Spec.Sink.URI
		}
		if tr := w.Spec.Transfer; tr != nil {
			v.Transfer, v.Transfers = tr.Destination.ConnectionRef.Name+":"+tr.Destination.Path, w.Status.Transfers
			switch p := tr.OpenPGP; {
			case p != nil && p.Decrypt != nil:
				v.Transfer += ", decrypted"
			case p != nil && p.Encrypt != nil:
				v.Transfer += ", encrypted"
			}
		}
		if w.Status.LastPollTime != nil {
			v.LastPoll = w.Status.LastPollTime.Time
		}
		if ready := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady); ready != nil && ready.ObservedGeneration == w.Generation {
			v.Headline, v.Message = watchHeadlines[ready.Reason], ready.Message
			switch ready.Status {
			case metav1.ConditionTrue:
				v.State, v.Message = "ready", ""
			case metav1.ConditionFalse:
				v.State = "failed"
			}
		}
		views = append(views, v)
	}
	return views, nil
}

// NewWatchForm answers GET /connections/{name}/watches/new.
func (u *Pages) NewWatchForm(w http.ResponseWriter, r *http.Request, c *v1alpha1.SftpConnection) error {
	return u.watchForm(c, map[string]string{"path": "/", "created": "on", "folder": "/"})(w, r, http.StatusOK, web.Problems{})
}

// watchFormData is what the new-watch form offers: the connections a file
// may be transferred to, and the account's OpenPGP keys by kind.
type watchFormData struct {
	Conn            string
	Connections     []string
	Private, Public []openPGPKey
}

// watchForm draws the new-watch form of connection c, filled with values.
func (u *Pages) watchForm(c *v1alpha1.SftpConnection, values map[string]string) web.DrawForm {
	return func(w http.ResponseWriter, r *http.Request, status int, problem web.Problems) error {
		data := watchFormData{Conn: c.Name}
		var list v1alpha1.SftpConnectionList
		if err := u.Client.List(r.Context(), &list, client.InNamespace(c.Namespace)); err != nil {
			return err
		}
		for _, other := range list.Items {
			data.Connections = append(data.Connections, other.Name)
		}
		slices.Sort(data.Connections)
		keys, err := u.openPGPKeys(r)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if k.Kind == keyPrivate {
				data.Private = append(data.Private, k)
			} else {
				data.Public = append(data.Public, k)
			}
		}
		u.Render(w, r, status, "watch_form", web.Page{Title: "Watch a folder of " + c.Name, Form: values, Error: problem.Form, Errors: problem.Fields, Data: data})
		return nil
	}
}

// watchTransferFields are the form's fields of a transfer on arrival.
var watchTransferFields = []string{"to", "folder", "openpgp", "key", "verify", "recipient", "signwith", "done", "failed"}

// formEvents are the form's checkboxes, by the event each asks for.
var formEvents = []struct {
	field string
	event v1alpha1.WatchEvent
}{{"created", v1alpha1.WatchCreated}, {"modified", v1alpha1.WatchModified}, {"deleted", v1alpha1.WatchDeleted}}

// CreateWatch makes an SftpWatch of connection c that sends its events to
// the webhook the form names.
func (u *Pages) CreateWatch(w http.ResponseWriter, r *http.Request, c *v1alpha1.SftpConnection) error {
	values := map[string]string{"path": strings.TrimSpace(r.PostFormValue("path")), "url": strings.TrimSpace(r.PostFormValue("url"))}
	for _, e := range formEvents {
		values[e.field] = r.PostFormValue(e.field)
	}
	for _, field := range watchTransferFields {
		values[field] = strings.TrimSpace(r.PostFormValue(field))
	}
	watch, err := readWatchForm(c, values)
	if err == nil && watch.Spec.Transfer != nil {
		err = u.ownTransferRefs(r, c.Namespace, watch.Spec.Transfer)
	}
	if err == nil {
		err = u.createNoted(r, "SftpWatch", watch)
	}
	if err != nil {
		return web.OnForm(err, u.watchForm(c, values))
	}
	http.Redirect(w, r, "/connections/"+c.Name+"#watches", http.StatusSeeOther)
	return nil
}

// readWatchForm checks the form's values and makes the watch they
// describe; what the CRD's validation checks too (the folder's form) is
// checked here to say it in the form's words.
func readWatchForm(c *v1alpha1.SftpConnection, values map[string]string) (*v1alpha1.SftpWatch, error) {
	path := values["path"]
	if path == "" {
		path = "/"
	}
	mistakes := web.FieldErrors{}
	if !cleanPath(path) {
		mistakes.Add("path", fmt.Sprintf("%q is not a folder of the connection: start it with / (such as /incoming), with no . or .. parts.", path))
	}
	watch := &v1alpha1.SftpWatch{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, GenerateName: c.Name + "-"},
		Spec: v1alpha1.SftpWatchSpec{ConnectionRef: v1alpha1.ConnectionReference{Name: c.Name}, Path: path}}
	if values["url"] != "" || values["to"] == "" {
		target, err := url.Parse(values["url"])
		if err != nil || (target.Scheme != "https" && target.Scheme != "http") || target.Host == "" || target.User != nil {
			mistakes.Add("url", "Give the webhook's address, such as https://example.com/hooks/sftp, or a connection to transfer each file to.")
		} else {
			watch.Spec.Sink = &v1alpha1.Destination{URI: target.String()}
		}
	}
	if values["to"] != "" {
		readWatchTransfer(watch, values, mistakes)
	}
	for _, e := range formEvents {
		if values[e.field] != "" {
			watch.Spec.Events = append(watch.Spec.Events, e.event)
		}
	}
	if len(watch.Spec.Events) == 0 {
		mistakes.Add("events", "Choose at least one change to be told of.")
	}
	return watch, mistakes.Err()
}

// readWatchTransfer reads the form's transfer on arrival into watch,
// noting its mistakes.
func readWatchTransfer(watch *v1alpha1.SftpWatch, values map[string]string, mistakes web.FieldErrors) {
	for _, field := range []string{"folder", "done", "failed"} {
		if v := values[field]; v != "" && !cleanPath(v) {
			mistakes.Add(field, fmt.Sprintf("%q is not a folder: start it with / (such as /clear), with no . or .. parts.", v))
		}
	}
	opts := &v1alpha1.TransferOptions{Destination: v1alpha1.TransferDestination{
		ConnectionRef: v1alpha1.ConnectionReference{Name: values["to"]}, Path: cmp.Or(values["folder"], "/")}}
	switch values["openpgp"] {
	case "":
	case "decrypt":
		if values["key"] == "" {
			mistakes.Add("key", "Choose the private key that decrypts the files.")
		}
		d := &v1alpha1.OpenPGPDecrypt{KeySecretRef: v1alpha1.OpenPGPKeyRef{Name: values["key"]}}
		if v := values["verify"]; v != "" {
			d.VerifyWith = []v1alpha1.OpenPGPKeyRef{{Name: v}}
		}
		opts.OpenPGP = &v1alpha1.TransferOpenPGP{Decrypt: d}
	case "encrypt":
		if values["recipient"] == "" {
			mistakes.Add("recipient", "Choose the public key the files are encrypted to.")
		}
		e := &v1alpha1.OpenPGPEncrypt{Recipients: []v1alpha1.OpenPGPKeyRef{{Name: values["recipient"]}}}
		if v := values["signwith"]; v != "" {
			e.SignWith = &v1alpha1.OpenPGPKeyRef{Name: v}
		}
		opts.OpenPGP = &v1alpha1.TransferOpenPGP{Encrypt: e}
	default:
		mistakes.Add("openpgp", "Choose to decrypt, to encrypt, or neither.")
	}
	watch.Spec.Transfer = opts
	if values["done"] != "" {
		watch.Spec.AfterDelivery = v1alpha1.AfterDelivery{Action: v1alpha1.AfterDeliveryMove, MoveTo: values["done"]}
	}
	watch.Spec.AfterDelivery.FailedTo = values["failed"]
}

// ownTransferRefs checks that a transfer on arrival names the account's
// own connection and OpenPGP keys, each of the kind its place needs.
func (u *Pages) ownTransferRefs(r *http.Request, ns string, t *v1alpha1.TransferOptions) error {
	if err := u.ownConnections(r, ns, t.Destination.ConnectionRef.Name); err != nil {
		return err
	}
	if t.OpenPGP == nil {
		return nil
	}
	want := map[string]string{}
	private, public := t.OpenPGP.KeyRefs()
	for _, name := range public {
		want[name] = keyPublic
	}
	for _, name := range private {
		want[name] = keyPrivate
	}
	for name, kind := range want {
		var s corev1.Secret
		err := u.Client.Get(r.Context(), client.ObjectKey{Namespace: ns, Name: name}, &s)
		switch {
		case apierrors.IsNotFound(err) || err == nil && s.Labels[labelOpenPGPKey] == "":
			return &web.PersonError{Msg: "There is no OpenPGP key " + name + " in this team."}
		case err != nil:
			return err
		case s.Labels[labelOpenPGPKey] != kind:
			return &web.PersonError{Msg: fmt.Sprintf("The key %s is %s: a %s key is needed there.", name, s.Labels[labelOpenPGPKey], kind)}
		}
	}
	return nil
}

// watchOf is the watch the path names, if it is one of connection c's.
func (u *Pages) watchOf(r *http.Request, c *v1alpha1.SftpConnection) (*v1alpha1.SftpWatch, error) {
	var watch v1alpha1.SftpWatch
	err := u.Client.Get(r.Context(), client.ObjectKey{Namespace: c.Namespace, Name: chi.URLParam(r, "watch")}, &watch)
	switch {
	case apierrors.IsNotFound(err) || err == nil && watch.Spec.ConnectionRef.Name != c.Name:
		return nil, web.ErrNotFound
	case err != nil:
		return nil, err
	}
	return &watch, nil
}

// ConfirmDeleteWatch answers GET /connections/{name}/watches/{watch}/delete.
func (u *Pages) ConfirmDeleteWatch(w http.ResponseWriter, r *http.Request, c *v1alpha1.SftpConnection) error {
	watch, err := u.watchOf(r, c)
	if err != nil {
		return err
	}
	return u.Confirm(w, r, web.Confirmation{Question: "Stop watching " + watch.Spec.Path + " on " + c.Name + "?",
		Consequence: "Files that arrive from now on are not reported, nor transferred. Events already sent, and transfers under way, are not undone.",
		Action:      r.URL.Path, Button: "Stop watching", Keep: "Keep watching", Back: "/connections/" + c.Name + "#watches"})
}

// DeleteWatch stops watching: the watch named in the path, if it is one
// of connection c's.
func (u *Pages) DeleteWatch(w http.ResponseWriter, r *http.Request, c *v1alpha1.SftpConnection) error {
	watch, err := u.watchOf(r, c)
	if err != nil {
		return err
	}
	if err := client.IgnoreNotFound(u.Client.Delete(r.Context(), watch, client.Preconditions{UID: &watch.UID})); err != nil {
		return err
	}
	u.Notify(w, r, "No longer watching "+watch.Spec.Path+".")
	http.Redirect(w, r, "/connections/"+c.Name+"#watches", http.StatusSeeOther)
	return nil
}
