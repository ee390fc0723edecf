// Package gw is the web UI's way to the files: the gateway, called with
// the UI's own API keys (fileskey.go), for the file browser and for share
// links alike, streaming (stream.go) and resumable uploads passed on.
package gw

import (
	"cmp"
	"net/http"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/webui/internal/web"
)

// Gateway calls the gateway for the web UI's pages.
type Gateway struct {
	*web.Core
	// filesClient carries the file browser's requests to the gateway,
	// which may stream for as long as a file takes.
	filesClient *http.Client
	// filesSecret derives the file browser's keys (fileskey.go), and
	// filesKeys remembers those found issued.
	filesSecret []byte
	filesKeys   issuedKeys
}

// New is the gateway of core, whose file browser's keys derive from
// secret.
func New(core *web.Core, secret []byte) *Gateway {
	return &Gateway{Core: core, filesClient: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}, //nolint:forcetypeassert // the standard library's
		filesSecret: secret}
}

// maxAnswer bounds a JSON answer of the gateway read here: a page of a
// listing, or a refusal, is far less.
const maxAnswer = 128 << 10

// Slug is the connection's path at the gateway: the one it serves, or
// while it is tested the one it claims ("" for a kind whose slug is
// optional, and none given).
func Slug(c v1alpha1.Endpoint) string {
	return cmp.Or(*c.ServedSlug(), c.ClaimedSlug())
}
