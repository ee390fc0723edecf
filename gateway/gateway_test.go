package gateway_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	legacyrouter "github.com/getkin/kin-openapi/routers/legacy"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/gateway"
	"github.com/sftpgate/sftpgate/hack/fixtures/conformance"
	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/fixtures/testftpd"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/tests3"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/internal/apitoken"
	"github.com/sftpgate/sftpgate/internal/egress"
	"github.com/sftpgate/sftpgate/internal/pool"
	"github.com/sftpgate/sftpgate/internal/sftpdial"
	"github.com/sftpgate/sftpgate/test/framework"
)

// The test kit's, as every test package has them.
var must = testkit.Must

var (
	k8s        client.Client
	restConfig *rest.Config
	// kubeconfig reaches the control plane, for gateways run as Run does.
	kubeconfig []byte
	baseURL    string
	metricsURL string
	// gatewayHandler is the gateway served at baseURL, for benchmarks.
	gatewayHandler http.Handler
	// apiDoc is the gateway's OpenAPI document, as served; every response
	// the tests see is validated against it.
	apiDoc *openapi3.T
	router routers.Router
)

const (
	maxBody   = 1 << 20
	maxUpload = 8 << 20
)

// TestMain runs a control plane, the manager and a gateway on loopback.
func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, err); return 1 }
	env, c, err := testcluster.Start()
	if err != nil {
		return fail(err)
	}
	defer func() { _ = env.Stop() }()
	restConfig, kubeconfig, k8s = env.Config, env.KubeConfig, c
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	managerDir, err := os.MkdirTemp("", "sftpgate-manager-")
	if err != nil {
		return fail(err)
	}
	defer func() { _ = os.RemoveAll(managerDir) }()
	manager, err := framework.StartManager(ctx, env, managerDir, "--max-concurrent-tests=4")
	if err != nil {
		return fail(err)
	}
	defer func() { _ = manager.Kill() }()

	gw, err := gateway.New(env.Config, gateway.Options{
		BasePath:    "/",
		Networks:    egress.Networks{DeniedNetworks: testcluster.LoopbackNetworks},
		IdleTimeout: time.Minute,
		Limits:      gateway.Limits{MaxBodyBytes: maxBody, MaxUploadBytes: maxUpload, RequestTimeout: 30 * time.Second},
		Log:         slog.New(slog.NewJSONHandler(testLog{os.Stderr}, nil)).With("component", "gateway"), // as Run's
	})
	if err != nil {
		return fail(err)
	}
	if err := gw.Start(ctx); err != nil {
		return fail(err)
	}
	gatewayHandler = gw.Handler()
	srv := httptest.NewServer(gatewayHandler)
	defer srv.Close()
	baseURL = srv.URL
	metricsSrv := httptest.NewServer(gw.MetricsHandler(true))
	defer metricsSrv.Close()
	metricsURL = metricsSrv.URL
	if err := loadAPIDoc(ctx); err != nil {
		return fail(err)
	}
	return m.Run()
}

// loadAPIDoc fetches the served document and checks that it is valid.
func loadAPIDoc(ctx context.Context) error {
	resp, err := http.Get(baseURL + "/openapi.json")
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if apiDoc, err = openapi3.NewLoader().LoadFromData(raw); err != nil {
		return err
	}
	if err := apiDoc.Validate(ctx); err != nil {
		return fmt.Errorf("the OpenAPI document is invalid: %w", err)
	}
	// The document names the base path; the router matches whole URLs.
	apiDoc.Servers = openapi3.Servers{{URL: baseURL + apiDoc.Servers[0].URL}}
	router, err = legacyrouter.NewRouter(apiDoc)
	return err
}

// validate checks a response against the OpenAPI document: the operation's
// declared statuses and schemas, or for requests no operation matches
// (unknown commands, other methods) the error shape.
func validate(t testing.TB, req *http.Request, body string, resp *http.Response, raw []byte) {
	t.Helper()
	req = req.Clone(context.Background())
	req.URL.Path = strings.TrimSuffix(req.URL.Path, "/")  // the trailing-slash alias
	req.URL.Host = strings.TrimPrefix(baseURL, "http://") // any of the tests' gateways
	req.Body = io.NopCloser(strings.NewReader(body))
	route, params, err := router.FindRoute(req)
	if err != nil {
		schema := apiDoc.Components.Schemas["Error"].Value
		var v any
		if jsonErr := json.Unmarshal(raw, &v); jsonErr != nil || schema.VisitJSON(v) != nil {
			t.Errorf("%s %s: %d %s does not have the error shape (no route: %v)", req.Method, req.URL.Path, resp.StatusCode, raw, err)
		}
		return
	}
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}},
		Status:  resp.StatusCode,
		Header:  resp.Header,
		Body:    io.NopCloser(bytes.NewReader(raw)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), input); err != nil {
		t.Errorf("%s %s: response %d %s does not match the OpenAPI document: %v", req.Method, req.URL.Path, resp.StatusCode, raw, err)
	}
}

// fixture is an SftpConnection to a real sshd and a key for it.
type fixture struct {
	ns, slug, token string
	sshd            *testsshd.Server
}

// newConnection starts an sshd and makes an SftpConnection "box" to it in
// a new namespace, changed by mutate before it is created.
func newConnection(t testing.TB, mutate ...func(*v1alpha1.SftpConnection)) (*v1alpha1.SftpConnection, *testsshd.Server) {
	t.Helper()
	sshd := testsshd.Start(t)
	return newConnectionTo(t, sshd.Host, sshd.Port, testsshd.User, sshd.Password, "", sshd.Dir, mutate...), sshd
}

// newConnectionTo makes an SftpConnection "box" in a new namespace to the
// server at host:port, logging in with password, trusting hostKey (empty:
// the first one seen) and rooted at rootPath, changed by mutate before it
// is created.
func newConnectionTo(t testing.TB, host string, port int32, user, password, hostKey, rootPath string,
	mutate ...func(*v1alpha1.SftpConnection)) *v1alpha1.SftpConnection {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gw-"}}
	must(t, k8s.Create(ctx, ns))
	must(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "creds"},
		StringData: map[string]string{v1alpha1.SecretKeyPassword: password}}))
	conn := &v1alpha1.SftpConnection{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "box"},
		Spec: v1alpha1.SftpConnectionSpec{
			Host: host, Port: port, Username: user, RootPath: rootPath, Slug: "box-" + ns.Name,
			Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.LocalSecretReference{Name: "creds"}},
		},
	}
	if hostKey != "" {
		conn.Spec.HostKey.Trusted = []string{hostKey}
	}
	for _, m := range mutate {
		m(conn)
	}
	must(t, k8s.Create(ctx, conn))
	return conn
}

