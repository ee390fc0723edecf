package web

import (
	"net/http"
)

// Confirmation is the question asked before anything is destroyed or
// revoked (confirm.html): what will happen, the form that does it, and the
// way back. Every such action has one, on a GET of the path its form
// posts to; the POST does it and says so on the next page (notify).
type Confirmation struct {
	Question, Consequence string
	// Action is where the form posts (the page's own path), with Hidden's
	// fields; Button says what it does.
	Action, Button string
	Hidden         map[string]string
	// Back is the page the person came from, Keep the way back's words.
	Back, Keep string
}

// Confirm asks c's question, on the page of its own.
func (u *Core) Confirm(w http.ResponseWriter, r *http.Request, c Confirmation) error {
	if c.Keep == "" {
		c.Keep = "Keep it"
	}
	u.Render(w, r, http.StatusOK, "confirm", Page{Title: c.Question, Data: c})
	return nil
}

// Notify says message on the next page the browser is shown: what the
// POST it answers did.
func (u *Core) Notify(w http.ResponseWriter, r *http.Request, message string) {
	if err := u.Cookies.Set(w, r, noticeCookie, message); err != nil {
		u.Log.Warn("setting a notice", "error", err)
	}
}

// takeNotice is the notice a POST left for this page, cleared once read.
func (u *Core) takeNotice(w http.ResponseWriter, r *http.Request) string {
	var message string
	if !u.Cookies.Get(r, noticeCookie, &message) {
		return ""
	}
	u.Cookies.Clear(w, r, noticeCookie)
	return message
}
