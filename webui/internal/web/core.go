// Package web is what every page of the web UI shares: the one renderer
// (render.go), the one error path (errors.go), sessions and cookies
// (session.go), the audit of what people do (audit.go), and the
// questions asked before anything is destroyed (confirm.go). Each
// surface (package signin, share, tenant) builds on Core.
package web

import (
	"html/template"
	"log/slog"
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/auditstore"
	"github.com/sftpgate/sftpgate/webui/accounts"
)

// Core is what the surfaces share.
type Core struct {
	Client   client.Client
	Accounts *accounts.Store
	Cookies  *Cookies
	// GatewayURL is the gateway as clients reach it, in examples;
	// TryURL where the UI itself reaches it.
	GatewayURL, TryURL string
	Clients            ClientAddrs
	Limits             *Limits
	Quota              accounts.Quota
	Templates          map[string]*template.Template
	HTTPClient         *http.Client
	// Trail records what accounts do; Records reads it back for the
	// Activity page.
	Trail   *audit.Trail
	Records *auditstore.Store
	// Log has what fails on the server side.
	Log *slog.Logger
	// SignedIn is the account signed in on r, if any, for pages served
	// outside the log-in (package signin's).
	SignedIn func(w http.ResponseWriter, r *http.Request) *accounts.Account
}
