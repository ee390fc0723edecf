// Package quickstart does what the README tells a newcomer, against make
// run's environment (hack/sftpgate-dev, package hack/dev) run as its own
// process.
package quickstart

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/sftpgate/sftpgate/api"
	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/conformance"
	"github.com/sftpgate/sftpgate/hack/fixtures/procs"
	"github.com/sftpgate/sftpgate/hack/fixtures/testhttp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/internal/apitoken"
)

// The test kit's, as every test package has them.
var must = testkit.Must

// TestQuickstart does what the README tells a newcomer, against
// sftpgate-dev run as its own process on free ports.
func TestQuickstart(t *testing.T) {
	binary := filepath.Join(t.TempDir(), "sftpgate-dev")
	build := exec.Command("go", "build", "-o", binary, "../../../hack/sftpgate-dev")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dataDir := t.TempDir()
	dev := start(t, binary, dataDir)
	env := dev.env

	// The printed write and read.
	status, body := call(t, env, "write", `{"path": "hello.txt", "file": {"text": "Hello, SFTP!"}}`, env["DEMO_API_KEY"])
	if status != http.StatusOK || !strings.Contains(body, `"bytesWritten":12`) {
		t.Fatalf("write: %d %s", status, body)
	}
	if status, body = call(t, env, "read", `{"path": "hello.txt"}`, env["DEMO_API_KEY"]); !strings.Contains(body, `"content":"Hello, SFTP!"`) {
		t.Errorf("read: %d %s", status, body)
	}
	if _, body = call(t, env, "list", `{}`, env["DEMO_API_KEY"]); !strings.Contains(body, `"name":"hello.txt"`) {
		t.Errorf("list: %s", body)
	}
	if status, body = call(t, env, "read", `{"path": "missing.txt"}`, env["DEMO_API_KEY"]); status != http.StatusOK || !strings.Contains(body, `"code":"not_found"`) {
		t.Errorf("reading a missing file: %d %s", status, body)
	}
	if status, _ = call(t, env, "ping", `{}`, "sgk_wrong"); status != http.StatusUnauthorized {
		t.Errorf("a wrong key: %d", status)
	}

	// The tour's web UI: the demo account's file browser shows the file.
	jar, err := cookiejar.New(nil)
	must(t, err)
	browser := &http.Client{Jar: jar, Timeout: time.Minute}
	login, err := http.NewRequest(http.MethodPost, env["WEBUI_URL"]+"/login",
		strings.NewReader(url.Values{"email": {env["DEMO_EMAIL"]}, "password": {env["DEMO_PASSWORD"]}}.Encode()))
	must(t, err)
	login.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	login.Header.Set("Origin", env["WEBUI_URL"])
	resp, err := browser.Do(login)
	must(t, err)
	_ = resp.Body.Close()
	resp, err = browser.Get(env["WEBUI_URL"] + "/connections/demo/files?path=/")
	must(t, err)
	page, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	must(t, err)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), `data-name="hello.txt"`) {
		t.Errorf("the demo's file browser: %d, without hello.txt", resp.StatusCode)
	}
	// Its OpenPGP keys page lists the keys the demo inbox decrypts with.
	resp, err = browser.Get(env["WEBUI_URL"] + "/openpgp")
	must(t, err)
	page, err = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	must(t, err)
	for _, key := range []string{`data-key="demo-openpgp"`, `data-key="partner-openpgp"`} {
		if !strings.Contains(string(page), key) {
			t.Errorf("the demo's OpenPGP keys page does not list %s: %d", key, resp.StatusCode)
		}
	}

	// The demo provider signs the demo team's viewer in; the team's files
	// are theirs to see.
	jar, err = cookiejar.New(nil)
	must(t, err)
	viewer := &http.Client{Jar: jar, Timeout: time.Minute}
	resp, err = viewer.Get(env["WEBUI_URL"] + "/login/oidc")
	must(t, err)
	_ = resp.Body.Close()
	if !strings.HasPrefix(resp.Request.URL.String(), env["OIDC_ISSUER"]+"/login") {
		t.Fatalf("sign-in went to %s, not the demo provider's form", resp.Request.URL)
	}
	resp, err = viewer.PostForm(env["OIDC_ISSUER"]+"/login", url.Values{"authRequestID": {resp.Request.URL.Query().Get("authRequestID")},
		"username": {env["DEMO_VIEWER_EMAIL"]}, "password": {env["DEMO_PASSWORD"]}})
	must(t, err)
	_ = resp.Body.Close()
	switchTeam, err := http.NewRequest(http.MethodPost, env["WEBUI_URL"]+"/teams", strings.NewReader(url.Values{"namespace": {"demo"}}.Encode()))
	must(t, err)
	switchTeam.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	switchTeam.Header.Set("Origin", env["WEBUI_URL"])
	resp, err = viewer.Do(switchTeam)
	must(t, err)
	_ = resp.Body.Close()
	resp, err = viewer.Get(env["WEBUI_URL"] + "/connections/demo/files?path=/")
	must(t, err)
	page, err = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	must(t, err)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), `data-name="hello.txt"`) || strings.Contains(string(page), "upload-files") {
		t.Errorf("the demo team's viewer's file browser: %d, without hello.txt or with uploads", resp.StatusCode)
	}

	// The printed file dropped into the watched folder: its event prints.
	// (kubectl's client, with the kubeconfig dev wrote, says what the
	// watch did if it does not.)
	cfg, err := clientcmd.BuildConfigFromFlags("", env["KUBECONFIG"])
	must(t, err)
	k8s, err := client.New(cfg, client.Options{Scheme: api.Scheme()})
	must(t, err)
	ctx := context.Background()
	if status, body = call(t, env, "write", `{"path": "incoming/report.csv", "file": {"text": "id,total\n1,42\n"}}`, env["DEMO_API_KEY"]); status != http.StatusOK {
		t.Fatalf("write into incoming/: %d %s", status, body)
	}
	dev.prints(t, "event dev.sftpgate.file.created /incoming/report.csv (14 bytes)", watchStatus(k8s, "incoming"))

	// kubectl's way: a second connection, to a real sshd.
	sshd := testsshd.Start(t)
	must(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "real"},
		StringData: map[string]string{v1alpha1.SecretKeyPassword: sshd.Password}}))
	conn := &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "real"}, Spec: v1alpha1.SftpConnectionSpec{
		Host: sshd.Host, Port: sshd.Port, Username: testsshd.User, RootPath: sshd.Dir,
		Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.LocalSecretReference{Name: "real"}},
		HostKey:     v1alpha1.HostKeyTrust{Trusted: []string{sshd.HostKeyLine}},
	}}
	must(t, k8s.Create(ctx, conn))
	testkit.EventuallyFound(t, "the connection to sshd is Ready", func() (bool, string) {
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(conn), conn))
		return meta.IsStatusConditionTrue(conn.Status.Conditions, v1alpha1.ConditionReady), fmt.Sprintf("%+v", conn.Status.Conditions)
	})

	// The tour's transfers, as hack/dev/demo-transfer.yaml and
	// demo-bucket.yaml have them (their sink this run's event printer):
	// incoming/ copied into the archive connection, then into the demo
	// bucket, each end printed.
	dev.tourTransfer(t, k8s, "../../../hack/dev/demo-transfer.yaml", env["EVENTS_URL"])
	dev.tourTransfer(t, k8s, "../../../hack/dev/demo-bucket.yaml", env["EVENTS_URL"])
	if object, err := os.ReadFile(filepath.Join(env["DEMO_BUCKET_DIR"], "incoming", "report.csv")); err != nil || string(object) != "id,total\n1,42\n" {
		t.Errorf("the object in the demo bucket: %q, %v", object, err)
	}
	if _, body = call(t, env, "read", `{"path": "incoming/report.csv"}`, env["DEMO_API_KEY"]); !strings.Contains(body, `"content":"id,total\n1,42\n"`) {
		t.Errorf("the source after the copy: %s", body)
	}
	if status, body = callSlug(t, env, "archive", "read", `{"path": "reports/report.csv"}`, env["DEMO_API_KEY"]); !strings.Contains(body, `"content":"id,total\n1,42\n"`) {
		t.Errorf("the copy, read through the archive connection: %d %s", status, body)
	}
	// The bucket at the gateway, as the tour lists it.
	if status, body = callSlug(t, env, "bucket", "list", `{"path": "incoming"}`, env["DEMO_API_KEY"]); !strings.Contains(body, `"name":"report.csv"`) {
		t.Errorf("the bucket's incoming/, listed at the gateway: %d %s", status, body)
	}

	// The OpenPGP tour: the partner's encrypted, signed file dropped into
	// partner/inbox/ is decrypted into clear/ and filed in
	// partner/done/; the transfer's end prints.
	sealed, err := os.ReadFile(filepath.Join(dataDir, "payroll.csv.pgp"))
	must(t, err)
	if status, body = call(t, env, "write", fmt.Sprintf(`{"path": "partner/inbox/payroll.csv.pgp", "file": {"base64": %q}}`,
		base64.StdEncoding.EncodeToString(sealed)), env["DEMO_API_KEY"]); status != http.StatusOK {
		t.Fatalf("write into partner/inbox/: %d %s", status, body)
	}
	dev.prints(t, "event dev.sftpgate.transfer.succeeded partner-inbox-", watchStatus(k8s, "partner-inbox"))
	if _, body = call(t, env, "read", `{"path": "clear/payroll.csv"}`, env["DEMO_API_KEY"]); !strings.Contains(body, `"content":"employee,net\n1001,3100.00`) {
		t.Errorf("the decrypted file: %s", body)
	}
	testkit.EventuallyFound(t, "the original is filed in partner/done/", func() (bool, string) {
		_, body = call(t, env, "list", `{"path": "partner/done"}`, env["DEMO_API_KEY"])
		return strings.Contains(body, `"name":"payroll.csv.pgp"`), body
	})

	// The demo server answers every command as OpenSSH does: the
	// conformance table, through a second connection to it whose root is
	// a directory of its own.
	demoConformance(t, k8s, dataDir, env)
	// The tour's expectation: a window of incoming/report-*.csv missed
	// (one opens every three minutes, due a minute later), then a report
	// dropped before the next opens comes late.
	var expecting v1alpha1.FileExpectation
	must(t, testkit.Wait(5*time.Minute, "the demo expectation misses a window with two minutes to the next", func() (bool, string) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: "demo", Name: "reports"}, &expecting)
		last := expecting.Status.LastOutcomes
		return err == nil && len(last) > 0 && last[0].Outcome == v1alpha1.OutcomeMissed &&
			time.Until(last[0].Window.Opens.Add(3*time.Minute)) > time.Minute, fmt.Sprintf("%v %+v", err, expecting.Status)
	}))
	if status, body = call(t, env, "write", `{"path": "incoming/report-1.csv", "file": {"text": "id,total\n1,42\n"}}`, env["DEMO_API_KEY"]); status != http.StatusOK {
		t.Fatalf("write into incoming/: %d %s", status, body)
	}
	dev.prints(t, "event dev.sftpgate.expectation.late /incoming", func() string {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: "demo", Name: "reports"}, &expecting)
		return fmt.Sprintf("the expectation: %v %+v", err, expecting.Status)
	})

	// Appending was once the command that ended the whole system.
	if status, body = call(t, env, "append", `{"path": "hello.txt", "file": {"text": " Again."}}`, env["DEMO_API_KEY"]); !strings.Contains(body, `"size":19`) {
		t.Errorf("append: %d %s", status, body)
	}

	// Ctrl-C stops everything; a restart on the same data keeps the key.
	dev.stop(t)
	dev = start(t, binary, dataDir)
	if status, body = call(t, dev.env, "read", `{"path": "hello.txt"}`, env["DEMO_API_KEY"]); !strings.Contains(body, "Hello, SFTP!") {
		t.Errorf("after a restart: %d %s", status, body)
	}

	// A second instance on the same data, even with --fresh, is refused
	// and deletes nothing of the first's.
	second := exec.Command(binary, "--fresh", "--data-dir="+dataDir, "--gateway-address="+testhttp.FreeAddr(t),
		"--webui-address="+testhttp.FreeAddr(t), "--sftp-address="+testhttp.FreeAddr(t))
	if out, err := second.CombinedOutput(); err == nil || !strings.Contains(string(out), "another sftpgate-dev") {
		t.Errorf("a second instance: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "etcd")); err != nil {
		t.Errorf("the running instance's data: %v", err)
	}

	// However sftpgate-dev ends, the control plane ends with it.
	children := procs.Descendants(dev.cmd.Process.Pid)
	must(t, dev.cmd.Process.Kill())
	_ = dev.cmd.Wait()
	for _, pid := range children {
		testkit.Eventually(t, fmt.Sprintf("process %d ends with sftpgate-dev killed with SIGKILL", pid), func() bool { return !procs.Alive(pid) })
	}
}

