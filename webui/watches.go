package webui

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// watchView is a watched folder as a connection's page shows it.
type watchView struct {
	Name, Path, Sink string
	Events           string
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
	v1alpha1.ReasonOverQuota:          "This account watches too many folders",
}

// watches lists the account's watches of connection c, newest first.
func (u *ui) watches(ctx context.Context, c *v1alpha1.SftpConnection) ([]watchView, error) {
	var list v1alpha1.SftpWatchList
	if err := u.client.List(ctx, &list, client.InNamespace(c.Namespace)); err != nil {
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

func (u *ui) newWatchForm(w http.ResponseWriter, r *http.Request, c *v1alpha1.SftpConnection) error {
	return u.watchForm(c, map[string]string{"path": "/", "created": "on"})(w, r, http.StatusOK, "")
}

// watchForm draws the new-watch form of connection c, filled with values.
func (u *ui) watchForm(c *v1alpha1.SftpConnection, values map[string]string) func(w http.ResponseWriter, r *http.Request, status int, problem string) error {
	return func(w http.ResponseWriter, r *http.Request, status int, problem string) error {
		u.render(w, r, status, "watch_form", page{Title: "Watch a folder of " + c.Name, Form: values, Error: problem, Data: c.Name})
		return nil
	}
}

// formEvents are the form's checkboxes, by the event each asks for.
var formEvents = []struct {
	field string
	event v1alpha1.WatchEvent
}{{"created", v1alpha1.WatchCreated}, {"modified", v1alpha1.WatchModified}, {"deleted", v1alpha1.WatchDeleted}}

// createWatch makes an SftpWatch of connection c that sends its events to
// the webhook the form names.
func (u *ui) createWatch(w http.ResponseWriter, r *http.Request, c *v1alpha1.SftpConnection) error {
	values := map[string]string{"path": strings.TrimSpace(r.PostFormValue("path")), "url": strings.TrimSpace(r.PostFormValue("url"))}
	for _, e := range formEvents {
		values[e.field] = r.PostFormValue(e.field)
	}
	watch, err := readWatchForm(c, values)
	if err == nil {
		err = u.client.Create(r.Context(), watch)
		if apierrors.IsInvalid(err) {
			err = &personError{"the server refused these settings: " + invalidCauses(err)}
		}
		err = u.quotaReached(err)
	}
	if err != nil {
		return onForm(err, u.watchForm(c, values))
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
	if !strings.HasPrefix(path, "/") || slices.ContainsFunc(strings.Split(path, "/"), func(p string) bool { return p == "." || p == ".." }) {
		return nil, &personError{fmt.Sprintf("%q is not a folder of the connection: start it with / (such as /incoming), with no . or .. parts", path)}
	}
	target, err := url.Parse(values["url"])
	if err != nil || (target.Scheme != "https" && target.Scheme != "http") || target.Host == "" || target.User != nil {
		return nil, &personError{"give the webhook's address, such as https://example.com/hooks/sftp"}
	}
	watch := &v1alpha1.SftpWatch{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, GenerateName: c.Name + "-"},
		Spec: v1alpha1.SftpWatchSpec{ConnectionRef: v1alpha1.ConnectionReference{Name: c.Name}, Path: path,
			Sink: &v1alpha1.Destination{URI: target.String()}}}
	for _, e := range formEvents {
		if values[e.field] != "" {
			watch.Spec.Events = append(watch.Spec.Events, e.event)
		}
	}
	if len(watch.Spec.Events) == 0 {
		return nil, &personError{"choose at least one change to be told of"}
	}
	return watch, nil
}

// deleteWatch stops watching: the watch named in the path, if it is one
// of connection c's.
func (u *ui) deleteWatch(w http.ResponseWriter, r *http.Request, c *v1alpha1.SftpConnection) error {
	var watch v1alpha1.SftpWatch
	err := u.client.Get(r.Context(), client.ObjectKey{Namespace: c.Namespace, Name: chi.URLParam(r, "watch")}, &watch)
	switch {
	case apierrors.IsNotFound(err) || err == nil && watch.Spec.ConnectionRef.Name != c.Name:
		return errNotFound
	case err != nil:
		return err
	}
	if err := client.IgnoreNotFound(u.client.Delete(r.Context(), &watch)); err != nil {
		return err
	}
	http.Redirect(w, r, "/connections/"+c.Name+"#watches", http.StatusSeeOther)
	return nil
}
