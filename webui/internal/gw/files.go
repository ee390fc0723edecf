package gw

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/webui/internal/web"
)

// GatewayFailure is what the gateway said went wrong: the SFTP server's
// refusal (in a 200) or its own error.
type GatewayFailure struct {
	Status  int
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (f *GatewayFailure) Error() string { return f.Message }

// gatewayError is the error of the gateway's answer status with its
// error envelope's failure f: unavailable for a 5xx, else f.
func gatewayError(status int, f *GatewayFailure) error {
	if status >= http.StatusInternalServerError {
		return &web.UnavailableError{Cause: fmt.Sprintf("%d %s", status, cmp.Or(f.Message, http.StatusText(status)))}
	}
	return f
}

// Call runs command on connection c as the account, with a JSON body,
// and decodes its result into out.
func (u *Gateway) Call(ctx context.Context, c v1alpha1.Endpoint, command string, body, out any) error {
	token, err := u.FilesKey(ctx, c.GetNamespace())
	if err != nil {
		return err
	}
	return u.CallAs(ctx, token, c, command, body, out)
}

// CallAs is call with the key of token.
func (u *Gateway) CallAs(ctx context.Context, token string, c v1alpha1.Endpoint, command string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	resp, err := u.gatewayRequest(ctx, token, c, command, b, "")
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	var envelope map[string]json.RawMessage
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(&envelope); err != nil {
		// Cut off, or not the gateway's (a proxy's page).
		return &web.UnavailableError{Cause: fmt.Sprintf("its answer to %s: %d, %v", command, resp.StatusCode, err)}
	}
	if raw, ok := envelope["error"]; ok {
		f := &GatewayFailure{Status: resp.StatusCode}
		_ = json.Unmarshal(raw, f)
		return gatewayError(resp.StatusCode, f)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(envelope[command], out)
}

// gatewayRequest sends command to the gateway with the key of token (the
// account's file browser key, or a share link's); accept, when set, asks
// for the file's bytes. The UI sends only keys it found issued, but the
// gateway learns of a key from its own watch, a moment later: a key it
// does not know yet (401) is sent again for up to keyWait.
func (u *Gateway) gatewayRequest(ctx context.Context, token string, c v1alpha1.Endpoint, command string, body []byte, accept string) (*http.Response, error) {
	slug := Slug(c)
	var resp *http.Response
	_, err := untilKnown(ctx, func() (bool, error) {
		if resp != nil {
			_ = resp.Body.Close() // a 401 sent again
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.TryURL+"/"+url.PathEscape(slug)+"/"+command, bytes.NewReader(body))
		if err != nil {
			return false, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		// The gateway's record of the call then names this request.
		if id := GatewayID(middleware.GetReqID(ctx)); id != "" {
			req.Header.Set(middleware.RequestIDHeader, id)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err = u.filesClient.Do(req) //nolint:bodyclose // the caller closes it, or the next try
		if err != nil && ctx.Err() == nil {
			err = &web.UnavailableError{Cause: err.Error()}
		}
		return err == nil && resp.StatusCode != http.StatusUnauthorized, err
	})
	if err != nil {
		if resp != nil {
			_ = resp.Body.Close()
		}
		return nil, err
	}
	return resp, nil
}

// Entry is one row of a folder's page.
type Entry struct {
	Name     string    `json:"name"`
	Path     string    `json:"path"`
	Type     string    `json:"type"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
}

// ListPage lists a page of dir with the key of token, after the name the
// request's "after" gives: the entries, the name the next page starts
// after, or the gateway's refusal in words.
func (u *Gateway) ListPage(r *http.Request, token string, c v1alpha1.Endpoint, dir string) (entries []Entry, next, failure string, err error) {
	var listing struct {
		Entries []Entry `json:"entries"`
		Next    string  `json:"next"`
	}
	req := map[string]any{"path": dir, "limit": web.PageSize}
	if after := r.URL.Query().Get("after"); after != "" {
		req["after"] = after
	}
	err = u.CallAs(r.Context(), token, c, "list", req, &listing)
	if f, ok := errors.AsType[*GatewayFailure](err); ok {
		return nil, "", f.Message, nil
	}
	return listing.Entries, listing.Next, "", err
}

// SendFile streams file p of c, read with the key of token.
func (u *Gateway) SendFile(w http.ResponseWriter, r *http.Request, token string, c v1alpha1.Endpoint, p string, inline bool) error {
	body, err := json.Marshal(map[string]string{"path": p})
	if err != nil {
		return err
	}
	resp, err := u.gatewayRequest(r.Context(), token, c, "read", body, "application/octet-stream")
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/octet-stream") {
		var envelope struct {
			Error GatewayFailure `json:"error"`
		}
		_ = json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(&envelope)
		if resp.StatusCode >= http.StatusInternalServerError {
			return gatewayError(resp.StatusCode, &envelope.Error)
		}
		return &web.PersonError{Msg: cmp.Or(envelope.Error.Message, "the file cannot be read")}
	}
	h := w.Header()
	h.Set("Content-Length", resp.Header.Get("Content-Length"))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if inline {
		h.Set("Content-Type", ImageType(p))
		h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
		h.Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": path.Base(p)}))
	} else {
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(p)}))
	}
	w.WriteHeader(http.StatusOK)
	w, _ = streaming(w, r)
	_, _ = io.Copy(w, resp.Body)
	return nil
}

// EntryName checks a new name for an entry: one name, no path.
func EntryName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || len(name) > 255 {
		return "", &web.PersonError{Msg: "give a name of up to 255 characters, without /"}
	}
	return name, nil
}

// statusClientGone is logged, as nginx's 499, for a request whose client
// went away.
const statusClientGone = 499

// tusHeaders are the request headers a tus client sends that go on to
// the gateway; nothing else does (no cookie). Not X-HTTP-Method-Override:
// the method is the one the UI checked, and the gateway refuses it.
var tusHeaders = []string{"Tus-Resumable", "Upload-Length", "Upload-Offset", "Upload-Metadata", "Upload-Checksum",
	"Content-Type", "Content-Length"}

// UploadRules change what goes through: metadata, when set, checks and
// rewrites a creation's Upload-Metadata; answer, when set, rewrites the
// gateway's answer.
type UploadRules struct {
	Metadata func(http.Header) error
	Answer   func(*http.Response) error
}

// ProxyUpload forwards a tus request for connection c as the key of
// token, by rules; uiUploads is the UI's path of these uploads.
func (u *Gateway) ProxyUpload(w http.ResponseWriter, r *http.Request, token string, c v1alpha1.Endpoint, uiUploads string,
	rules UploadRules) error {
	target, err := url.Parse(u.TryURL)
	if err != nil {
		return err
	}
	// The gateway's path of this connection's uploads.
	gatewayUploads := strings.TrimSuffix(target.Path, "/") + "/" + url.PathEscape(Slug(c)) + "/uploads/"
	id := chi.URLParam(r, "*")
	if strings.Contains(id, "/") {
		return web.ErrNotFound
	}
	if rules.Metadata != nil && r.Method == http.MethodPost {
		if err := rules.Metadata(r.Header); err != nil {
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
			if id := GatewayID(middleware.GetReqID(r.Context())); id != "" {
				pr.Out.Header.Set(middleware.RequestIDHeader, id)
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			if loc := resp.Header.Get("Location"); loc != "" {
				resp.Header.Set("Location", uiUploads+strings.TrimPrefix(loc, gatewayUploads))
			}
			if rules.Answer != nil {
				return rules.Answer(resp)
			}
			return nil
		},
		Transport: u.filesClient.Transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) {
				w.WriteHeader(statusClientGone) // the browser went away: nothing to say, or log
				return
			}
			u.ServerError(w, r, err)
		},
	}
	proxy.ServeHTTP(streaming(w, r))
	return nil
}

// GatewayID is the request id the UI sends the gateway for its request
// id, when the UI made that id ("host/random-000001"): "ui:random-000001",
// short enough for any host's name, with no "/", which the gateway takes
// from no one. An id a browser chose is not sent on ("").
func GatewayID(id string) string {
	_, own, ok := strings.Cut(id, "/")
	if !ok {
		return ""
	}
	return "ui:" + own
}

// ImageType is the type of an image shown in place, by its name; "" for
// none. SVG is not one: it can carry script.
func ImageType(name string) string {
	switch strings.ToLower(path.Ext(name)) {
	case ".png":
		return "image/png"
	case ".jpg", ".jpeg":
		return "image/jpeg"
	case ".gif":
		return "image/gif"
	case ".webp":
		return "image/webp"
	}
	return ""
}