// newFixture makes a connection and a key for it, and waits until the
// gateway serves them.
func newFixture(t testing.TB, mutateKey ...func(*v1alpha1.ApiKey)) *fixture {
	t.Helper()
	conn, sshd := newConnection(t)
	return serve(t, conn, sshd, mutateKey...)
}

// serve makes a key for conn, to sshd, and waits until the gateway serves
// them.
func serve(t testing.TB, conn *v1alpha1.SftpConnection, sshd *testsshd.Server, mutateKey ...func(*v1alpha1.ApiKey)) *fixture {
	t.Helper()
	return serveAt(t, conn, conn.Spec.Slug, sshd, mutateKey...)
}

// serveAt makes a key for conn, a connection of any kind the gateway
// serves at slug, and waits until the gateway serves them.
func serveAt(t testing.TB, conn interface {
	client.Object
	GetConditions() *[]metav1.Condition
}, slug string, sshd *testsshd.Server, mutateKey ...func(*v1alpha1.ApiKey)) *fixture {
	t.Helper()
	ctx := context.Background()
	token, keyID := apitoken.NewToken()
	key := &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: conn.GetNamespace(), Name: "key"},
		Spec: v1alpha1.ApiKeySpec{Token: v1alpha1.TokenSource{SHA256: apitoken.Hash(token), KeyID: keyID}}}
	for _, m := range mutateKey {
		m(key)
	}
	must(t, k8s.Create(ctx, key))
	f := &fixture{ns: conn.GetNamespace(), slug: slug, token: token, sshd: sshd}
	// Wait until the gateway's cache has the Ready connection and key.
	eventuallyFound(t, "the gateway serves the connection", func() (bool, string) {
		status, _ := f.call(t, "exists", `{"path": "/"}`)
		if status != http.StatusUnauthorized && status != http.StatusNotFound && status != http.StatusServiceUnavailable {
			return true, ""
		}
		_ = k8s.Get(ctx, client.ObjectKeyFromObject(conn), conn)
		return false, fmt.Sprintf("status %d; %+v", status, meta.FindStatusCondition(*conn.GetConditions(), v1alpha1.ConditionReady))
	})
	return f
}

// call POSTs a command with the fixture's key and decodes the answer.
func (f *fixture) call(t testing.TB, command, body string) (int, map[string]any) {
	t.Helper()
	return do(t, http.MethodPost, "/"+f.slug+"/"+command, f.token, "application/json", body)
}

func do(t testing.TB, method, path, token, contentType, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, baseURL+path, strings.NewReader(body))
	must(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	status, _, raw := send(t, req, body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: %d, body is not JSON: %q", method, path, status, raw)
	}
	return status, out
}

// ok calls a command that must succeed and returns its result.
func (f *fixture) ok(t *testing.T, command, body string) any {
	t.Helper()
	status, out := f.call(t, command, body)
	if status != http.StatusOK || out["error"] != nil {
		t.Fatalf("%s %s: %d %v", command, body, status, out)
	}
	return out[command]
}

// failure calls a command that must fail on the server with code.
func (f *fixture) failure(t *testing.T, command, body, code string) {
	t.Helper()
	status, out := f.call(t, command, body)
	e, _ := out["error"].(map[string]any)
	result, named := out[command]
	if status != http.StatusOK || e == nil || e["code"] != code || !named || result != nil {
		t.Fatalf("%s %s: %d %v, want 200 with error %s and a null result", command, body, status, out, code)
	}
}

// rejected calls a command that must be refused with status.
func (f *fixture) rejected(t *testing.T, command, body string, status int, code string) map[string]any {
	t.Helper()
	got, out := f.call(t, command, body)
	e, _ := out["error"].(map[string]any)
	if got != status || e == nil || e["code"] != code {
		t.Fatalf("%s %s: %d %v, want %d %s", command, body, got, out, status, code)
	}
	return e
}

func TestCommandsAgainstOpenSSH(t *testing.T) {
	f := newFixture(t)

	w := f.ok(t, "write", `{"path": "hello.txt", "file": {"text": "Hello, SFTP!"}}`).(map[string]any)
	if w["path"] != "/hello.txt" || w["bytesWritten"] != float64(12) {
		t.Errorf("write = %v", w)
	}
	if b, _ := os.ReadFile(filepath.Join(f.sshd.Dir, "hello.txt")); string(b) != "Hello, SFTP!" {
		t.Errorf("on the server: %q", b)
	}
	r := f.ok(t, "read", `{"path": "/hello.txt"}`).(map[string]any)
	if r["content"] != "Hello, SFTP!" || r["size"] != float64(12) || r["encoding"] != "text" {
		t.Errorf("read = %v", r)
	}
	if r := f.ok(t, "read", `{"path": "hello.txt", "offset": 7, "length": 4}`).(map[string]any); r["content"] != "SFTP" {
		t.Errorf("read range = %v", r)
	}
	if a := f.ok(t, "append", `{"path": "hello.txt", "file": {"base64": "IQo="}}`).(map[string]any); a["size"] != float64(14) {
		t.Errorf("append = %v", a)
	}
	if r := f.ok(t, "read", `{"path": "hello.txt", "encoding": "base64"}`).(map[string]any); r["content"] != "SGVsbG8sIFNGVFAhIQo=" {
		t.Errorf("read base64 = %v", r)
	}
	f.failure(t, "write", `{"path": "hello.txt", "file": {"text": "x"}, "overwrite": false}`, "already_exists")

	f.ok(t, "write", `{"path": "deep/er/file.bin", "file": {"base64": "AP8="}, "createParents": true, "mode": "0600"}`)
	f.failure(t, "read", `{"path": "deep/er/file.bin"}`, "not_text")
	st := f.ok(t, "stat", `{"path": "deep/er/file.bin"}`).(map[string]any)
	if st["type"] != "file" || st["size"] != float64(2) || st["mode"] != "0600" || st["modified"] == "" {
		t.Errorf("stat = %v", st)
	}
	if st := f.ok(t, "stat", `{"path": "deep"}`).(map[string]any); st["type"] != "directory" {
		t.Errorf("stat dir = %v", st)
	}
	if f.ok(t, "exists", `{"path": "deep/er"}`) != true || f.ok(t, "exists", `{"path": "nope"}`) != false {
		t.Errorf("exists is wrong")
	}

	f.ok(t, "mkdir", `{"path": "a/b/c", "parents": true}`)
	f.failure(t, "mkdir", `{"path": "a"}`, "already_exists")
	f.failure(t, "mkdir", `{"path": "x/y"}`, "not_found")
	for i := range 5 {
		f.ok(t, "write", fmt.Sprintf(`{"path": "a/f%d", "file": {"text": "%d"}}`, i, i))
	}
	page := f.ok(t, "list", `{"path": "a", "limit": 3}`).(map[string]any)
	entries := page["entries"].([]any)
	if len(entries) != 3 || page["next"] != "f1" || entries[0].(map[string]any)["name"] != "b" ||
		entries[0].(map[string]any)["type"] != "directory" || entries[1].(map[string]any)["path"] != "/a/f0" {
		t.Errorf("list page 1 = %v", page)
	}
	rest := f.ok(t, "list", `{"path": "a", "after": "f1"}`).(map[string]any)
	if n := len(rest["entries"].([]any)); n != 3 || rest["next"] != nil {
		t.Errorf("list page 2 = %v", rest)
	}
	f.failure(t, "list", `{"path": "hello.txt"}`, "not_a_directory")

	// A directory larger than a page and than rmdir's batch: pages follow
	// each other in name order, and a recursive rmdir removes it all.
	f.ok(t, "mkdir", `{"path": "many"}`)
	var want []string
	for i := range 600 {
		want = append(want, fmt.Sprintf("m%03d", i))
		must(t, os.WriteFile(filepath.Join(f.sshd.Dir, "many", want[i]), nil, 0o644))
	}
	var got []string
	for after := ""; ; {
		page := f.ok(t, "list", fmt.Sprintf(`{"path": "many", "limit": 250, "after": %q}`, after)).(map[string]any)
		for _, e := range page["entries"].([]any) {
			got = append(got, e.(map[string]any)["name"].(string))
		}
		next, more := page["next"].(string)
		if !more {
			break
		}
		after = next
	}
	if !slices.Equal(got, want) {
		t.Errorf("paging through 600 entries gave %d, in order: %v", len(got), slices.IsSorted(got))
	}
	f.ok(t, "rmdir", `{"path": "many", "recursive": true}`)
	if f.ok(t, "exists", `{"path": "many"}`) != false {
		t.Errorf("rmdir left many")
	}

	f.failure(t, "rmdir", `{"path": "a"}`, "not_empty")
	f.failure(t, "unlink", `{"path": "a"}`, "is_a_directory")
	f.failure(t, "rmdir", `{"path": "hello.txt"}`, "not_a_directory")
	f.ok(t, "rmdir", `{"path": "a", "recursive": true}`)
	f.ok(t, "unlink", `{"path": "hello.txt"}`)
	f.failure(t, "unlink", `{"path": "hello.txt"}`, "not_found")
	f.failure(t, "read", `{"path": "hello.txt"}`, "not_found")

	p := f.ok(t, "ping", ``).(map[string]any)
	if p["ok"] != true || !strings.HasPrefix(p["serverVersion"].(string), "SSH-2.0-OpenSSH") {
		t.Errorf("ping = %v", p)
	}
	// The path pattern is written with a trailing slash.
	if status, out := do(t, http.MethodPost, "/"+f.slug+"/ping/", f.token, "", ""); status != http.StatusOK || out["ping"] == nil {
		t.Errorf("POST .../ping/ = %d %v", status, out)
	}
}