// demoConformance runs the conformance table against the demo server,
// through the gateway of sftpgate-dev, with the demo key.
func demoConformance(t *testing.T, k8s client.Client, dataDir string, env map[string]string) {
	t.Helper()
	ctx := context.Background()
	var demo v1alpha1.SftpConnection
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: "demo", Name: "demo"}, &demo))
	root := filepath.Join(dataDir, "sftp", "conformance")
	must(t, os.Mkdir(root, 0o755))
	conn := &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "conformance"}, Spec: *demo.Spec.DeepCopy()}
	conn.Spec.Slug, conn.Spec.RootPath = "conformance", "/conformance"
	must(t, k8s.Create(ctx, conn))
	testkit.EventuallyFound(t, "the conformance connection to the demo server is Ready", func() (bool, string) {
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(conn), conn))
		ready := meta.FindStatusCondition(conn.Status.Conditions, v1alpha1.ConditionReady)
		return ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == conn.Generation,
			fmt.Sprintf("%+v", conn.Status.Conditions)
	})
	// A second key, limited to the table's scoped folder.
	scoped, keyID := apitoken.NewToken()
	must(t, k8s.Create(ctx, &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "conformance-scoped"},
		Spec: v1alpha1.ApiKeySpec{Paths: []string{conformance.ScopedPath}, Token: v1alpha1.TokenSource{SHA256: apitoken.Hash(scoped), KeyID: keyID}}}))
	testkit.EventuallyFound(t, "the gateway takes the scoped key", func() (bool, string) {
		status, _ := testhttp.PostJSON(t, env["GATEWAY_URL"]+"/conformance/stat", scoped, `{"path": "/"}`)
		return status == http.StatusForbidden, fmt.Sprint(status) // known, and limited
	})
	target := conformance.Target{URL: env["GATEWAY_URL"] + "/conformance", Token: env["DEMO_API_KEY"], ScopedToken: scoped,
		Dir: root, UID: -1, GID: -1}
	t.Run("conformance", func(t *testing.T) { conformance.Run(t, target) })
	t.Run("race", func(t *testing.T) { conformance.Race(t, target) })
}

