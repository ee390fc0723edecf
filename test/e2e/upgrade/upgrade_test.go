// Package upgrade starts the system from the previous release, built
// from the repository's history, makes state of every kind with it,
// stops it mid-work, and starts the current tree on the same control
// plane: nothing users made may be lost, reported twice, restarted from
// the beginning or broken. docs/operations.md ("Upgrades") says what an
// upgrade keeps.
package upgrade

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/delayproxy"
	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testoidc"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsink"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/hack/fixtures/testwebui"
	"github.com/sftpgate/sftpgate/internal/apitoken"
	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/test/framework"
)

// previous is the release upgraded from: the last commit of the round
// before this one (watch states of version 3, the old team index, audit
// records without trace ids, one membership Lease per kind).
const previous = "bbf7ed933060bcd8b6b28cd239b0aadc5976f8ab"

var must = testkit.Must

// Sizes: the cut transfer's file takes bigFile/linkRate seconds over the
// slow link, long enough to be cut in its middle.
const (
	bigFile    = 24 << 20
	linkRate   = 2 << 20
	uploadSize = 1 << 20
)

// rig is the system, the servers, and the tenant's namespace.
type rig struct {
	t       *testing.T
	sys     *framework.System
	sshd    *testsshd.Server
	link    *delayproxy.Proxy
	events  *testsink.Sink
	audits  *testsink.Sink
	ns      string
	root    string // the tenant's folder on the server, on disk
	token   string
	slug    string
	request int // request ids sent
	sent    []string
	// upgraded is when the upgrade began.
	upgraded time.Time
}

// TestUpgrade: watches with seen files and an event pending, a transfer
// cut mid-file, an upload half sent, audit chains, a share link, web UI
// accounts, a team and sessions, made by the previous release, all hold
// after the upgrade.
func TestUpgrade(t *testing.T) {
	testcluster.LogErrors()
	release, err := framework.BuildRelease(previous)
	must(t, err)
	r := &rig{t: t, sshd: testsshd.Start(t), events: testsink.Start(t), audits: testsink.Start(t)}
	r.sys = framework.New(t, framework.Options{Release: &release, WebUI: true, Gateways: 1, Workers: 1})
	r.link, err = delayproxy.Start(delayproxy.Options{Target: net.JoinHostPort(r.sshd.Host, strconv.Itoa(int(r.sshd.Port))), BytesPerSecond: linkRate})
	must(t, err)
	t.Cleanup(func() { _ = r.link.Close() })
	r.tenant()

	w := r.watchBefore()
	up := r.uploadBefore()
	share := r.shareBefore()
	people := r.accountsBefore()
	r.writes("before")
	cut := r.transferBefore() // last: it is cut by the upgrade

	w.taken = r.count()
	r.upgraded = time.Now()
	must(t, r.sys.Upgrade(t.Context()))

	r.transferAfter(cut)
	r.watchAfter(w)
	r.uploadAfter(up)
	r.shareAfter(share)
	r.accountsAfter(people)
	r.writes("after")
	r.auditAfter()
}

// tenant makes the namespace: a connection straight to the server and
// one over the slow link, both to the tenant's folder, an API key, and
// an AuditSink.
func (r *rig) tenant() {
	t, k8s, ctx := r.t, r.sys.Client, r.t.Context()
	r.ns = testkit.Namespace(t, k8s, "upgrade-")
	r.root = filepath.Join(r.sshd.Dir, "tenant")
	for _, d := range []string{"", "in", "big", "copied", "upload", "shared"} {
		r.mkdir(d)
	}
	login := r.sshd.Login()
	login.Root = filepath.Join(login.Root, "tenant")
	testkit.ReadyConnection(t, k8s, r.ns, "near", login)
	slow := login
	host, port, err := net.SplitHostPort(r.link.Addr)
	must(t, err)
	p, err := strconv.Atoi(port)
	must(t, err)
	slow.Host, slow.Port = host, int32(p)
	testkit.ReadyConnection(t, k8s, r.ns, "slow", slow)
	r.slug = "near-" + r.ns
	var keyID string
	r.token, keyID = apitoken.NewToken()
	must(t, k8s.Create(ctx, &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "key"},
		Spec: v1alpha1.ApiKeySpec{Token: v1alpha1.TokenSource{SHA256: apitoken.Hash(r.token), KeyID: keyID}}}))
	must(t, k8s.Create(ctx, &v1alpha1.AuditSink{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: v1alpha1.AuditSinkName},
		Spec: v1alpha1.AuditSinkSpec{Sink: v1alpha1.Destination{URI: r.audits.URL}}}))
	testkit.EventuallyFound(t, "the gateway serves the connection", func() (bool, string) {
		status, body := r.call("exists", `{"path": "in"}`)
		return status == http.StatusOK && strings.Contains(body, `"exists":true`), fmt.Sprintf("%d %s", status, body)
	})
}

