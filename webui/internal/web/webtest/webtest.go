// Package webtest makes a web.Core for tests that need no cluster:
// cookies, pages and an accounts store that only hashes.
package webtest

import (
	"log/slog"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/sftpgate/sftpgate/webui/accounts"
	"github.com/sftpgate/sftpgate/webui/internal/web"
)

// Core is a core with cookies, the pages, an accounts store that only
// hashes, no limits and no log.
func Core(tb testing.TB) *web.Core {
	tb.Helper()
	pages, err := web.ParsePages()
	if err != nil {
		tb.Fatal(err)
	}
	return &web.Core{Cookies: web.NewCookies([]byte("a secret of thirty-two bytes, at least"), false), Templates: pages,
		Accounts: &accounts.Store{Cost: bcrypt.MinCost}, Limits: &web.Limits{}, Log: slog.New(slog.DiscardHandler)}
}