// Below rootPath "/" a path is the server's own, and a symlink whose
// target does not exist is followed, by a write and by a raw upload, which
// create the target. (That the server is not asked where paths lead there
// is TestResolveAsksTheServerOnlyBelowARoot's.)
func TestServedBelowSlash(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	conn := &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "box"}}
	must(t, k8s.Patch(ctx, conn, client.RawPatch(types.MergePatchType, []byte(`{"spec": {"rootPath": "/"}}`))))
	// Served below "/" once the new spec's test passed: the test's
	// directory is then found by its absolute path.
	dir := fmt.Sprintf(`{"path": %q}`, f.sshd.Dir)
	eventually(t, `the gateway serves the connection below "/"`, func() bool {
		status, out := f.call(t, "exists", dir)
		return status == http.StatusOK && out["exists"] == true
	})

	written, uploaded := filepath.Join(f.sshd.Dir, "written"), filepath.Join(f.sshd.Dir, "uploaded")
	must(t, os.Symlink(filepath.Join(f.sshd.Dir, "written.txt"), written))
	must(t, os.Symlink(filepath.Join(f.sshd.Dir, "uploaded.txt"), uploaded))
	f.ok(t, "write", fmt.Sprintf(`{"path": %q, "file": {"text": "x"}}`, written))
	if status, _, out := f.raw(t, "write", "path="+url.QueryEscape(uploaded), "application/octet-stream", "", "", []byte("x")); status != http.StatusOK {
		t.Fatalf("upload: %d %s", status, out)
	}
	for _, link := range []string{written, uploaded} {
		if b, err := os.ReadFile(link + ".txt"); err != nil || string(b) != "x" {
			t.Errorf("%s: the target holds %q, %v; want x", filepath.Base(link), b, err)
		}
		if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is no longer a symlink: %v", filepath.Base(link), err)
		}
	}
}

func TestPathsStayInsideTheRoot(t *testing.T) {
	f := newFixture(t)
	// A symlink on the server that leads out of the root.
	must(t, os.Symlink("/etc", filepath.Join(f.sshd.Dir, "escape")))

	for _, p := range []string{"../../../../etc/hostname", "/etc/hostname", "a/../../etc/hostname"} {
		f.failure(t, "read", fmt.Sprintf(`{"path": %q}`, p), "not_found")
	}
	f.rejected(t, "read", `{"path": "escape/hostname"}`, http.StatusBadRequest, "invalid_request")
	f.rejected(t, "write", `{"path": "escape/evil", "file": {"text": "x"}}`, http.StatusBadRequest, "invalid_request")
	f.rejected(t, "list", `{"path": "escape"}`, http.StatusBadRequest, "invalid_request")
	// A dangling symlink cannot be checked: a write would follow it anywhere.
	must(t, os.Symlink("/tmp/sftpgate-nonexistent/new", filepath.Join(f.sshd.Dir, "dangling")))
	f.rejected(t, "write", `{"path": "dangling", "file": {"text": "x"}}`, http.StatusBadRequest, "invalid_request")
	if _, err := os.Stat("/tmp/sftpgate-nonexistent"); err == nil {
		t.Error("the write escaped through the dangling symlink")
	}
	e := f.rejected(t, "read", `{"path": "a\u0000b"}`, http.StatusBadRequest, "invalid_request")
	if e["field"] != "path" {
		t.Errorf("NUL error = %v", e)
	}
	// The link itself may be looked at and removed: it is inside the root.
	if st := f.ok(t, "stat", `{"path": "escape", "followSymlinks": false}`).(map[string]any); st["type"] != "symlink" {
		t.Errorf("lstat = %v", st)
	}
	f.ok(t, "unlink", `{"path": "escape"}`)
	f.rejected(t, "rmdir", `{"path": "/"}`, http.StatusBadRequest, "invalid_request")
}