func (r *rig) mkdir(dir string) {
	p := filepath.Join(r.root, dir)
	must(r.t, os.MkdirAll(p, 0o755))
	must(r.t, os.Chown(p, r.sshd.UID, r.sshd.GID))
}

// put writes a file on the server, as a partner's upload does.
func (r *rig) put(name string, content []byte) {
	p := filepath.Join(r.root, name)
	must(r.t, os.WriteFile(p, content, 0o644))
	must(r.t, os.Chown(p, r.sshd.UID, r.sshd.GID))
}

// call sends a gateway command with the tenant's key, a request id of
// its own kept in sent, through the gateway's first replica.
func (r *rig) call(command, body string) (int, string) {
	r.request++
	id := fmt.Sprintf("upgrade-%d", r.request)
	req, err := http.NewRequest(http.MethodPost, r.sys.Gateways[0].URL+"/"+r.slug+"/"+command, strings.NewReader(body))
	must(r.t, err)
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("X-Request-Id", id)
	status, _, raw := do(r.t, req)
	if status == http.StatusOK {
		r.sent = append(r.sent, id)
	}
	return status, string(raw)
}

func do(t *testing.T, req *http.Request) (int, http.Header, []byte) {
	t.Helper()
	c := &http.Client{Timeout: time.Minute}
	resp, err := c.Do(req)
	must(t, err)
	defer func() { _ = resp.Body.Close() }()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	must(t, err)
	return resp.StatusCode, resp.Header, b.Bytes()
}

// writes writes a few files through the gateway: records of the
// replica's audit chain.
func (r *rig) writes(when string) {
	for i := range 3 {
		status, body := r.call("write", fmt.Sprintf(`{"path": "written-%s-%d.txt", "file": {"text": "%s"}}`, when, i, when))
		if status != http.StatusOK || strings.Contains(body, `"error"`) {
			r.t.Fatalf("a write %s the upgrade: %d %s", when, status, body)
		}
	}
}

// watched is the watch's state before the upgrade: the event id of each
// file reported, and the pending one's; and the events taken of each,
// counted just before the upgrade.
type watched struct {
	ids     map[string]string // by path
	pending string            // the path whose event the sink refused
	taken   map[string]int
}

// count counts the events the sink took, by subject.
func (r *rig) count() map[string]int {
	n := map[string]int{}
	for _, req := range r.events.Taken() {
		n[req.Event.Subject()]++
	}
	return n
}

// watchBefore watches in/ and has two files reported, then a third whose
// event the sink refuses: it stays pending in the watch's state.
func (r *rig) watchBefore() watched {
	t, k8s := r.t, r.sys.Client
	w := &v1alpha1.SftpWatch{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "inbox"}, Spec: v1alpha1.SftpWatchSpec{
		ConnectionRef: v1alpha1.ConnectionReference{Name: "near"}, Path: "/in", PollInterval: &metav1.Duration{Duration: 5 * time.Second},
		Sink: &v1alpha1.Destination{URI: r.events.URL}, Delivery: v1alpha1.DeliverySpec{BackoffDelay: "PT0.5S"}}}
	must(t, k8s.Create(t.Context(), w))
	testkit.Eventually(t, "the watch's first poll", func() bool {
		must(t, k8s.Get(t.Context(), client.ObjectKeyFromObject(w), w))
		return w.Status.LastPollTime != nil
	})
	r.put("in/seen-1.csv", []byte("one"))
	r.put("in/seen-2.csv", []byte("two"))
	seen := watched{ids: map[string]string{}, pending: "/in/pending.csv"}
	testkit.EventuallyFound(t, "the seen files' events", func() (bool, string) {
		for _, req := range r.events.Taken() {
			seen.ids[req.Event.Subject()] = req.Event.ID()
		}
		return seen.ids["/in/seen-1.csv"] != "" && seen.ids["/in/seen-2.csv"] != "", fmt.Sprint(seen.ids)
	})
	r.events.SetAnswer(http.StatusServiceUnavailable)
	r.put("in/pending.csv", []byte("three"))
	testkit.EventuallyFound(t, "the pending file's event refused", func() (bool, string) {
		for _, req := range r.events.Requests() {
			if req.Event.Subject() == seen.pending {
				seen.ids[seen.pending] = req.Event.ID()
				return true, ""
			}
		}
		return false, fmt.Sprint(len(r.events.Requests()), " requests")
	})
	return seen
}