type devProcess struct {
	cmd *exec.Cmd
	env map[string]string
	// printed is what it prints after its welcome, a line at a time.
	printed chan string
}

// start runs sftpgate-dev on free ports and waits for its dev.env.
// tourTransfer makes the tour's Transfer of file, its sink the event
// printer at eventsURL, and waits until its end is printed.
func (d *devProcess) tourTransfer(t *testing.T, k8s client.Client, file, eventsURL string) {
	t.Helper()
	raw, err := os.ReadFile(file)
	must(t, err)
	var tr v1alpha1.Transfer
	must(t, yaml.Unmarshal(raw, &tr))
	tr.Spec.Sink.URI = eventsURL
	must(t, k8s.Create(context.Background(), &tr))
	d.prints(t, fmt.Sprintf("event dev.sftpgate.transfer.succeeded %s (1 file done, 0 skipped)", tr.Name), func() string {
		var got v1alpha1.Transfer
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(&tr), &got)
		return fmt.Sprintf("the transfer's status: %v %+v", err, got.Status)
	})
}

// prints waits until d prints a line with want; state says, if it does
// not, what sftpgate-dev did instead.
func (d *devProcess) prints(t *testing.T, want string, state func() string) {
	t.Helper()
	testkit.EventuallyFound(t, "sftpgate-dev prints "+want, func() (bool, string) {
		for {
			select {
			case line := <-d.printed:
				if strings.Contains(line, want) {
					return true, ""
				}
			default:
				return false, state()
			}
		}
	})
}

