package web

import (
	"net/http"
	"path"
)

// RequestBase is the UI's address as the browser reached it.
func RequestBase(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// BrowsePath is p as an absolute, clean path within the connection.
func BrowsePath(p string) string { return path.Clean("/" + p) }