// watchAfter: the pending event arrives with its id, the seen files are
// not reported again (a watch that lost its state would send their
// events again, with the same ids: they are counted), and a new file is
// reported once.
func (r *rig) watchAfter(before watched) {
	t := r.t
	r.events.SetAnswer(0)
	r.put("in/after.csv", []byte("four"))
	testkit.EventuallyFound(t, "the pending event and the new file's", func() (bool, string) {
		got := map[string]bool{}
		for _, req := range r.events.Taken() {
			got[req.Event.Subject()] = true
		}
		return got[before.pending] && got["/in/after.csv"], fmt.Sprint(got)
	})
	ids := map[string]map[string]bool{}
	for _, req := range r.events.Taken() {
		subject := req.Event.Subject()
		if ids[subject] == nil {
			ids[subject] = map[string]bool{}
		}
		ids[subject][req.Event.ID()] = true
		if was := before.ids[subject]; was != "" && req.Event.ID() != was {
			t.Errorf("%s reported again after the upgrade with the id %s (was %s)", subject, req.Event.ID(), was)
		}
	}
	for subject, set := range ids {
		if len(set) != 1 {
			t.Errorf("%s reported under %d ids", subject, len(set))
		}
	}
	after := r.count()
	for subject, n := range before.taken {
		if after[subject] != n {
			t.Errorf("%s, delivered %d times before the upgrade, %d times in all", subject, n, after[subject])
		}
	}
}

// cutTransfer is the transfer the upgrade cut, and its source.
type cutTransfer struct {
	name    string
	content []byte
}

// transferBefore starts a transfer of a large file over the slow link
// and returns once part of it has crossed: the upgrade cuts it.
func (r *rig) transferBefore() cutTransfer {
	t := r.t
	c := cutTransfer{name: "big", content: make([]byte, bigFile)}
	_, _ = rand.Read(c.content)
	r.put("big/data.bin", c.content)
	sentBefore := r.link.Sent()
	must(t, r.sys.Client.Create(t.Context(), &v1alpha1.Transfer{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: c.name},
		Spec: v1alpha1.TransferSpec{
			Source: v1alpha1.TransferSource{ConnectionRef: v1alpha1.ConnectionReference{Name: "near"}, Path: "/big"},
			TransferOptions: v1alpha1.TransferOptions{
				Destination: v1alpha1.TransferDestination{ConnectionRef: v1alpha1.ConnectionReference{Name: "slow"}, Path: "/copied"},
				Verify:      v1alpha1.VerifySHA256}}}))
	testkit.EventuallyFound(t, "a third of the file over the slow link", func() (bool, string) {
		sent := r.link.Sent() - sentBefore
		return sent > bigFile/3, fmt.Sprint(sent, " bytes")
	})
	return c
}

// transferAfter: the transfer ends with the whole file, the current
// worker having written less than all of it: it resumed.
func (r *rig) transferAfter(c cutTransfer) {
	t, k8s := r.t, r.sys.Client
	tr := &v1alpha1.Transfer{}
	testkit.EventuallyFound(t, "the cut transfer ends", func() (bool, string) {
		must(t, k8s.Get(t.Context(), client.ObjectKey{Namespace: r.ns, Name: c.name}, tr))
		return tr.Status.CompletionTime != nil, tr.Status.Progress
	})
	if ready := meta.FindStatusCondition(tr.Status.Conditions, v1alpha1.ConditionReady); ready == nil || ready.Reason != v1alpha1.ReasonSucceeded {
		t.Errorf("the cut transfer failed: %+v", tr.Status.Conditions)
	}
	got, err := os.ReadFile(filepath.Join(r.root, "copied", "data.bin"))
	must(t, err)
	if !bytes.Equal(got, c.content) {
		t.Errorf("the transferred file differs: %d bytes of %d", len(got), len(c.content))
	}
	written, err := r.sys.Workers[0].Metric(t.Context(), "sftpgate_worker_transfer_bytes_total")
	must(t, err)
	if written <= 0 || written >= bigFile {
		t.Errorf("the upgraded worker wrote %v bytes of the %d: the transfer began again, or was not cut", written, bigFile)
	}
	t.Logf("the upgraded worker wrote %.0f of the file's %d bytes", written, bigFile)
}

