package webui

// Uploads from the file browser: the browser speaks tus to the UI's own
// origin, /connections/<name>/uploads/, and the UI forwards each request,
// streaming, to the gateway's uploads endpoint of that connection as the
// account (its file browser key). The browser never holds a credential
// but its session cookie; the UI never holds a file.

import (
	"context"
	"errors"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// statusClientGone is logged, as nginx's 499, for a request whose client
// went away.
const statusClientGone = 499

// tusHeaders are the request headers a tus client sends that go on to
// the gateway; nothing else does (no cookie). Not X-HTTP-Method-Override:
// the method is the one the UI checked, and the gateway refuses it.
var tusHeaders = []string{"Tus-Resumable", "Upload-Length", "Upload-Offset", "Upload-Metadata", "Upload-Checksum",
	"Content-Type", "Content-Length"}

// uploadProxy forwards a tus request for connection c.
func (u *ui) uploadProxy(w http.ResponseWriter, r *http.Request, c *v1alpha1.SftpConnection) error {
	token, err := u.filesKey(r.Context(), c.Namespace)
	if err != nil {
		return err
	}
	return u.proxyUpload(w, r, token, c, "/connections/"+c.Name+"/uploads/", uploadRules{})
}

// uploadRules change what goes through: metadata, when set, checks and
// rewrites a creation's Upload-Metadata; answer, when set, rewrites the
// gateway's answer.
type uploadRules struct {
	metadata func(http.Header) error
	answer   func(*http.Response) error
}

// proxyUpload forwards a tus request for connection c as the key of
// token, by rules; uiUploads is the UI's path of these uploads.
func (u *ui) proxyUpload(w http.ResponseWriter, r *http.Request, token string, c *v1alpha1.SftpConnection, uiUploads string,
	rules uploadRules) error {
	target, err := url.Parse(u.tryURL)
	if err != nil {
		return err
	}
	// The gateway's path of this connection's uploads.
	gatewayUploads := strings.TrimSuffix(target.Path, "/") + "/" + url.PathEscape(u.view(c).Slug) + "/uploads/"
	id := chi.URLParam(r, "*")
	if strings.Contains(id, "/") {
		return errNotFound
	}
	if rules.metadata != nil && r.Method == http.MethodPost {
		if err := rules.metadata(r.Header); err != nil {
			return err
		}
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = &url.URL{Scheme: target.Scheme, Host: target.Host, Path: gatewayUploads + id}
			pr.Out.Host = target.Host
			pr.Out.Header = http.Header{}
			for _, name := range tusHeaders {
				if v := pr.In.Header.Values(name); len(v) > 0 {
					pr.Out.Header[name] = v
				}
			}
			pr.Out.Header.Set("Authorization", "Bearer "+token)
			if id := gatewayID(middleware.GetReqID(r.Context())); id != "" {
				pr.Out.Header.Set(middleware.RequestIDHeader, id)
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			if loc := resp.Header.Get("Location"); loc != "" {
				resp.Header.Set("Location", uiUploads+strings.TrimPrefix(loc, gatewayUploads))
			}
			if rules.answer != nil {
				return rules.answer(resp)
			}
			return nil
		},
		Transport: u.filesClient.Transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) {
				w.WriteHeader(statusClientGone) // the browser went away: nothing to say, or log
				return
			}
			u.serverError(w, r, err)
		},
	}
	proxy.ServeHTTP(streaming(w, r))
	return nil
}