func TestRequestErrors(t *testing.T) {
	f := newFixture(t, func(k *v1alpha1.ApiKey) { k.Spec.Commands = []v1alpha1.Command{"read", "exists", "write"} })
	path := "/" + f.slug + "/read"

	status, out := do(t, http.MethodPost, path, "", "application/json", `{"path": "x"}`)
	if status != http.StatusUnauthorized {
		t.Errorf("no key: %d %v", status, out)
	}
	if status, _ := do(t, http.MethodPost, path, "sgk_wrong", "application/json", `{}`); status != http.StatusUnauthorized {
		t.Errorf("wrong key: %d", status)
	}
	if status, _ := do(t, http.MethodPost, "/no-such-slug/read", f.token, "application/json", `{}`); status != http.StatusNotFound {
		t.Errorf("unknown slug: %d", status)
	}
	if status, _ := do(t, http.MethodPost, "/no-such-slug/read", "sgk_wrong", "application/json", `{}`); status != http.StatusUnauthorized {
		t.Errorf("unknown slug without a valid key must not say it is unknown: %d", status)
	}
	f.rejected(t, "mkdir", `{"path": "x"}`, http.StatusForbidden, "forbidden")
	f.rejected(t, "format", `{}`, http.StatusNotFound, "unknown_command")
	if status, out := do(t, http.MethodGet, path, f.token, "", ""); status != http.StatusMethodNotAllowed || out["error"] == nil {
		t.Errorf("GET: %d %v", status, out)
	}
	if status, _ := do(t, http.MethodPost, path, f.token, "text/plain", `{"path": "x"}`); status != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain: %d", status)
	}
	big := `{"path": "x", "file": {"text": "` + strings.Repeat("a", maxBody) + `"}}`
	if status, _ := do(t, http.MethodPost, "/"+f.slug+"/write", f.token, "application/json", big); status != http.StatusRequestEntityTooLarge {
		t.Errorf("too large: %d", status)
	}
	for body, field := range map[string]string{
		`{"path": 5}`:                         "path",
		`{"path": "x", "colour": "red"}`:      "colour",
		`{"path": "x"`:                        "body",
		`{"path": "x"} {}`:                    "body",
		`{}`:                                  "path",
		`{"path": "x", "encoding": "utf-16"}`: "encoding",
	} {
		if e := f.rejected(t, "read", body, http.StatusBadRequest, "invalid_request"); e["field"] != field {
			t.Errorf("%s: field %v, want %s (%v)", body, e["field"], field, e["message"])
		}
	}
	f.rejected(t, "write", `{"path": "x", "file": {"text": "a", "base64": "YQ=="}}`, http.StatusBadRequest, "invalid_request")
}

func TestOtherNamespacesConnectionsLookMissing(t *testing.T) {
	a, b := newFixture(t), newFixture(t)
	if status, _ := do(t, http.MethodPost, "/"+b.slug+"/exists", a.token, "application/json", `{"path": "/"}`); status != http.StatusNotFound {
		t.Errorf("a key on another namespace's slug: %d, want 404", status)
	}
	// A revoked key learns nothing of slugs: it is refused as revoked.
	var key v1alpha1.ApiKey
	must(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: a.ns, Name: "key"}, &key))
	patch := client.MergeFrom(key.DeepCopy())
	key.Spec.Disabled = true
	must(t, k8s.Patch(context.Background(), &key, patch))
	eventuallyFound(t, "a disabled key on another namespace's slug answered 401", func() (bool, string) {
		status, _ := do(t, http.MethodPost, "/"+b.slug+"/exists", a.token, "application/json", `{"path": "/"}`)
		return status == http.StatusUnauthorized, fmt.Sprint(status)
	})
}

// TestServerAnswersKeepTheSession: an operation the server refuses is the
// answer, not a broken session: no reconnect, no 502.
func TestServerAnswersKeepTheSession(t *testing.T) {
	f := newFixture(t)
	f.ok(t, "ping", ``)
	logins := f.sshd.Logins(t)
	must(t, os.Mkdir(filepath.Join(f.sshd.Dir, "locked"), 0o700)) // root's, closed to the SFTP user
	f.failure(t, "exists", `{"path": "locked/x"}`, "permission_denied")
	f.failure(t, "write", `{"path": "locked/x", "file": {"text": "x"}}`, "permission_denied")
	f.failure(t, "read", fmt.Sprintf(`{"path": %q}`, strings.Repeat("n", 300)), "failure")
	f.failure(t, "mkdir", `{"path": "locked/a/b", "parents": true}`, "permission_denied")
	f.ok(t, "write", `{"path": "file", "file": {"text": "x"}}`)
	f.failure(t, "mkdir", `{"path": "file/sub", "parents": true}`, "not_a_directory")
	if got := f.sshd.Logins(t); got != logins {
		t.Errorf("%d logins after server errors, want %d: sessions were discarded", got, logins)
	}
}

func TestFailingConnectionAnswers503(t *testing.T) {
	f := newFixture(t)
	f.ok(t, "ping", ``)
	// Once the connection is tested again and fails, the gateway refuses it.
	var conn v1alpha1.SftpConnection
	must(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "box"}, &conn))
	patch := client.MergeFrom(conn.DeepCopy())
	conn.Spec.Port = 1
	must(t, k8s.Patch(context.Background(), &conn, patch))
	// First "being tested", then the test's outcome with its reason.
	eventuallyFound(t, "503 naming ConnectionRefused", func() (bool, string) {
		status, out := f.call(t, "ping", ``)
		e, _ := out["error"].(map[string]any)
		return status == http.StatusServiceUnavailable && strings.Contains(fmt.Sprint(e["message"]), "ConnectionRefused"),
			fmt.Sprintf("%d %v", status, out)
	})
}

// TestRestartedServer: sshd restarts, dropping the pooled connection; the
// next request succeeds on a fresh one.
func TestRestartedServer(t *testing.T) {
	f := newFixture(t)
	f.ok(t, "write", `{"path": "before", "file": {"text": "1"}}`)
	logins := f.sshd.Logins(t)
	f.sshd.Restart(t)
	if f.ok(t, "exists", `{"path": "before"}`) != true {
		t.Error("the file is gone")
	}
	f.ok(t, "write", `{"path": "after", "file": {"text": "2"}}`)
	if got := f.sshd.Logins(t); got != logins+1 {
		t.Errorf("%d logins after the restart, want one more than %d", got, logins)
	}
}

