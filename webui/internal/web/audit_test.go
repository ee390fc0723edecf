package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/webui/accounts"
)

// TestAuditRecordOfOneNote: a record is made in one place from one note,
// which the route's what and the handler each fill: who acted (an
// account, a share link, or an email tried), on what (the handler's
// object over the one the request names) and how it ended.
func TestAuditRecordOfOneNote(t *testing.T) {
	u := &Core{}
	acct := &accounts.Account{Email: "owner@example.com", Namespace: "team"}
	link := &v1alpha1.ShareLink{ObjectMeta: metav1.ObjectMeta{Namespace: "linked", Name: "q3"},
		Spec: v1alpha1.ShareLinkSpec{Connection: "box", Path: "/reports"}}
	// request is a request with the URL's {name} and a form.
	request := func(target, name string, form url.Values) *http.Request {
		r := httptest.NewRequest(http.MethodPost, target, strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		route := chi.NewRouteContext()
		route.URLParams.Add("name", name)
		return r.WithContext(context.WithValue(r.Context(), chi.RouteCtxKey, route))
	}
	type said struct {
		Namespace  string
		Actor      audit.Actor
		Connection string
		Object     string
		Paths      []string
		Result     string
	}
	for name, tc := range map[string]struct {
		r       *http.Request
		handler auditNote
		what    What
		status  int
		want    said
	}{
		"an account's change of the object its URL names": {
			r: request("/connections/box/edit", "box", nil), handler: auditNote{account: acct},
			what: All(OnEndpoint(v1alpha1.KindSftpConnection), URLNamed("SftpConnection", "name")), status: http.StatusSeeOther,
			want: said{"team", audit.Actor{Kind: audit.ActorAccount, Name: acct.Email}, "box", "SftpConnection/box", nil, audit.ResultOK},
		},
		"the object the handler made, over the one the form names": {
			r: request("/connections/box/shares", "box", url.Values{"name": {"asked"}}), handler: auditNote{account: acct, object: "ShareLink/made"},
			what: All(OnEndpoint(v1alpha1.KindSftpConnection), FormNamed("ShareLink", "name")), status: http.StatusOK,
			want: said{"team", audit.Actor{Kind: audit.ActorAccount, Name: acct.Email}, "box", "ShareLink/made", nil, audit.ResultOK},
		},
		"a share link's request: the link, its connection, the path reached": {
			r: request("/s/token?path=/q3.csv", "", nil), handler: auditNote{share: link}, what: SharePath, status: http.StatusOK,
			want: said{"linked", audit.Actor{Kind: audit.ActorShareLink, Name: "q3"}, "box", "", []string{"/reports/q3.csv"}, audit.ResultOK},
		},
		"a log-in to no account: no namespace, the email tried": {
			r: request("/login", "", url.Values{"email": {"who@example.com"}}), status: http.StatusUnauthorized,
			want: said{"", audit.Actor{Kind: audit.ActorAccount, Name: "who@example.com"}, "", "", nil, audit.ResultOfStatus(http.StatusUnauthorized)},
		},
	} {
		note := tc.handler
		if tc.what != nil {
			tc.what(tc.r, &note)
		}
		_ = tc.r.ParseForm() // as a form's handler does, within the form's bound
		rec := u.record(tc.r, "test", &note, tc.status, nil)
		got := said{rec.Namespace, rec.Actor, rec.Connection, rec.Object, rec.Paths, rec.Result}
		if !reflect.DeepEqual(got, tc.want) || rec.Action != "webui.test" {
			t.Errorf("%s: %s %+v, want %+v", name, rec.Action, got, tc.want)
		}
	}
}
