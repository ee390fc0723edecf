package webui

import (
	"net/http"
	"reflect"
	"slices"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/sftpgate/sftpgate/webui/internal/gw"
	"github.com/sftpgate/sftpgate/webui/internal/share"
	"github.com/sftpgate/sftpgate/webui/internal/signin"
	"github.com/sftpgate/sftpgate/webui/internal/team"
	"github.com/sftpgate/sftpgate/webui/internal/tenant"
	"github.com/sftpgate/sftpgate/webui/internal/web"
)

// TestSignedInRoutesNeedPermissions: every route behind the log-in is a
// row of signedInRoutes, and every row says what RBAC must grant for it
// (noPermission when nothing): a page registered beside the table, or a
// row without its permission, fails here.
func TestSignedInRoutesNeedPermissions(t *testing.T) {
	teams := &team.Teams{Gateway: &gw.Gateway{Core: &web.Core{}}}
	u := &ui{Teams: teams, signin: &signin.Pages{Teams: teams}, share: &share.Pages{Gateway: teams.Gateway}, tenant: &tenant.Pages{Teams: teams}}
	rows := map[string]signedInRoute{} // by pattern and method
	for _, row := range u.signedInRoutes() {
		if row.need == (team.Permission{}) {
			t.Errorf("%s %s names no permission: the one may asks for, or noPermission", row.method, row.pattern)
		}
		if row.action == "" && row.what != nil {
			t.Errorf("%s %s notes what it names for no record", row.method, row.pattern)
		}
		rows[row.pattern+" "+row.method] = row
	}
	r := chi.NewRouter()
	u.route(r)
	logIn := reflect.ValueOf(u.signin.RequireAccount).Pointer()
	behindLogIn := func(mw func(http.Handler) http.Handler) bool { return reflect.ValueOf(mw).Pointer() == logIn }
	seen := map[string]bool{}
	err := chi.Walk(r, func(method, pattern string, _ http.Handler, mws ...func(http.Handler) http.Handler) error {
		if !slices.ContainsFunc(mws, behindLogIn) {
			return nil
		}
		key := pattern + " " + method
		if _, tus := rows[pattern+" "+tusMethods]; tus {
			key = pattern + " " + tusMethods
		}
		if _, ok := rows[key]; !ok {
			t.Errorf("%s %s is behind the log-in but not a row of signedInRoutes", method, pattern)
		}
		seen[key] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for key := range rows {
		if !seen[key] {
			t.Errorf("%s: a row of signedInRoutes not behind the log-in", key)
		}
	}
	if len(seen) < 40 {
		t.Errorf("found %d routes behind the log-in: the walk misses them", len(seen))
	}
}