// TestHungServerAnswers504: a server that stops answering is given the
// connection's operationTimeout, on the session a request runs on and on
// the dial of a new one, and then answered 504 (connectTimeout, here
// longer than testClient waits, does not hold the request); once it
// answers again, requests are served on a fresh session.
func TestHungServerAnswers504(t *testing.T) {
	conn, sshd := newConnection(t, func(c *v1alpha1.SftpConnection) {
		c.Spec.Limits.OperationTimeout = &metav1.Duration{Duration: time.Second}
		c.Spec.Limits.ConnectTimeout = &metav1.Duration{Duration: 2 * time.Minute}
	})
	f := serve(t, conn, sshd)
	f.ok(t, "write", `{"path": "kept", "file": {"text": "1"}}`)
	thaw := sshd.Freeze(t)
	defer thaw()
	// The pooled session hangs: it is closed, and the pool is empty.
	f.rejected(t, "write", `{"path": "lost", "file": {"text": "2"}}`, http.StatusGatewayTimeout, "upstream_timeout")
	// The dial of a new one hangs in the handshake.
	f.rejected(t, "exists", `{"path": "kept"}`, http.StatusGatewayTimeout, "upstream_timeout")
	thaw()
	// A busy machine may take longer than the second to greet the first
	// dial after the thaw: that one may still answer 504.
	for late := range 5 {
		status, _ := f.call(t, "exists", `{"path": "kept"}`)
		if status != http.StatusGatewayTimeout {
			break
		}
		t.Logf("504 after the thaw (%d)", late+1)
	}
	if f.ok(t, "exists", `{"path": "kept"}`) != true {
		t.Error("the file written before is gone")
	}
}

// TestConcurrentClients runs many clients at once on one connection (under
// -race in make test).
func TestConcurrentClients(t *testing.T) {
	f := newFixture(t)
	const clients, rounds = 16, 5
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for r := range rounds {
				content := fmt.Sprintf("client %d round %d", c, r)
				file := fmt.Sprintf("c%d.txt", c)
				f.ok(t, "write", fmt.Sprintf(`{"path": %q, "file": {"text": %q}}`, file, content))
				if got := f.ok(t, "read", fmt.Sprintf(`{"path": %q}`, file)).(map[string]any)["content"]; got != content {
					t.Errorf("read %q, want %q", got, content)
				}
			}
		})
	}
	wg.Wait()
	if n := len(f.ok(t, "list", `{"path": "/"}`).(map[string]any)["entries"].([]any)); n != clients {
		t.Errorf("%d files, want %d", n, clients)
	}
	// Sessions are pooled: no handshake per request, and no more SSH
	// connections than the connection's limit (4 by default) plus the
	// controller's test and the one the fixture's first request opened.
	if logins := f.sshd.Logins(t); logins > 4+2 {
		t.Errorf("%d logins for %d requests", logins, clients*rounds*2)
	}
}

func TestServiceEndpoints(t *testing.T) {
	for path, contentType := range map[string]string{
		"/healthz":      "application/json",
		"/readyz":       "application/json",
		"/openapi.json": "application/json",
		"/docs":         "text/html; charset=utf-8",
	} {
		resp, err := http.Get(baseURL + path)
		must(t, err)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), contentType) {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
}

// TestPoolIsWarmedWhenReady: once a connection is Ready, the gateway opens
// a session to it before any request asks.
func TestPoolIsWarmedWhenReady(t *testing.T) {
	_, sshd := newConnection(t) // and no request
	// One login for the controller's test, one for the gateway's pool.
	eventuallyFound(t, "the gateway warms the pool", func() (bool, string) {
		n := sshd.Logins(t)
		return n >= 2, fmt.Sprintf("%d logins", n)
	})
}

func TestMetrics(t *testing.T) {
	f := newFixture(t)
	f.ok(t, "ping", ``)
	if status, _ := do(t, http.MethodGet, "/metrics", "", "", ""); status != http.StatusNotFound {
		t.Errorf("the API serves /metrics: %d", status)
	}
	resp, err := http.Get(metricsURL + "/metrics")
	must(t, err)
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	must(t, err)
	for _, want := range []string{
		`sftpgate_gateway_requests_total{command="ping",status="200"}`,
		`sftpgate_gateway_request_duration_seconds_bucket{command="ping"`,
		`sftpgate_gateway_dials_total{result="ok"}`,
		`sftpgate_gateway_pool_sessions{name="box",namespace="` + f.ns + `"}`,
	} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	profiles, err := http.Get(metricsURL + "/debug/pprof/")
	must(t, err)
	_ = profiles.Body.Close()
	if profiles.StatusCode != http.StatusOK {
		t.Errorf("with profiling on, /debug/pprof/ answers %d", profiles.StatusCode)
	}

	// A second gateway in the process reports its own requests and pools.
	second, err := gateway.New(restConfig, gateway.Options{Networks: egress.Networks{DeniedNetworks: testcluster.LoopbackNetworks}, Log: testcluster.Log("gateway")})
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	must(t, second.Start(ctx))
	scrape := func() string {
		rec := httptest.NewRecorder()
		second.MetricsHandler(false).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		return rec.Body.String()
	}
	if m := scrape(); strings.Contains(m, "sftpgate_gateway_requests_total{") {
		t.Errorf("a new gateway reports the first one's requests:\n%s", m)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/"+f.slug+"/ping", nil)
	req.Header.Set("Authorization", "Bearer "+f.token)
	second.Handler().ServeHTTP(rec, req)
	m := scrape()
	for _, want := range []string{`sftpgate_gateway_requests_total{command="ping",status="200"} 1`,
		`sftpgate_gateway_pool_sessions{name="box",namespace="` + f.ns + `"}`} {
		if rec.Code != http.StatusOK || !strings.Contains(m, want) {
			t.Errorf("the second gateway answered %d, and its metrics have no %s", rec.Code, want)
		}
	}
}

// raw sends a request with a raw body or asking for raw bytes, and returns
// the answer's status, headers and body (validated like every answer).
func (f *fixture) raw(t *testing.T, command, query, contentType, accept, rangeHeader string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, baseURL+"/"+f.slug+"/"+command+"?"+query, bytes.NewReader(body))
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("Content-Type", contentType)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if rangeHeader != "" {
		req.Header.Set("Range", rangeHeader)
	}
	return send(t, req, string(body))
}

// testClient gives up on an answer after a minute: a request that hangs
// fails its test rather than the whole package's run.
var testClient = &http.Client{Timeout: time.Minute}

// send sends req and returns the answer's status, headers and body,
// validated against the OpenAPI document.
func send(t testing.TB, req *http.Request, body string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := testClient.Do(req)
	must(t, err)
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	must(t, err)
	validate(t, req, body, resp, raw)
	return resp.StatusCode, resp.Header, raw
}