// upload is a resumable upload half sent.
type upload struct {
	location string
	content  []byte
}

// uploadBefore begins a resumable upload and sends its first half.
func (r *rig) uploadBefore() upload {
	t := r.t
	u := upload{content: make([]byte, uploadSize)}
	_, _ = rand.Read(u.content)
	status, h, raw := r.tus(http.MethodPost, r.sys.Gateways[0].URL+"/"+r.slug+"/uploads/", nil,
		"Upload-Length", strconv.Itoa(uploadSize), "Upload-Metadata", "path "+base64.StdEncoding.EncodeToString([]byte("upload/part.bin")))
	if status != http.StatusCreated {
		t.Fatalf("beginning an upload: %d %s", status, raw)
	}
	loc, err := url.Parse(h.Get("Location"))
	must(t, err)
	u.location = loc.Path
	if status, _, raw := r.tus(http.MethodPatch, r.sys.Gateways[0].URL+u.location, u.content[:uploadSize/2],
		"Upload-Offset", "0", "Content-Type", "application/offset+octet-stream"); status != http.StatusNoContent {
		t.Fatalf("the upload's first half: %d %s", status, raw)
	}
	return u
}

// uploadAfter: the upload is where it was, and takes its second half.
func (r *rig) uploadAfter(u upload) {
	t := r.t
	at := r.sys.Gateways[0].URL + u.location
	status, h, raw := r.tus(http.MethodHead, at, nil)
	if status != http.StatusOK || h.Get("Upload-Offset") != strconv.Itoa(uploadSize/2) {
		t.Fatalf("the upload after the upgrade: %d, offset %q: %s", status, h.Get("Upload-Offset"), raw)
	}
	if status, _, raw := r.tus(http.MethodPatch, at, u.content[uploadSize/2:],
		"Upload-Offset", strconv.Itoa(uploadSize/2), "Content-Type", "application/offset+octet-stream"); status != http.StatusNoContent {
		t.Fatalf("the upload's second half: %d %s", status, raw)
	}
	got, err := os.ReadFile(filepath.Join(r.root, "upload", "part.bin"))
	must(t, err)
	if !bytes.Equal(got, u.content) {
		t.Errorf("the uploaded file differs: %d bytes of %d", len(got), len(u.content))
	}
}

func (r *rig) tus(method, at string, body []byte, header ...string) (int, http.Header, []byte) {
	req, err := http.NewRequest(method, at, bytes.NewReader(body))
	must(r.t, err)
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("Tus-Resumable", "1.0.0")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return do(r.t, req)
}

// shared is a share link's file and its URL at the web UI.
type shared struct {
	url     string
	content []byte
}

// shareBefore shares shared/ with a link made as kubectl makes one, and
// waits until the web UI serves it.
func (r *rig) shareBefore() shared {
	t := r.t
	s := shared{content: []byte("the quarter's report\n")}
	r.put("shared/report.txt", s.content)
	token := v1alpha1.NewShareToken(r.ns, "reports")
	must(t, r.sys.Client.Create(t.Context(), &v1alpha1.ShareLink{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "reports"},
		Spec: v1alpha1.ShareLinkSpec{Connection: "near", Path: "/shared", Mode: v1alpha1.ShareDownload, TokenSHA256: apitoken.Hash(token)}}))
	s.url = r.sys.WebUI.URL + "/s/" + token + "?download=1&path=/report.txt"
	testkit.EventuallyFound(t, "the web UI serves the share link", func() (bool, string) {
		status, body := get(t, s.url)
		return status == http.StatusOK && bytes.Equal(body, s.content), fmt.Sprintf("%d %.200s", status, body)
	})
	return s
}

// shareAfter: the link's first use after the upgrade is served.
func (r *rig) shareAfter(s shared) {
	if status, body := get(r.t, s.url); status != http.StatusOK || !bytes.Equal(body, s.content) {
		r.t.Errorf("the share link after the upgrade: %d %.300s", status, body)
	}
}

