package signin

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sftpgate/sftpgate/webui/internal/gw"
	"github.com/sftpgate/sftpgate/webui/internal/team"
	"github.com/sftpgate/sftpgate/webui/internal/web"
	"github.com/sftpgate/sftpgate/webui/internal/web/webtest"
)

// FuzzOIDCCallback's sign-in runs on a core of its own, which needs no
// cluster.
func fuzzUI(tb testing.TB) *Pages {
	return &Pages{Teams: &team.Teams{Gateway: &gw.Gateway{Core: webtest.Core(tb)}}}
}

// failing is a network that never answers: the OpenID provider is never
// reached.
type failing struct{ tries *atomic.Int64 }

func (f failing) RoundTrip(*http.Request) (*http.Response, error) {
	f.tries.Add(1)
	return nil, errors.New("no network here")
}

// FuzzOIDCCallback: whatever the provider's redirect back holds (state,
// code, error, anything) and whatever the browser's sign-in cookie holds,
// the callback refuses the sign-in (401) unless the cookie is the UI's
// own and its state is the one sent back, without an error; only then
// does it ask the provider (here away: 503). The provider's error is
// shown escaped, and the sign-in cookie is always cleared.
func FuzzOIDCCallback(f *testing.F) {
	for _, q := range []string{"", "state=s1&code=c", "state=s1&error=access_denied", "state=s2&code=c", "error=<script>alert(1)</script>&state=s1",
		"state=s1&state=s2", "state=%ZZ", "state=s1;code=c", "state=&code=c"} {
		f.Add(q, byte(1), "s1", "")
		f.Add(q, byte(0), "s1", "")
		f.Add(q, byte(2), "", "MTcxNjIzOTAyMnxhYmN8")
	}
	u := fuzzUI(f)
	tries := &atomic.Int64{}
	u.oidc = &oidcLogin{opts: OIDCOptions{Issuer: "http://provider.invalid", ClientID: "ui", Recheck: time.Minute},
		client: &http.Client{Transport: failing{tries}}, log: u.Log}
	f.Fuzz(func(t *testing.T, rawQuery string, cookieMode byte, state, rawCookie string) {
		r := httptest.NewRequest(http.MethodGet, "/login/oidc/callback", nil)
		r.URL.RawQuery = rawQuery
		genuine := false
		switch cookieMode % 3 {
		case 1:
			set := httptest.NewRecorder()
			if err := u.Cookies.Set(set, r, web.OIDCCookie, oidcPending{State: state, Nonce: "n", Verifier: "v"}); err != nil {
				t.Fatal(err)
			}
			r.Header.Set("Cookie", set.Result().Cookies()[0].String())
			genuine = true
		case 2:
			r.Header.Set("Cookie", web.OIDCCookie+"="+rawCookie)
		}
		w := httptest.NewRecorder()
		before := tries.Load()
		if err := u.FinishOIDC(w, r); err != nil {
			t.Fatal(err)
		}
		q := r.URL.Query()
		asked := tries.Load() != before
		let := genuine && q.Get("state") == state && q.Get("error") == ""
		switch {
		case let != asked:
			t.Fatalf("%q with state %q (genuine %v): asked the provider %v", rawQuery, state, genuine, asked)
		case let && w.Code != http.StatusServiceUnavailable, !let && w.Code != http.StatusUnauthorized:
			t.Fatalf("%q with state %q (genuine %v): %d", rawQuery, state, genuine, w.Code)
		}
		if e := q.Get("error"); strings.ContainsAny(e, "<>&\"'") && strings.Contains(w.Body.String(), "("+e+")") {
			t.Fatalf("the provider's error %q is on the page as it is", e)
		}
		cleared := false
		for _, c := range w.Result().Cookies() {
			cleared = cleared || c.Name == web.OIDCCookie && c.MaxAge < 0
		}
		if !cleared {
			t.Fatalf("%q: the sign-in cookie is not cleared", rawQuery)
		}
	})
}