func TestRawUploadAndDownload(t *testing.T) {
	f := newFixture(t)
	data := make([]byte, 5<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	status, _, out := f.raw(t, "write", "path=big/blob.bin&createParents=true&mode=0640", "application/octet-stream", "", "", data)
	if status != http.StatusOK || !strings.Contains(string(out), `"bytesWritten":5242880`) {
		t.Fatalf("raw write: %d %s", status, out)
	}
	onServer, err := os.ReadFile(filepath.Join(f.sshd.Dir, "big/blob.bin"))
	must(t, err)
	if !bytes.Equal(onServer, data) {
		t.Fatal("the server holds other bytes")
	}
	if status, _, out := f.raw(t, "append", "path=big/blob.bin", "application/octet-stream", "", "", []byte("tail")); status != http.StatusOK || !strings.Contains(string(out), `"size":5242884`) {
		t.Errorf("raw append: %d %s", status, out)
	}

	status, header, got := f.raw(t, "read", "", "application/json", "application/octet-stream", "", []byte(`{"path": "big/blob.bin"}`))
	if status != http.StatusOK || !bytes.Equal(got, append(data, "tail"...)) || header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("raw read: %d, %d bytes, %s", status, len(got), header.Get("Content-Type"))
	}
	status, header, got = f.raw(t, "read", "", "application/json", "application/octet-stream", "bytes=10-19", []byte(`{"path": "big/blob.bin"}`))
	if status != http.StatusPartialContent || !bytes.Equal(got, data[10:20]) || header.Get("Content-Range") != "bytes 10-19/5242884" {
		t.Errorf("ranged read: %d %q %s", status, got, header.Get("Content-Range"))
	}
	// The server's refusal is still the envelope.
	if status, _, out := f.raw(t, "read", "", "application/json", "application/octet-stream", "", []byte(`{"path": "missing"}`)); status != http.StatusOK || !strings.Contains(string(out), `"not_found"`) {
		t.Errorf("raw read of a missing file: %d %s", status, out)
	}
	if status, _, _ := f.raw(t, "read", "", "application/json", "application/octet-stream", "", []byte(`{"path": "big/blob.bin", "offset": 3}`)); status != http.StatusBadRequest {
		t.Errorf("offset with a raw read: %d", status)
	}
	if status, _, _ := f.raw(t, "write", "path=x&colour=red", "application/octet-stream", "", "", []byte("x")); status != http.StatusBadRequest {
		t.Errorf("unknown query parameter: %d", status)
	}
	if status, _, _ := f.raw(t, "write", "path=too-big", "application/octet-stream", "", "", make([]byte, maxUpload+1)); status != http.StatusRequestEntityTooLarge {
		t.Errorf("upload over the limit: %d", status)
	}
}

func TestFurtherCommandsAgainstOpenSSH(t *testing.T) {
	f := newFixture(t)
	f.ok(t, "write", `{"path": "a.txt", "file": {"text": "abc"}}`)

	// rename refuses to replace unless asked; copy likewise.
	f.ok(t, "write", `{"path": "b.txt", "file": {"text": "other"}}`)
	f.failure(t, "rename", `{"from": "a.txt", "to": "b.txt"}`, "already_exists")
	if r := f.ok(t, "rename", `{"from": "a.txt", "to": "b.txt", "overwrite": true}`).(map[string]any); r["to"] != "/b.txt" {
		t.Errorf("rename = %v", r)
	}
	f.failure(t, "read", `{"path": "a.txt"}`, "not_found")
	if c := f.ok(t, "copy", `{"from": "b.txt", "to": "c.txt"}`).(map[string]any); c["bytesCopied"] != float64(3) {
		t.Errorf("copy = %v", c)
	}
	f.failure(t, "copy", `{"from": "b.txt", "to": "c.txt"}`, "already_exists")
	if got, _ := os.ReadFile(filepath.Join(f.sshd.Dir, "c.txt")); string(got) != "abc" {
		t.Errorf("copied %q", got)
	}

	f.ok(t, "chmod", `{"path": "c.txt", "mode": "0600"}`)
	if st := f.ok(t, "stat", `{"path": "c.txt"}`).(map[string]any); st["mode"] != "0600" {
		t.Errorf("after chmod: %v", st)
	}
	f.ok(t, "chtimes", `{"path": "c.txt", "modified": "2020-01-02T03:04:05Z"}`)
	if st := f.ok(t, "stat", `{"path": "c.txt"}`).(map[string]any); st["modified"] != "2020-01-02T03:04:05Z" {
		t.Errorf("after chtimes: %v", st)
	}

	// A symlink's target is taken inside the root, whatever it says.
	if l := f.ok(t, "symlink", `{"path": "link", "target": "../../../../c.txt"}`).(map[string]any); l["target"] != "/c.txt" {
		t.Errorf("symlink = %v", l)
	}
	if l := f.ok(t, "readlink", `{"path": "link"}`).(map[string]any); l["target"] != "/c.txt" {
		t.Errorf("readlink = %v", l)
	}
	if r := f.ok(t, "read", `{"path": "link"}`).(map[string]any); r["content"] != "abc" {
		t.Errorf("read through the link = %v", r)
	}
	if r := f.ok(t, "realpath", `{"path": "link"}`).(map[string]any); r["path"] != "/c.txt" {
		t.Errorf("realpath = %v", r)
	}
	must(t, os.Symlink("/etc/hostname", filepath.Join(f.sshd.Dir, "outside")))
	f.rejected(t, "readlink", `{"path": "outside"}`, http.StatusBadRequest, "invalid_request")
	f.rejected(t, "realpath", `{"path": "outside"}`, http.StatusBadRequest, "invalid_request")
	f.rejected(t, "copy", `{"from": "outside", "to": "stolen"}`, http.StatusBadRequest, "invalid_request")

	if v := f.ok(t, "statvfs", ``).(map[string]any); v["totalBytes"].(float64) <= 0 {
		t.Errorf("statvfs = %v", v)
	}
	h := f.ok(t, "hash", `{"path": "c.txt"}`).(map[string]any)
	if h["hash"] != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" || h["size"] != float64(3) {
		t.Errorf("sha256 = %v", h)
	}
	if h := f.ok(t, "hash", `{"path": "c.txt", "algorithm": "md5"}`).(map[string]any); h["hash"] != "900150983cd24fb0d6963f7d28e17f72" {
		t.Errorf("md5 = %v", h)
	}
	f.rejected(t, "hash", `{"path": "c.txt", "algorithm": "crc32"}`, http.StatusBadRequest, "invalid_request")
}

// startReplica starts another gateway replica on the same cluster with
// opts (the tests' limits when zero) and returns its URL.
func startReplica(t testing.TB, opts gateway.Options) string {
	t.Helper()
	return startReplicaOn(t, restConfig, opts)
}