func get(t *testing.T, u string) (int, []byte) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	must(t, err)
	status, _, body := do(t, req)
	return status, body
}

// people are two web UI accounts, signed in: the owner with a password,
// the member through an OpenID provider at a web UI of its own, whom the
// owner made an editor of its team.
type people struct {
	owner, member *testwebui.Client
	password      string // the member's, at the provider
}

func (r *rig) accountsBefore() people {
	t := r.t
	p := people{owner: testwebui.New(t, r.sys.WebUI.URL), password: "the member's password"}
	p.owner.SignUp(t)
	email := testwebui.NewEmail(t)
	provider := testwebui.StartProvider(t, testoidc.User{Email: email, Password: p.password})
	sso, err := r.sys.Add(t.Context(), "webui", testwebui.OIDCFlags(provider, time.Hour)...)
	must(t, err)
	p.member = testwebui.New(t, sso.URL)
	p.member.Email = email
	if status, body := p.member.SignInAtProvider(t, p.password); status != http.StatusOK {
		t.Fatalf("the member signing in: %d %.300s", status, body)
	}
	status, body := p.owner.Form(t, "/members", url.Values{"kind": {"person"}, "name": {email}, "role": {"editor"}})
	if status != http.StatusOK || !strings.Contains(body, email) {
		t.Fatalf("adding the member: %d %s", status, body)
	}
	if status, body := p.member.Get(t, "/teams"); status != http.StatusOK || !strings.Contains(body, p.owner.Email) {
		t.Fatalf("the member's teams: %d %.3000s", status, body)
	}
	return p
}

// accountsAfter: both stay signed in, the member still sees the owner's
// team, and the owner signs in again with the password.
func (r *rig) accountsAfter(p people) {
	t := r.t
	for _, c := range []*testwebui.Client{p.owner, p.member} {
		if status, body := c.Get(t, "/connections"); status != http.StatusOK || !strings.Contains(body, c.Email) {
			t.Errorf("%s's session after the upgrade: %d %.300s", c.Email, status, body)
		}
	}
	if status, body := p.member.Get(t, "/teams"); status != http.StatusOK || !strings.Contains(body, p.owner.Email) {
		t.Errorf("the member's teams after the upgrade: %d %.3000s", status, body)
	}
	again := testwebui.New(t, r.sys.WebUI.URL)
	again.Email = p.owner.Email
	if status, body := again.Form(t, "/login", url.Values{"email": {again.Email}, "password": {testwebui.Password}}); status != http.StatusOK ||
		!strings.Contains(body, again.Email) {
		t.Errorf("the owner signing in after the upgrade: %d %.300s", status, body)
	}
}

// auditAfter: every request the gateway answered, before and after, has
// its record at the tenant's sink, and every chain verifies, the
// previous release's closed by its graceful stop.
func (r *rig) auditAfter() {
	t := r.t
	var records []audit.Record
	testkit.EventuallyFound(t, "every answered request's record at the sink", func() (bool, string) {
		records = r.audits.AuditRecords(t)
		ids := map[string]bool{}
		for _, rec := range records {
			ids[rec.RequestID] = true
		}
		var missing []string
		for _, id := range r.sent {
			if !ids[id] {
				missing = append(missing, id)
			}
		}
		return len(missing) == 0, fmt.Sprint("missing ", missing)
	})
	// The previous release's chains: those of replicas with records from
	// before the upgrade.
	old := map[string]bool{}
	for _, rec := range records {
		if rec.Time.Before(r.upgraded) {
			old[rec.Replica] = true
		}
	}
	reports := audit.Verify(records)
	closed := 0
	for _, rep := range reports {
		if len(rep.Broken) > 0 || len(rep.Missing) > 0 {
			t.Errorf("the chain of %s %s: missing %v, changed %v", rep.Namespace, rep.Replica, rep.Missing, rep.Broken)
		}
		if rep.Closed {
			closed++
		} else if old[rep.Replica] {
			t.Errorf("the chain of %s %s, of the previous release, is not closed: its replica stopped gracefully", rep.Namespace, rep.Replica)
		}
	}
	if len(old) == 0 || len(old) == len(reports) {
		t.Errorf("%d chains, %d of the previous release: want chains of both releases", len(reports), len(old))
	}
	t.Logf("%d records in %d chains, %d of the previous release, %d closed", len(records), len(reports), len(old), closed)
}