// watchStatus says what the demo namespace's watch name did.
func watchStatus(k8s client.Client, name string) func() string {
	return func() string {
		var w v1alpha1.SftpWatch
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "demo", Name: name}, &w)
		return fmt.Sprintf("the watch: %v %+v", err, w.Status)
	}
}

func start(t *testing.T, binary, dataDir string) *devProcess {
	t.Helper()
	cmd := exec.Command(binary, "--data-dir="+dataDir, "--gateway-address="+testhttp.FreeAddr(t),
		"--webui-address="+testhttp.FreeAddr(t), "--sftp-address="+testhttp.FreeAddr(t), "--events-address="+testhttp.FreeAddr(t),
		"--s3-address="+testhttp.FreeAddr(t))
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	cmd.Stderr = os.Stderr
	must(t, cmd.Start())
	d := &devProcess{cmd: cmd, printed: make(chan string, 100)}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// The welcome is printed once everything is ready.
	ready := make(chan struct{})
	go func() {
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			if strings.HasPrefix(lines.Text(), "sftpgate is running") {
				close(ready)
				break
			}
		}
		// Then what it prints as it runs: the demo watch's events.
		for lines.Scan() {
			select {
			case d.printed <- lines.Text():
			default:
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case <-ready:
	case <-time.After(2 * time.Minute):
		t.Fatal("sftpgate-dev did not start")
	}
	raw, err := os.ReadFile(filepath.Join(dataDir, "dev.env"))
	must(t, err)
	d.env = parseEnv(t, string(raw))
	for _, k := range []string{"KUBECONFIG", "GATEWAY_URL", "WEBUI_URL", "OPENAPI_URL", "DEMO_SLUG", "DEMO_API_KEY", "DEMO_EMAIL", "DEMO_PASSWORD"} {
		if d.env[k] == "" {
			t.Errorf("dev.env has no %s", k)
		}
	}
	return d
}

// stop sends SIGTERM, as Ctrl-C would, and checks that no process of
// sftpgate-dev (the control plane's included) is left.
func (d *devProcess) stop(t *testing.T) {
	t.Helper()
	children := procs.Descendants(d.cmd.Process.Pid)
	if len(children) == 0 {
		t.Error("sftpgate-dev runs no control plane processes")
	}
	must(t, d.cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- d.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("sftpgate-dev exited with %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("sftpgate-dev did not stop on SIGTERM")
	}
	for _, pid := range children {
		if procs.Alive(pid) {
			t.Errorf("process %d outlived sftpgate dev", pid)
		}
	}
}

// parseEnv reads dev.env as a shell would: KEY='value' lines.
func parseEnv(t *testing.T, raw string) map[string]string {
	env := map[string]string{}
	for line := range strings.SplitSeq(raw, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		if !strings.HasPrefix(v, "'") || !strings.HasSuffix(v, "'") {
			t.Fatalf("dev.env line %q is not quoted", line)
		}
		env[k] = strings.ReplaceAll(v[1:len(v)-1], `'\''`, "'")
	}
	return env
}

// call runs a command as the README's curl does.
func call(t *testing.T, env map[string]string, command, body, key string) (int, string) {
	t.Helper()
	return callSlug(t, env, env["DEMO_SLUG"], command, body, key)
}

// callSlug posts a command to the connection served under slug.
func callSlug(t *testing.T, env map[string]string, slug, command, body, key string) (int, string) {
	t.Helper()
	return testhttp.PostJSON(t, env["GATEWAY_URL"]+"/"+slug+"/"+command, key, body)
}
