package webui

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// teamObject reads into obj the team's object the path names ({name}):
// errNotFound when the team has none of that name.
func (u *ui) teamObject(r *http.Request, obj client.Object) error {
	err := u.client.Get(r.Context(), client.ObjectKey{Namespace: accountFrom(r.Context()).Namespace, Name: chi.URLParam(r, "name")}, obj)
	if apierrors.IsNotFound(err) {
		return errNotFound
	}
	return err
}

// confirmation is the question asked before anything is destroyed or
// revoked (confirm.html): what will happen, the form that does it, and the
// way back. Every such action has one, on a GET of the path its form
// posts to; the POST does it and says so on the next page (notify).
type confirmation struct {
	Question, Consequence string
	// Action is where the form posts (the page's own path), with Hidden's
	// fields; Button says what it does.
	Action, Button string
	Hidden         map[string]string
	// Back is the page the person came from, Keep the way back's words.
	Back, Keep string
}

func (u *ui) confirm(w http.ResponseWriter, r *http.Request, c confirmation) error {
	if c.Keep == "" {
		c.Keep = "Keep it"
	}
	u.render(w, r, http.StatusOK, "confirm", page{Title: c.Question, Data: c})
	return nil
}

// notify says message on the next page the browser is shown: what the
// POST it answers did.
func (u *ui) notify(w http.ResponseWriter, r *http.Request, message string) {
	if err := u.cookies.set(w, r, noticeCookie, message); err != nil {
		u.log.Warn("setting a notice", "error", err)
	}
}

// takeNotice is the notice a POST left for this page, cleared once read.
func (u *ui) takeNotice(w http.ResponseWriter, r *http.Request) string {
	var message string
	if !u.cookies.get(r, noticeCookie, &message) {
		return ""
	}
	u.cookies.clear(w, r, noticeCookie)
	return message
}