// startReplicaOn is startReplica talking to the API server through cfg.
func startReplicaOn(t testing.TB, cfg *rest.Config, opts gateway.Options) string {
	t.Helper()
	opts.DeniedNetworks, opts.Log = cmp.Or(opts.DeniedNetworks, testcluster.LoopbackNetworks), testcluster.Log("gateway")
	if opts.Limits.MaxUploadBytes == 0 {
		opts.Limits = gateway.Limits{MaxBodyBytes: maxBody, MaxUploadBytes: maxUpload, RequestTimeout: 30 * time.Second}
	}
	gw, err := gateway.New(cfg, opts)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	must(t, gw.Start(ctx))
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestRateLimitPerKey runs a gateway whose keys may send two requests at
// once and then one every ten minutes: however slow the first two, the
// third is refused.
func TestRateLimitPerKey(t *testing.T) {
	f := newFixture(t)
	base := startReplica(t, gateway.Options{
		Networks: egress.Networks{DeniedNetworks: "link-local,metadata"},
		Limits:   gateway.Limits{MaxBodyBytes: maxBody, MaxUploadBytes: maxUpload, RequestTimeout: 30 * time.Second, RatePerKey: 1.0 / 600, RateBurst: 2},
	})

	statuses := make([]int, 3)
	var retryAfter string
	for i := range statuses {
		req, err := http.NewRequest(http.MethodPost, base+"/"+f.slug+"/ping", nil)
		must(t, err)
		req.Header.Set("Authorization", "Bearer "+f.token)
		status, header, _ := send(t, req, "")
		statuses[i], retryAfter = status, header.Get("Retry-After")
	}
	if wait, err := strconv.Atoi(retryAfter); statuses[0] != http.StatusOK || statuses[1] != http.StatusOK ||
		statuses[2] != http.StatusTooManyRequests || err != nil || wait < 500 || wait > 600 {
		t.Errorf("statuses %v, Retry-After %q; want 200, 200, 429 with most of ten minutes", statuses, retryAfter)
	}
}

// partialBody gives n zero bytes, then ends with what end returns: an
// error at once for a client whose upload is cut off, or after a wait for
// a slow one.
type partialBody struct {
	n   int
	end func() error
}

func (r *partialBody) Read(b []byte) (int, error) {
	if r.n <= 0 {
		return 0, r.end()
	}
	b = b[:min(len(b), r.n)]
	clear(b)
	r.n -= len(b)
	return len(b), nil
}

// TestUploadCutOffLosesNothing: a raw upload replaces a file only once it
// is complete.
func TestUploadCutOffLosesNothing(t *testing.T) {
	f := newFixture(t)
	original := filepath.Join(f.sshd.Dir, "precious.txt")
	f.ok(t, "write", `{"path": "precious.txt", "file": {"text": "keep me"}, "mode": "0600"}`)

	req, err := http.NewRequest(http.MethodPost, baseURL+"/"+f.slug+"/write?path=precious.txt", &partialBody{n: 1 << 20, end: func() error { return errors.New("cut off") }})
	must(t, err)
	req.ContentLength = 4 << 20
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("Content-Type", "application/octet-stream")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		_ = resp.Body.Close()
	}
	// The gateway notices the cut when its read of the body fails.
	eventuallyFound(t, "no temporary file is left behind", func() (bool, string) {
		entries, err := os.ReadDir(f.sshd.Dir)
		must(t, err)
		return len(entries) == 1, fmt.Sprint(entries)
	})
	if got, _ := os.ReadFile(original); string(got) != "keep me" {
		t.Errorf("the file holds %d bytes (%.20q...) after a cut-off upload", len(got), got)
	}

	// A complete upload replaces it, keeping its permissions.
	if status, _, out := f.raw(t, "write", "path=precious.txt", "application/octet-stream", "", "", []byte("new")); status != http.StatusOK {
		t.Fatalf("upload: %d %s", status, out)
	}
	if st := f.ok(t, "stat", `{"path": "precious.txt"}`).(map[string]any); st["mode"] != "0600" || st["size"] != float64(3) {
		t.Errorf("after the upload: %v", st)
	}
	if status, _, out := f.raw(t, "write", "path=precious.txt&overwrite=false", "application/octet-stream", "", "", []byte("x")); status != http.StatusOK || !strings.Contains(string(out), "already_exists") {
		t.Errorf("overwrite=false: %d %s", status, out)
	}
}

// TestFailedUploadAnswersWhileTheClientSends: an upload the server refuses
// is answered at once, though the gateway was reading the body ahead and the
// client has more to send.
func TestFailedUploadAnswersWhileTheClientSends(t *testing.T) {
	f := newFixture(t)
	stop := make(chan struct{})
	defer close(stop)
	body := &partialBody{n: 100 << 10, end: func() error { <-stop; return errors.New("stopped") }}
	req, err := http.NewRequest(http.MethodPost, baseURL+"/"+f.slug+"/write?path=no-such-dir/file.bin", body)
	must(t, err)
	req.ContentLength = 4 << 20
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("Content-Type", "application/octet-stream")
	answered := make(chan string, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- err.Error()
			return
		}
		defer func() { _ = resp.Body.Close() }()
		out, _ := io.ReadAll(resp.Body)
		answered <- string(out)
	}()
	select {
	case out := <-answered:
		if !strings.Contains(out, `"not_found"`) {
			t.Errorf("answer: %s", out)
		}
	case <-time.After(20 * time.Second): // a hang, not a speed check
		t.Fatal("no answer while the client was still sending")
	}
}

// BenchmarkWrite measures the gateway's own path for a 1 KiB write, in this
// process and without the network's HTTP round trip: its CPU time and
// allocations per request, against the real sshd (make bench measures the
// whole system). The benchmark's own request and writer allocate next to
// nothing (writeBench); BenchmarkWriteLayers has what each layer costs.
//
// Each write makes a new file, as most do; a write over an existing file,
// through a temporary file, takes more round trips (make bench measures
// both).
func BenchmarkWrite(b *testing.B) {
	f := newFixture(b)
	// The request log as the gateway writes it (JSON), but not to the
	// benchmark's output.
	quietLog.Store(true)
	b.Cleanup(func() { quietLog.Store(false) })
	benchWrites(b, newWriteBench(f.slug, f.token, "bench-"), gatewayHandler)
}

// A credentials Secret the API server does not give the gateway is
// pool.ErrCredentials, which the API answers as the connection's problem
// (503), not the SFTP server's.
func TestUnreadableSecretIsErrCredentials(t *testing.T) {
	pools := &pool.Pools{Secrets: k8s}
	conn := &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "box", UID: "uid"}}
	conn.Spec.Credentials.SecretRef.Name = "missing"
	if _, err := pools.Get(context.Background(), &sftpdial.Dialer{}, conn); !errors.Is(err, pool.ErrCredentials) {
		t.Errorf("Get = %v, want pool.ErrCredentials", err)
	}

	// Requests that waited for a failed read get its error; they do not
	// each read again in turn.
	slow := &slowReads{Reader: k8s, first: make(chan struct{}), release: make(chan struct{})}
	pools = &pool.Pools{Secrets: slow}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := pools.Get(context.Background(), &sftpdial.Dialer{}, conn); !errors.Is(err, pool.ErrCredentials) {
				t.Errorf("Get = %v, want pool.ErrCredentials", err)
			}
		})
	}
	<-slow.first
	waitForGoroutines(t, "pool.(*Pools).Get", "sync.Mutex.Lock", 7) // the other seven queue behind the read
	close(slow.release)
	wg.Wait()
	if n := slow.reads.Load(); n != 1 {
		t.Errorf("%d reads of the Secret, want 1", n)
	}
}

// slowReads holds the first Get until release is closed.
type slowReads struct {
	client.Reader
	reads   atomic.Int32
	first   chan struct{}
	release chan struct{}
}

func (s *slowReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if s.reads.Add(1) == 1 {
		close(s.first)
		<-s.release
	}
	return s.Reader.Get(ctx, key, obj, opts...)
}

// waitForGoroutines waits until n goroutines are blocked in state (as
// "sync.Mutex.Lock") within fn, as their stacks show: for a test that
// needs others to queue where nothing signals it.
func waitForGoroutines(t testing.TB, fn, state string, n int) {
	t.Helper()
	buf := make([]byte, 1<<20)
	eventuallyFound(t, fmt.Sprintf("%d goroutines blocked in %s", n, fn), func() (bool, string) {
		blocked := 0
		for g := range strings.SplitSeq(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			header, _, _ := strings.Cut(g, "\n")
			if strings.Contains(header, "["+state) && strings.Contains(g, fn+"(") {
				blocked++
			}
		}
		return blocked >= n, fmt.Sprint(blocked)
	})
}

// testLog is where the tests' gateway (TestMain's) logs: standard error,
// or nowhere while quietLog is set.
type testLog struct{ out io.Writer }

// quietLog has a benchmark's gateway log nowhere: its output is its
// figures.
var quietLog atomic.Bool

func (l testLog) Write(p []byte) (int, error) {
	if quietLog.Load() {
		return len(p), nil
	}
	return l.out.Write(p)
}

// TestConformance runs the conformance table through the gateway against
// a real OpenSSH sshd and the in-process test server (hack/dev's test runs
// it against the demo server of make run). Each connection's root is a
// directory below the server's own, so that the table has somewhere
// outside it for symlinks to lead.
func TestConformance(t *testing.T) {
	var commands []string
	for p := range apiDoc.Paths.Map() {
		// The tus endpoint's two paths are one capability, "uploads".
		if name, ok := strings.CutPrefix(p, "/{slug}/"); ok && !strings.Contains(name, "/") {
			commands = append(commands, name)
		}
	}
	if missing := conformance.Coverage(commands); len(missing) > 0 || len(commands) == 0 {
		t.Errorf("the conformance table has no success or no failure row for %v of %d commands", missing, len(commands))
	}
	t.Run("openssh", func(t *testing.T) {
		t.Parallel()
		sshd := testsshd.Start(t)
		root := filepath.Join(sshd.Dir, "root")
		must(t, os.Mkdir(root, 0o755))
		must(t, os.Chown(root, sshd.UID, sshd.GID))
		conn := newConnectionTo(t, sshd.Host, sshd.Port, testsshd.User, sshd.Password, sshd.HostKeyLine, root)
		f := serve(t, conn, sshd)
		target := conformance.Target{URL: baseURL + "/" + f.slug, Token: f.token, ScopedToken: scopedKey(t, f),
			Dir: root, UID: sshd.UID, GID: sshd.GID, Check: validate}
		conformance.Run(t, target)
		t.Run("race", func(t *testing.T) { conformance.Race(t, target) })
	})
	t.Run("vsftpd", func(t *testing.T) {
		t.Parallel()
		ftpd := testftpd.Start(t)
		root := filepath.Join(ftpd.Dir, "root")
		must(t, os.Mkdir(root, 0o755))
		must(t, os.Chown(root, ftpd.UID, ftpd.GID))
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gw-"}}
		must(t, k8s.Create(context.Background(), ns))
		conn, secret := ftpd.Connection(ns.Name, "box")
		conn.Spec.RootPath, conn.Spec.Slug = root, "ftp-"+ns.Name
		must(t, k8s.Create(context.Background(), secret))
		must(t, k8s.Create(context.Background(), conn))
		f := serveAt(t, conn, conn.Spec.Slug, nil)
		target := conformance.Target{URL: baseURL + "/" + f.slug, Token: f.token, ScopedToken: scopedKey(t, f),
			Dir: root, UID: ftpd.UID, GID: ftpd.GID, Check: validate, Lacks: conformance.FTP, RaceTries: conformance.RaceTries / 4}
		conformance.Run(t, target)
		t.Run("race", func(t *testing.T) { conformance.Race(t, target) })
	})
	t.Run("versitygw", func(t *testing.T) {
		t.Parallel()
		s3 := tests3.Start(t)
		s3.Bucket(t, "conformance")
		root := s3.Path("conformance", "root")
		must(t, os.MkdirAll(root, 0o755))
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gw-"}}
		must(t, k8s.Create(context.Background(), ns))
		store := testkit.ReadyStore(t, k8s, ns.Name, "bucket", s3, "conformance", "root/", func(s *v1alpha1.ObjectStore) { s.Spec.Slug = "s3-" + ns.Name })
		f := serveAt(t, store, store.Spec.Slug, nil)
		target := conformance.Target{URL: baseURL + "/" + f.slug, Token: f.token, ScopedToken: scopedKey(t, f),
			Dir: root, UID: -1, GID: -1, Check: validate, Lacks: conformance.S3, PrefixFolders: true}
		conformance.Run(t, target)
		t.Run("race", func(t *testing.T) { conformance.Race(t, target) })
	})
	t.Run("in-process", func(t *testing.T) {
		t.Parallel()
		s := testsftp.Start(t)
		root := filepath.Join(s.Dir, "root")
		must(t, os.Mkdir(root, 0o755))
		conn := newConnectionTo(t, s.Host, s.Port, s.User, s.Password, s.HostKeyLine(), "/root")
		f := serve(t, conn, nil)
		target := conformance.Target{URL: baseURL + "/" + f.slug, Token: f.token, ScopedToken: scopedKey(t, f),
			Dir: root, UID: -1, GID: -1, Check: validate}
		conformance.Run(t, target)
		t.Run("race", func(t *testing.T) { conformance.Race(t, target) })
	})
}

// scopedKey makes a second key of f's namespace, limited to
// conformance.ScopedPath, and returns its token once the gateway takes it.
func scopedKey(t *testing.T, f *fixture) string {
	t.Helper()
	token, keyID := apitoken.NewToken()
	must(t, k8s.Create(context.Background(), &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "scoped"},
		Spec: v1alpha1.ApiKeySpec{Paths: []string{conformance.ScopedPath}, Token: v1alpha1.TokenSource{SHA256: apitoken.Hash(token), KeyID: keyID}}}))
	eventuallyFound(t, "the gateway takes the scoped key", func() (bool, string) {
		status, _, _ := post(t, context.Background(), baseURL+"/"+f.slug, token, "stat", `{"path": "/"}`)
		return status == http.StatusForbidden, fmt.Sprint(status) // known, and limited
	})
	return token
}
