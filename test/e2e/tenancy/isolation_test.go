package tenancy

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/conformance"
	"github.com/sftpgate/sftpgate/hack/fixtures/testftpd"
	"github.com/sftpgate/sftpgate/hack/fixtures/testhttp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/tests3"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsink"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/hack/fixtures/testwebui"
	"github.com/sftpgate/sftpgate/internal/apitoken"
	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/storedbytes"
	"github.com/sftpgate/sftpgate/internal/tempname"
	"github.com/sftpgate/sftpgate/internal/uploadrecord"
	"github.com/sftpgate/sftpgate/test/framework"
)

// tenant is one of two who do not trust each other: a web UI account,
// whose namespace also holds what its owner made with kubectl (a
// connection "reports" to the tenant's own sshd, served under slug, and a
// key given by hash, as in Git).
type tenant struct {
	ui     *testwebui.Client
	ns     string
	sshd   *testsshd.Server
	uiConn string // the connection made in the web UI
	uiKey  string // and the key made there for it
	slug   string
	token  string
}

func newTenant(t *testing.T, name string) *tenant {
	t.Helper()
	ctx := context.Background()
	tn := &tenant{ui: newClient(t), sshd: testsshd.Start(t), token: mustToken()}
	tn.ui.SignUp(t)
	suffix := strings.ToLower(strings.TrimSuffix(strings.SplitN(tn.ui.Email, "@", 2)[0], "-"))
	suffix = suffix[len(suffix)-6:]
	tn.uiConn, tn.slug = name+"-home-"+suffix, name+"-reports-"+suffix
	status, _ := tn.ui.Form(t, "/connections", url.Values{"name": {tn.uiConn}, "host": {tn.sshd.Host}, "port": {fmt.Sprint(tn.sshd.Port)},
		"username": {testsshd.User}, "auth": {"password"}, "password": {tn.sshd.Password}, "trust": {"pinned"}, "hostKey": {tn.sshd.HostKeyLine},
		"rootPath": {tn.sshd.Dir}})
	if status != http.StatusOK {
		t.Fatalf("%s adds a connection: %d", name, status)
	}
	var conns v1alpha1.SftpConnectionList
	must(t, k8s.List(ctx, &conns))
	for _, c := range conns.Items {
		if c.Name == tn.uiConn {
			tn.ns = c.Namespace
		}
	}
	if tn.ns == "" {
		t.Fatalf("no namespace holds %s's connection", name)
	}
	// Its files are reached once its test passed (a share link is made
	// only to a file or folder that is there).
	testkit.Eventually(t, name+"'s connection is Ready", func() bool {
		var c v1alpha1.SftpConnection
		must(t, k8s.Get(ctx, client.ObjectKey{Namespace: tn.ns, Name: tn.uiConn}, &c))
		return meta.IsStatusConditionTrue(c.Status.Conditions, v1alpha1.ConditionReady)
	})
	if status, _ := tn.ui.Form(t, "/keys", url.Values{"connection": {tn.uiConn}, "expires": {"30d"}}); status != http.StatusOK {
		t.Fatalf("%s makes a key: %d", name, status)
	}
	var keys v1alpha1.ApiKeyList
	must(t, k8s.List(ctx, &keys, client.InNamespace(tn.ns)))
	for _, k := range keys.Items {
		if slices.Equal(k.Spec.Connections, []string{tn.uiConn}) {
			tn.uiKey = k.Name
		}
	}
	// What the tenant's owner applies with kubectl, in its own namespace.
	must(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: "reports-creds"},
		StringData: map[string]string{v1alpha1.SecretKeyPassword: tn.sshd.Password}}))
	tn.createReports(t, "reports")
	must(t, k8s.Create(ctx, &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: "ci"},
		Spec: v1alpha1.ApiKeySpec{Token: v1alpha1.TokenSource{SHA256: apitoken.Hash(tn.token)}}}))
	tn.writes(t, "setup")
	return tn
}

// tusAnswer is the status and headers of an answer to a tus request.
type tusAnswer struct {
	status int
	header http.Header
}

// tusAs sends a tus request with token and body (none when empty);
// headers are name, value pairs.
func tusAs(t *testing.T, method, url, token, body string, headers ...string) tusAnswer {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	status, header, _, err := testhttp.Tus(http.DefaultClient, method, url, token, r, headers...)
	must(t, err)
	return tusAnswer{status: status, header: header}
}

func mustToken() string {
	token, _ := apitoken.NewToken()
	return token
}

// createReports makes the tenant's kubectl connection, named name, serving
// the tenant's slug.
func (tn *tenant) createReports(t *testing.T, name string) {
	t.Helper()
	must(t, k8s.Create(context.Background(), &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: name},
		Spec: v1alpha1.SftpConnectionSpec{Host: tn.sshd.Host, Port: tn.sshd.Port, Username: testsshd.User, RootPath: tn.sshd.Dir, Slug: tn.slug,
			Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.LocalSecretReference{Name: "reports-creds"}},
			HostKey:     v1alpha1.HostKeyTrust{Trusted: []string{tn.sshd.HostKeyLine}}}}))
}

// writes writes a file named after what through the tenant's slug with its
// token, as its CI does, and checks it landed on the tenant's own server.
func (tn *tenant) writes(t *testing.T, what string) {
	t.Helper()
	tn.writesThrough(t, gatewayURL, what)
}

// writesThrough is writes through the gateway at base.
func (tn *tenant) writesThrough(t *testing.T, base, what string) {
	t.Helper()
	name := "from-" + tn.ns + "-" + what
	testkit.EventuallyFound(t, tn.ns+"'s write through its own slug", func() (bool, string) {
		status, body := testhttp.PostJSON(t, base+"/"+tn.slug+"/write", tn.token, fmt.Sprintf(`{"path": %q, "file": {"text": "x"}}`, name))
		return status == http.StatusOK && !strings.Contains(body, `"error"`), fmt.Sprintf("%d %s", status, body)
	})
	if _, err := os.Stat(filepath.Join(tn.sshd.Dir, name)); err != nil {
		t.Fatalf("%s's write is not on its server: %v", tn.ns, err)
	}
}

// refusedReason waits until obj's Ready condition is False with reason.
func refusedReason(t *testing.T, obj interface {
	client.Object
	GetConditions() *[]metav1.Condition
}, reason string) *metav1.Condition {
	t.Helper()
	var ready *metav1.Condition
	testkit.EventuallyFound(t, obj.GetName()+"'s Ready is False with "+reason, func() (bool, string) {
		must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
		ready = meta.FindStatusCondition(*obj.GetConditions(), v1alpha1.ConditionReady)
		return ready != nil && ready.ObservedGeneration == obj.GetGeneration() && ready.Status == metav1.ConditionFalse && ready.Reason == reason,
			fmt.Sprintf("%+v", ready)
	})
	return ready
}

// watch makes an SftpWatch of the tenant's kubectl connection, polled every
// 5 seconds, reporting files as soon as a second poll sees them, deleted
// when the test ends.
func (tn *tenant) watch(t *testing.T, name, path string, sink v1alpha1.Destination, mutate ...func(*v1alpha1.SftpWatchSpec)) *v1alpha1.SftpWatch {
	t.Helper()
	w := &v1alpha1.SftpWatch{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: name}, Spec: v1alpha1.SftpWatchSpec{
		ConnectionRef: v1alpha1.ConnectionReference{Name: "reports"}, Path: path, Sink: &sink,
		PollInterval: &metav1.Duration{Duration: 5 * time.Second}, Stability: v1alpha1.Stability{MinAge: &metav1.Duration{}}}}
	for _, m := range mutate {
		m(&w.Spec)
	}
	must(t, k8s.Create(context.Background(), w))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), w) })
	return w
}

// expectation makes a FileExpectation of any file in the root of the
// tenant's kubectl connection, a window a minute, without a sink.
func (tn *tenant) expectation(t *testing.T, name string, mutate ...func(*v1alpha1.FileExpectationSpec)) *v1alpha1.FileExpectation {
	t.Helper()
	e := &v1alpha1.FileExpectation{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: name}, Spec: v1alpha1.FileExpectationSpec{
		ConnectionRef: v1alpha1.ConnectionReference{Name: "reports"}, Path: "/", Files: v1alpha1.ExpectedFiles{Include: []string{"*"}},
		Schedule:     v1alpha1.ExpectationSchedule{Opens: "* * * * *", Deadline: metav1.Duration{Duration: time.Minute}},
		PollInterval: &metav1.Duration{Duration: 10 * time.Second}, Stability: v1alpha1.Stability{MinAge: &metav1.Duration{}}}}
	for _, m := range mutate {
		m(&e.Spec)
	}
	must(t, k8s.Create(context.Background(), e))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), e) })
	return e
}

// watchedFolder makes the folder name on the tenant's server, as its user.
func (tn *tenant) watchedFolder(t *testing.T, name string) {
	t.Helper()
	dir := filepath.Join(tn.sshd.Dir, name)
	must(t, os.MkdirAll(dir, 0o755))
	must(t, os.Chown(dir, tn.sshd.UID, tn.sshd.GID))
}

// tarpitConnection makes a connection of the tenant's, named name, to
// tarpit, and waits until it passed its test (which the tarpit answers).
func (tn *tenant) tarpitConnection(t *testing.T, tarpit *testsftp.Server, name string) *v1alpha1.SftpConnection {
	t.Helper()
	ctx := context.Background()
	must(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: name + "-creds"},
		StringData: map[string]string{v1alpha1.SecretKeyPassword: tarpit.Password}}))
	conn := &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: name},
		Spec: v1alpha1.SftpConnectionSpec{Host: tarpit.Host, Port: tarpit.Port, Username: tarpit.User,
			Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.LocalSecretReference{Name: name + "-creds"}},
			HostKey:     v1alpha1.HostKeyTrust{Trusted: []string{tarpit.HostKeyLine()}},
			Limits:      v1alpha1.Limits{OperationTimeout: &metav1.Duration{Duration: time.Hour}}}}
	must(t, k8s.Create(ctx, conn))
	t.Cleanup(func() { _ = k8s.Delete(ctx, conn) })
	testkit.EventuallyFound(t, "the tarpit connection is Ready", func() (bool, string) {
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(conn), conn))
		return meta.IsStatusConditionTrue(conn.Status.Conditions, v1alpha1.ConditionReady), fmt.Sprintf("%+v", conn.Status.Conditions)
	})
	return conn
}

// transfer makes a Transfer of the tenant's from one connection's path to
// another's folder, deleted when the test ends.
func (tn *tenant) transfer(t *testing.T, name, from, path, to, folder string, mutate ...func(*v1alpha1.TransferSpec)) *v1alpha1.Transfer {
	t.Helper()
	tr := &v1alpha1.Transfer{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: name}, Spec: v1alpha1.TransferSpec{
		Source: v1alpha1.TransferSource{ConnectionRef: v1alpha1.ConnectionReference{Name: from}, Path: path},
		TransferOptions: v1alpha1.TransferOptions{
			Destination: v1alpha1.TransferDestination{ConnectionRef: v1alpha1.ConnectionReference{Name: to}, Path: folder}}}}
	for _, m := range mutate {
		m(&tr.Spec)
	}
	must(t, k8s.Create(context.Background(), tr))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), tr) })
	return tr
}

// madeTransfer waits for w's first Transfer (its spec.transfer) and
// returns it, to be read.
func madeTransfer(t *testing.T, w *v1alpha1.SftpWatch) *v1alpha1.Transfer {
	t.Helper()
	var got v1alpha1.SftpWatch
	testkit.EventuallyFound(t, "the watch makes a Transfer", func() (bool, string) {
		must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(w), &got))
		return got.Status.Transfers.Last != "", fmt.Sprintf("%+v", got.Status)
	})
	return &v1alpha1.Transfer{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: got.Status.Transfers.Last}}
}

// TestIsolation runs two tenants side by side and tries every way one has
// to reach, starve or impersonate the other. Every row is refused, and
// nothing of the attacker's lands on the victim's server, nor the
// victim's on the attacker's. A feature that opens a new way across adds
// its row here.
func TestIsolation(t *testing.T) {
	t.Parallel()
	victim, attacker := newTenant(t, "victim"), newTenant(t, "attacker")
	// An attacker's second account, whose state budget it fills.
	hoarder := newTenant(t, "hoarder")
	ctx := context.Background()
	// The rows that take a whole gateway replica's memory or CPU take a
	// replica of their own (with the same flags), which the victim's
	// writes go through too: not the one the web UI calls, which the
	// package's other tests use meanwhile.
	ownGateway, err := sys.Add(ctx, "gateway")
	must(t, err)
	t.Cleanup(func() { _ = ownGateway.Stop() })
	// The victim watches its /arrivals; each row that could hold the
	// worker back checks that a file the victim drops is still reported.
	// Each tenant's audit records go to an AuditSink made before any row
	// runs, so that its receiver gets every record from the first: the
	// attacker's at first at the cluster's Service range, where the
	// victim's receiver would be (its row checks the refusal).
	victimAudit, attackerAudit := testsink.Start(t), testsink.Start(t)
	must(t, k8s.Create(ctx, &v1alpha1.AuditSink{ObjectMeta: metav1.ObjectMeta{Namespace: victim.ns, Name: v1alpha1.AuditSinkName},
		Spec: v1alpha1.AuditSinkSpec{Sink: v1alpha1.Destination{URI: victimAudit.URL}}}))
	attackersAuditSink := &v1alpha1.AuditSink{ObjectMeta: metav1.ObjectMeta{Namespace: attacker.ns, Name: v1alpha1.AuditSinkName},
		Spec: v1alpha1.AuditSinkSpec{Sink: v1alpha1.Destination{URI: "http://10.96.0.10/"}}}
	must(t, k8s.Create(ctx, attackersAuditSink))
	// The attacker's expectation whose outcomes go to a private address:
	// made before the rows, so that a window (one a minute) is decided,
	// and its delivery refused, by the time its row looks.
	privateSink := attacker.expectation(t, "inside", func(s *v1alpha1.FileExpectationSpec) {
		s.Sink = &v1alpha1.Destination{URI: "http://10.255.255.1/hook"}
	})
	victimSink := testsink.Start(t)
	victim.watchedFolder(t, "arrivals")
	arrivalsWatch := victim.watch(t, "arrivals", "/arrivals", v1alpha1.Destination{URI: victimSink.URL})
	// Its first poll takes the folder as it is (a snapshot), reporting
	// nothing: a file a row drops before it would never be reported.
	testkit.Eventually(t, "the victim's watch polls a first time", func() bool {
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(arrivalsWatch), arrivalsWatch))
		return arrivalsWatch.Status.LastPollTime != nil
	})
	arrivals := 0
	victimEventArrives := func(t *testing.T, while string) {
		t.Helper()
		arrivals++
		name := fmt.Sprintf("file-%d.csv", arrivals)
		must(t, os.WriteFile(filepath.Join(victim.sshd.Dir, "arrivals", name), []byte(while), 0o644))
		testkit.EventuallyFound(t, "the victim's file is reported "+while, func() (bool, string) {
			subjects := victimSink.Subjects()
			if slices.Contains(subjects, "dev.sftpgate.file.created /arrivals/"+name) {
				return true, ""
			}
			var w v1alpha1.SftpWatch
			_ = k8s.Get(ctx, client.ObjectKey{Namespace: victim.ns, Name: "arrivals"}, &w)
			return false, fmt.Sprintf("%v; the watch's status: %+v", subjects, w.Status)
		})
	}
	rows := []struct {
		name   string
		attack func(t *testing.T)
	}{
		{"the victim's connection and Service, named in the attacker's watch", func(t *testing.T) {
			must(t, k8s.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: victim.ns, Name: "events"},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}))
			peek := attacker.watch(t, "peek", "/arrivals", v1alpha1.Destination{URI: "http://127.0.0.1:9"}, func(s *v1alpha1.SftpWatchSpec) {
				s.ConnectionRef.Name = victim.uiConn
			})
			if ready := refusedReason(t, peek, v1alpha1.ReasonConnectionNotReady); strings.Contains(ready.Message, victim.ns) {
				t.Errorf("the refusal names the victim's namespace: %q", ready.Message)
			}
			attacker.watchedFolder(t, "arrivals")
			steal := attacker.watch(t, "steal", "/arrivals", v1alpha1.Destination{
				Ref: &v1alpha1.KReference{APIVersion: "v1", Kind: "Service", Name: "events"}})
			refusedReason(t, steal, v1alpha1.ReasonSinkNotFound)
			victimEventArrives(t, "while the attacker's watches name its connection and Service")
		}},
		{"the cluster's metadata endpoint as the attacker's sink", func(t *testing.T) {
			// Its own files, reported at once, so that there is an event to send.
			w := attacker.watch(t, "metadata", "/", v1alpha1.Destination{URI: "http://169.254.169.254/latest/meta-data/"}, func(s *v1alpha1.SftpWatchSpec) {
				s.InitialState = v1alpha1.InitialEmitExisting
			})
			refusedReason(t, w, v1alpha1.ReasonSinkNotAllowed)
			if !meta.IsStatusConditionTrue(w.Status.Conditions, v1alpha1.ConditionStalled) {
				t.Errorf("a sink the policy refuses is not Stalled: %+v", w.Status.Conditions)
			}
			if w.Status.Delivered != 0 {
				t.Errorf("%d events delivered to the metadata endpoint", w.Status.Delivered)
			}
		}},
		{"the cluster's private addresses as the attacker's SFTP host and sink", func(t *testing.T) {
			// Refused at the dial, before any packet leaves: an account's
			// connections and sinks keep out of private ranges.
			conn := &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: attacker.ns, Name: "inside"},
				Spec: v1alpha1.SftpConnectionSpec{Host: "10.255.255.1", Port: 22, Username: testsshd.User,
					Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.LocalSecretReference{Name: "reports-creds"}}}}
			must(t, k8s.Create(ctx, conn))
			t.Cleanup(func() { _ = k8s.Delete(ctx, conn) })
			refusedReason(t, conn, v1alpha1.ReasonDestinationNotAllowed)
			w := attacker.watch(t, "inside", "/", v1alpha1.Destination{URI: "http://10.255.255.1/hook"}, func(s *v1alpha1.SftpWatchSpec) {
				s.InitialState = v1alpha1.InitialEmitExisting
			})
			refusedReason(t, w, v1alpha1.ReasonSinkNotAllowed)
			if w.Status.Delivered != 0 {
				t.Errorf("%d events delivered to a private address", w.Status.Delivered)
			}
		}},
		{"the victim's connection and calendar, named in the attacker's expectations", func(t *testing.T) {
			must(t, k8s.Create(ctx, &v1alpha1.HolidayCalendar{ObjectMeta: metav1.ObjectMeta{Namespace: victim.ns, Name: "holidays"},
				Spec: v1alpha1.HolidayCalendarSpec{Dates: []string{"2026-12-25"}}}))
			peek := attacker.expectation(t, "peek", func(s *v1alpha1.FileExpectationSpec) { s.ConnectionRef.Name = victim.uiConn })
			if ready := refusedReason(t, peek, v1alpha1.ReasonConnectionNotReady); strings.Contains(ready.Message, victim.ns) {
				t.Errorf("the refusal names the victim's namespace: %q", ready.Message)
			}
			dates := attacker.expectation(t, "dates", func(s *v1alpha1.FileExpectationSpec) {
				s.Schedule.CalendarRef = &v1alpha1.LocalObjectReference{Name: "holidays"}
			})
			if ready := refusedReason(t, dates, v1alpha1.ReasonCalendarNotFound); strings.Contains(ready.Message, victim.ns) {
				t.Errorf("the refusal names the victim's namespace: %q", ready.Message)
			}
		}},
		{"the cluster's private addresses as the attacker's expectation's sink", func(t *testing.T) {
			// A window a minute, from the minute after the worker took it.
			must(t, testkit.Wait(3*time.Minute, "a window of the attacker's expectation is decided", func() (bool, string) {
				must(t, k8s.Get(ctx, client.ObjectKeyFromObject(privateSink), privateSink))
				return len(privateSink.Status.LastOutcomes) > 0, fmt.Sprintf("%+v", privateSink.Status)
			}))
			refusedReason(t, privateSink, v1alpha1.ReasonSinkNotAllowed)
			if !meta.IsStatusConditionTrue(privateSink.Status.Conditions, v1alpha1.ConditionStalled) || privateSink.Status.Pending == 0 {
				t.Errorf("a sink the policy refuses: %+v", privateSink.Status)
			}
		}},
		{"the worker's deliveries, held by the attacker's sink that never answers", func(t *testing.T) {
			silent := testsftp.Silent(t)
			for i := range 2 {
				attacker.watch(t, fmt.Sprintf("tarpit-%d", i), "/", v1alpha1.Destination{URI: fmt.Sprintf("http://127.0.0.1:%d", silent)},
					func(s *v1alpha1.SftpWatchSpec) {
						s.InitialState = v1alpha1.InitialEmitExisting
						s.Delivery.Timeout = "PT1M"
					})
			}
			victimEventArrives(t, "while the attacker's sink holds its deliveries")
		}},
		{"the worker's polls, held by the attacker's watches of a server that never lists", func(t *testing.T) {
			conn := attacker.tarpitConnection(t, testsftp.Tarpit(t), "tarpit")
			var held []*v1alpha1.SftpWatch
			for i := range maxWatchesPerNamespace {
				held = append(held, attacker.watch(t, fmt.Sprintf("tarpit-%d", i), "/", v1alpha1.Destination{URI: "http://127.0.0.1:9"},
					func(s *v1alpha1.SftpWatchSpec) { s.ConnectionRef.Name = conn.Name }))
			}
			victimEventArrives(t, "while the attacker's polls hang")
			for _, w := range held {
				must(t, k8s.Get(ctx, client.ObjectKeyFromObject(w), w))
				if w.Status.LastPollTime != nil {
					t.Errorf("%s's poll of the tarpit ended", w.Name)
				}
			}
		}},
		{"more watches than the attacker's namespace may run", func(t *testing.T) {
			var last *v1alpha1.SftpWatch
			for i := range maxWatchesPerNamespace + 1 {
				last = attacker.watch(t, fmt.Sprintf("quota-%d", i), "/", v1alpha1.Destination{URI: "http://127.0.0.1:9"})
			}
			refusedReason(t, last, v1alpha1.ReasonOverQuota)
			victimEventArrives(t, "while the attacker's watches are over quota")
		}},
		{"the victim's connections named in the attacker's transfers", func(t *testing.T) {
			victim.watchedFolder(t, "outgoing")
			must(t, os.WriteFile(filepath.Join(victim.sshd.Dir, "outgoing", "secret.csv"), []byte("the victim's"), 0o644))
			for _, tr := range []*v1alpha1.Transfer{
				attacker.transfer(t, "steal", victim.uiConn, "/outgoing", "reports", "/stolen"),
				attacker.transfer(t, "plant", "reports", "/", victim.uiConn, "/planted"),
			} {
				refusedReason(t, tr, v1alpha1.ReasonConnectionNotReady)
				if !strings.Contains(meta.FindStatusCondition(tr.Status.Conditions, v1alpha1.ConditionReady).Message, "no SftpConnection") {
					t.Errorf("%s: %+v", tr.Name, tr.Status.Conditions)
				}
			}
			if _, err := os.Stat(filepath.Join(attacker.sshd.Dir, "stolen")); err == nil {
				t.Error("the attacker's server holds a copy of the victim's folder")
			}
			if _, err := os.Stat(filepath.Join(victim.sshd.Dir, "planted")); err == nil {
				t.Error("the victim's server holds the attacker's files")
			}
		}},
		{"the victim's object store, named in the attacker's transfers and watch", func(t *testing.T) {
			s3 := tests3.Start(t)
			s3.Bucket(t, "vault")
			testkit.ReadyStore(t, k8s, victim.ns, "vault", s3, "vault", "")
			_, err := s3.Client(t).PutObject(ctx, "vault", "outgoing/secret.csv", strings.NewReader("the victim's"), -1, minio.PutObjectOptions{})
			must(t, err)
			store := func(s *v1alpha1.ConnectionReference) { s.Kind = v1alpha1.KindObjectStore }
			for _, tr := range []*v1alpha1.Transfer{
				attacker.transfer(t, "steal-objects", "vault", "/outgoing", "reports", "/stolen-objects", func(s *v1alpha1.TransferSpec) { store(&s.Source.ConnectionRef) }),
				attacker.transfer(t, "plant-objects", "reports", "/", "vault", "/planted", func(s *v1alpha1.TransferSpec) { store(&s.Destination.ConnectionRef) }),
			} {
				ready := refusedReason(t, tr, v1alpha1.ReasonConnectionNotReady)
				if !strings.Contains(ready.Message, "no ObjectStore vault") || strings.Contains(ready.Message, victim.ns) {
					t.Errorf("%s: %+v", tr.Name, tr.Status.Conditions)
				}
			}
			peek := attacker.watch(t, "peek-objects", "/outgoing", v1alpha1.Destination{URI: "http://127.0.0.1:9"}, func(s *v1alpha1.SftpWatchSpec) {
				s.ConnectionRef = v1alpha1.ConnectionReference{Kind: v1alpha1.KindObjectStore, Name: "vault"}
			})
			refusedReason(t, peek, v1alpha1.ReasonConnectionNotReady)
			if _, err := os.Stat(filepath.Join(attacker.sshd.Dir, "stolen-objects")); err == nil {
				t.Error("the attacker's server holds a copy of the victim's objects")
			}
			if _, err := os.Stat(s3.Path("vault", "planted")); err == nil {
				t.Error("the victim's bucket holds the attacker's files")
			}
		}},
		{"the cluster's metadata endpoint and private addresses as the attacker's object store", func(t *testing.T) {
			must(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: attacker.ns, Name: "store-creds"},
				StringData: map[string]string{v1alpha1.SecretKeyAccessKeyID: "a", v1alpha1.SecretKeySecretAccessKey: "b"}}))
			for name, endpoint := range map[string]string{"metadata": "http://169.254.169.254", "inside": "http://10.255.255.1:9000"} {
				st := &v1alpha1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Namespace: attacker.ns, Name: name}, Spec: v1alpha1.ObjectStoreSpec{
					Endpoint: endpoint, Bucket: "any", Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.LocalSecretReference{Name: "store-creds"}}}}
				must(t, k8s.Create(ctx, st))
				t.Cleanup(func() { _ = k8s.Delete(ctx, st) })
				refusedReason(t, st, v1alpha1.ReasonDestinationNotAllowed)
			}
		}},
		{"the victim's FTP connection, named in the attacker's transfers and watch", func(t *testing.T) {
			ftpd := testftpd.Start(t)
			conn, secret := ftpd.Connection(victim.ns, "vault-ftp")
			testkit.ReadyFtp(t, k8s, conn, secret)
			must(t, os.MkdirAll(filepath.Join(ftpd.Dir, "outgoing"), 0o755))
			must(t, os.WriteFile(filepath.Join(ftpd.Dir, "outgoing", "secret.csv"), []byte("the victim's"), 0o644))
			ftp := func(s *v1alpha1.ConnectionReference) { s.Kind = v1alpha1.KindFtpConnection }
			for _, tr := range []*v1alpha1.Transfer{
				attacker.transfer(t, "steal-ftp", "vault-ftp", "/outgoing", "reports", "/stolen-ftp", func(s *v1alpha1.TransferSpec) { ftp(&s.Source.ConnectionRef) }),
				attacker.transfer(t, "plant-ftp", "reports", "/", "vault-ftp", "/planted", func(s *v1alpha1.TransferSpec) { ftp(&s.Destination.ConnectionRef) }),
			} {
				ready := refusedReason(t, tr, v1alpha1.ReasonConnectionNotReady)
				if !strings.Contains(ready.Message, "no FtpConnection vault-ftp") || strings.Contains(ready.Message, victim.ns) {
					t.Errorf("%s: %+v", tr.Name, tr.Status.Conditions)
				}
			}
			peek := attacker.watch(t, "peek-ftp", "/outgoing", v1alpha1.Destination{URI: "http://127.0.0.1:9"}, func(s *v1alpha1.SftpWatchSpec) {
				s.ConnectionRef = v1alpha1.ConnectionReference{Kind: v1alpha1.KindFtpConnection, Name: "vault-ftp"}
			})
			refusedReason(t, peek, v1alpha1.ReasonConnectionNotReady)
			if _, err := os.Stat(filepath.Join(attacker.sshd.Dir, "stolen-ftp")); err == nil {
				t.Error("the attacker's server holds a copy of the victim's FTP folder")
			}
			if _, err := os.Stat(filepath.Join(ftpd.Dir, "planted")); err == nil {
				t.Error("the victim's FTP server holds the attacker's files")
			}
		}},
		{"the metadata endpoint, private addresses and plaintext as the attacker's FTP connection", func(t *testing.T) {
			must(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: attacker.ns, Name: "ftp-creds"},
				StringData: map[string]string{v1alpha1.SecretKeyPassword: "p"}}))
			for name, tc := range map[string]struct {
				host   string
				tls    v1alpha1.FTPTLS
				reason string
			}{
				"metadata-ftp": {"169.254.169.254", v1alpha1.FTPTLSExplicit, v1alpha1.ReasonDestinationNotAllowed},
				"inside-ftp":   {"10.255.255.1", v1alpha1.FTPTLSExplicit, v1alpha1.ReasonDestinationNotAllowed},
				"plain-ftp":    {"ftp.example.com", v1alpha1.FTPTLSNone, v1alpha1.ReasonPlaintextNotAllowed},
			} {
				c := &v1alpha1.FtpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: attacker.ns, Name: name}, Spec: v1alpha1.FtpConnectionSpec{
					Host: tc.host, TLS: tc.tls, Username: "u", Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.LocalSecretReference{Name: "ftp-creds"}}}}
				must(t, k8s.Create(ctx, c))
				t.Cleanup(func() { _ = k8s.Delete(ctx, c) })
				refusedReason(t, c, tc.reason)
			}
		}},
		{"the victim's OpenPGP key, named in the attacker's transfer", func(t *testing.T) {
			must(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: victim.ns, Name: "our-key"},
				Data: map[string][]byte{"key": []byte("-----BEGIN PGP PRIVATE KEY BLOCK-----")}}))
			attacker.watchedFolder(t, "sealed")
			tr := attacker.transfer(t, "decrypt", "reports", "/sealed", "reports", "/opened", func(s *v1alpha1.TransferSpec) {
				s.OpenPGP = &v1alpha1.TransferOpenPGP{Decrypt: &v1alpha1.OpenPGPDecrypt{KeySecretRef: v1alpha1.OpenPGPKeyRef{Name: "our-key"}}}
			})
			if ready := refusedReason(t, tr, v1alpha1.ReasonSecretNotFound); strings.Contains(ready.Message, victim.ns) || !strings.Contains(ready.Message, "no Secret our-key") {
				t.Errorf("the refusal: %q", ready.Message)
			}
			// The same key, named in the transfer of the attacker's watch.
			w := attacker.watch(t, "open", "/sealed", v1alpha1.Destination{}, func(s *v1alpha1.SftpWatchSpec) {
				s.Sink, s.InitialState = nil, v1alpha1.InitialEmitExisting
				s.Transfer = &v1alpha1.TransferOptions{
					Destination: v1alpha1.TransferDestination{ConnectionRef: v1alpha1.ConnectionReference{Name: "reports"}, Path: "/opened"},
					OpenPGP:     &v1alpha1.TransferOpenPGP{Decrypt: &v1alpha1.OpenPGPDecrypt{KeySecretRef: v1alpha1.OpenPGPKeyRef{Name: "our-key"}}}}
			})
			must(t, os.WriteFile(filepath.Join(attacker.sshd.Dir, "sealed", "stolen.pgp"), []byte("x"), 0o644))
			refusedReason(t, madeTransfer(t, w), v1alpha1.ReasonSecretNotFound)
			if _, err := os.Stat(filepath.Join(attacker.sshd.Dir, "opened")); err == nil {
				t.Error("the attacker's folder holds what the victim's key opened")
			}
		}},
		{"the victim's OpenPGP key, through the attacker's web UI", func(t *testing.T) {
			if status, _ := attacker.ui.Form(t, "/openpgp/our-key/delete", url.Values{}); status != http.StatusNotFound {
				t.Errorf("deleting the victim's key: %d", status)
			}
			if status, page := attacker.ui.Get(t, "/openpgp/our-key/delete"); status != http.StatusNotFound || strings.Contains(page, "our-key") {
				t.Errorf("asking to delete the victim's key: %d", status)
			}
			status, page := attacker.ui.Form(t, "/connections/"+attacker.uiConn+"/watches", url.Values{"path": {"/"}, "created": {"on"},
				"to": {attacker.uiConn}, "folder": {"/opened"}, "openpgp": {"decrypt"}, "key": {"our-key"}})
			if status != http.StatusUnprocessableEntity || !strings.Contains(page, "no OpenPGP key our-key") {
				t.Errorf("a watch decrypting with the victim's key: %d", status)
			}
			if _, page := attacker.ui.Get(t, "/openpgp"); strings.Contains(page, "our-key") {
				t.Error("the attacker's keys page lists the victim's key")
			}
			var s corev1.Secret
			must(t, k8s.Get(ctx, client.ObjectKey{Namespace: victim.ns, Name: "our-key"}, &s))
		}},
		{"the victim's connection and key, named in the transfer of the attacker's watch", func(t *testing.T) {
			attacker.watchedFolder(t, "drop")
			w := attacker.watch(t, "forward", "/drop", v1alpha1.Destination{URI: "http://127.0.0.1:9"}, func(s *v1alpha1.SftpWatchSpec) {
				s.Sink, s.InitialState = nil, v1alpha1.InitialEmitExisting
				s.Transfer = &v1alpha1.TransferOptions{Destination: v1alpha1.TransferDestination{
					ConnectionRef: v1alpha1.ConnectionReference{Name: victim.uiConn}, Path: "/planted"}}
			})
			must(t, os.WriteFile(filepath.Join(attacker.sshd.Dir, "drop", "payload.csv"), []byte("the attacker's"), 0o644))
			refusedReason(t, madeTransfer(t, w), v1alpha1.ReasonConnectionNotReady)
			if _, err := os.Stat(filepath.Join(victim.sshd.Dir, "planted")); err == nil {
				t.Error("the victim's server holds the attacker's file")
			}
		}},
		{"more Transfers from watches than the attacker's namespace may keep", func(t *testing.T) {
			attacker.watchedFolder(t, "flood")
			w := attacker.watch(t, "flood", "/flood", v1alpha1.Destination{URI: "http://127.0.0.1:9"}, func(s *v1alpha1.SftpWatchSpec) {
				s.Sink, s.InitialState = nil, v1alpha1.InitialEmitExisting
				s.Transfer = &v1alpha1.TransferOptions{Destination: v1alpha1.TransferDestination{
					ConnectionRef: v1alpha1.ConnectionReference{Name: "reports"}, Path: "/flooded"}}
			})
			for i := range maxWatchTransfersPerNamespace + 2 {
				must(t, os.WriteFile(filepath.Join(attacker.sshd.Dir, "flood", fmt.Sprintf("f%d", i)), []byte("x"), 0o644))
			}
			refusedReason(t, w, v1alpha1.ReasonTransfersAtLimit)
			var list v1alpha1.TransferList
			must(t, k8s.List(ctx, &list, client.InNamespace(attacker.ns), client.MatchingLabels{v1alpha1.LabelWatch: "flood"}))
			if len(list.Items) > maxWatchTransfersPerNamespace {
				t.Errorf("the attacker's watch made %d Transfers, past the namespace's %d", len(list.Items), maxWatchTransfersPerNamespace)
			}
			victimEventArrives(t, "while the attacker's watch is at its Transfers' limit")
		}},
		{"the worker's streams, held by the attacker's transfers of large files from a server that never reads", func(t *testing.T) {
			tarpit := testsftp.Tarpit(t)
			// Large enough to be copied in ranges, whose sessions come
			// out of the namespace's share of streams too.
			must(t, os.WriteFile(filepath.Join(tarpit.Dir, "held.bin"), []byte("never read"), 0o644))
			must(t, os.Truncate(filepath.Join(tarpit.Dir, "held.bin"), rangedFile+1))
			conn := attacker.tarpitConnection(t, tarpit, "tarpit-transfers")
			var held []*v1alpha1.Transfer
			for i := range maxTransfersPerNamespace + 1 {
				held = append(held, attacker.transfer(t, fmt.Sprintf("held-%d", i), conn.Name, "/held.bin", "reports", "/held"))
			}
			refusedReason(t, held[maxTransfersPerNamespace], v1alpha1.ReasonQueued)
			victim.watchedFolder(t, "batch")
			must(t, os.WriteFile(filepath.Join(victim.sshd.Dir, "batch", "a.csv"), []byte("a"), 0o644))
			mine := victim.transfer(t, "mine", "reports", "/batch", "reports", "/batch-copy")
			testkit.EventuallyFound(t, "the victim's transfer finishes while the attacker's hang", func() (bool, string) {
				must(t, k8s.Get(ctx, client.ObjectKeyFromObject(mine), mine))
				return meta.IsStatusConditionTrue(mine.Status.Conditions, v1alpha1.ConditionReady), fmt.Sprintf("%+v", mine.Status)
			})
			for _, tr := range held {
				must(t, k8s.Get(ctx, client.ObjectKeyFromObject(tr), tr))
				if tr.Finished() {
					t.Errorf("%s's copy from the tarpit ended", tr.Name)
				}
			}
		}},
		{"the victim's slug with the attacker's key", func(t *testing.T) {
			status, body := testhttp.PostJSON(t, gatewayURL+"/"+victim.slug+"/write", attacker.token, `{"path": "planted", "file": {"text": "x"}}`)
			if status != http.StatusNotFound {
				t.Errorf("%d %s, want 404: another namespace's connection looks like none", status, body)
			}
		}},
		{"the victim's published hash in the attacker's key", func(t *testing.T) {
			copied := &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: attacker.ns, Name: "copied"},
				Spec: v1alpha1.ApiKeySpec{Token: v1alpha1.TokenSource{SHA256: apitoken.Hash(victim.token)}}}
			must(t, k8s.Create(ctx, copied))
			if ready := refusedReason(t, copied, v1alpha1.ReasonDuplicateToken); strings.Contains(ready.Message, victim.ns) {
				t.Errorf("the refusal names the victim's namespace: %q", ready.Message)
			}
			victim.writes(t, "after-the-copy")
		}},
		{"the victim's token, freed by delete-and-recreate", func(t *testing.T) {
			// The attacker's copy waits for the victim's key to go; the
			// victim's GitOps replaces the key, and its CI goes on.
			ci := &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: victim.ns, Name: "ci"}}
			must(t, k8s.Delete(ctx, ci))
			copied := &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: attacker.ns, Name: "copied"}}
			testkit.EventuallyFound(t, "the copy is told the token is held for another namespace", func() (bool, string) {
				ready := refusedReason(t, copied, v1alpha1.ReasonDuplicateToken)
				return strings.Contains(ready.Message, "held for that namespace"), ready.Message
			})
			must(t, k8s.Create(ctx, &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: victim.ns, Name: "ci"},
				Spec: v1alpha1.ApiKeySpec{Token: v1alpha1.TokenSource{SHA256: apitoken.Hash(victim.token)}}}))
			victim.writes(t, "after-the-key-recreate")
			refusedReason(t, copied, v1alpha1.ReasonDuplicateToken)
		}},
		{"connection tests, crowded by the attacker's servers that never answer", func(t *testing.T) {
			// More than the manager's workers (--max-concurrent-tests, 8).
			silent := testsftp.Silent(t)
			var hanging []*v1alpha1.SftpConnection
			for i := range 12 {
				c := &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: attacker.ns, Name: fmt.Sprintf("hang-%d-%s", i, attacker.slug)},
					Spec: v1alpha1.SftpConnectionSpec{Host: "127.0.0.1", Port: silent, Username: testsshd.User,
						Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.LocalSecretReference{Name: "reports-creds"}},
						HostKey:     v1alpha1.HostKeyTrust{InsecureSkipVerify: true},
						Limits:      v1alpha1.Limits{ConnectTimeout: &metav1.Duration{Duration: 2 * time.Minute}}}}
				must(t, k8s.Create(ctx, c))
				hanging = append(hanging, c)
			}
			fresh := &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: victim.ns, Name: "fresh-" + victim.slug},
				Spec: v1alpha1.SftpConnectionSpec{Host: victim.sshd.Host, Port: victim.sshd.Port, Username: testsshd.User, RootPath: victim.sshd.Dir,
					Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.LocalSecretReference{Name: "reports-creds"}},
					HostKey:     v1alpha1.HostKeyTrust{Trusted: []string{victim.sshd.HostKeyLine}}}}
			must(t, k8s.Create(ctx, fresh))
			testkit.EventuallyFound(t, "the victim's new connection is tested while the attacker's hang", func() (bool, string) {
				must(t, k8s.Get(ctx, client.ObjectKeyFromObject(fresh), fresh))
				return meta.IsStatusConditionTrue(fresh.Status.Conditions, v1alpha1.ConditionReady), fmt.Sprintf("%+v", fresh.Status.Conditions)
			})
			// Each of the attacker's tests takes two minutes, two at a time:
			// none has ended, and the victim's did not wait for them.
			for _, c := range hanging {
				must(t, k8s.Get(ctx, client.ObjectKeyFromObject(c), c))
				if c.Status.LastTestTime != nil {
					t.Errorf("%s was tested before the victim's connection", c.Name)
				}
				must(t, k8s.Delete(ctx, c))
			}
		}},
		{"a claim on the victim's slug", func(t *testing.T) {
			must(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: attacker.ns, Name: "claim-creds"},
				StringData: map[string]string{v1alpha1.SecretKeyPassword: attacker.sshd.Password}}))
			claim := &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: attacker.ns, Name: "claim"},
				Spec: v1alpha1.SftpConnectionSpec{Host: attacker.sshd.Host, Port: attacker.sshd.Port, Username: testsshd.User,
					RootPath: attacker.sshd.Dir, Slug: victim.slug,
					Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.LocalSecretReference{Name: "claim-creds"}},
					HostKey:     v1alpha1.HostKeyTrust{Trusted: []string{attacker.sshd.HostKeyLine}}}}
			must(t, k8s.Create(ctx, claim))
			refusedReason(t, claim, v1alpha1.ReasonSlugConflict)
			victim.writes(t, "after-the-claim")
		}},
		{"a bucket's claim on the victim's slug, and the victim's bucket with the attacker's key", func(t *testing.T) {
			// Slugs are one namespace across kinds: a store cannot take a
			// connection's, and a store's is as out of reach as one.
			s3 := tests3.Start(t)
			s3.Bucket(t, "claims")
			claim := testkit.NewStore(t, k8s, attacker.ns, "claim-store", s3, "claims", "", func(st *v1alpha1.ObjectStore) { st.Spec.Slug = victim.slug })
			refusedReason(t, claim, v1alpha1.ReasonSlugConflict)
			victim.writes(t, "after-the-bucket-claim")
			vault := testkit.ReadyStore(t, k8s, victim.ns, "vault-store", s3, "claims", "victim/", func(st *v1alpha1.ObjectStore) { st.Spec.Slug = "vs-" + victim.slug })
			status, body := testhttp.PostJSON(t, gatewayURL+"/"+vault.Spec.Slug+"/write", attacker.token, `{"path": "planted", "file": {"text": "x"}}`)
			if status != http.StatusNotFound {
				t.Errorf("the victim's bucket with the attacker's key: %d %s, want 404", status, body)
			}
		}},
		{"the victim's slug, freed by delete-and-recreate", func(t *testing.T) {
			// The attacker's claim is older than the victim's new object;
			// the victim's CI goes on calling its slug with its token.
			must(t, k8s.Delete(ctx, &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: victim.ns, Name: "reports"}}))
			victim.createReports(t, "reports")
			victim.writes(t, "after-the-recreate")
			claim := &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: attacker.ns, Name: "claim"}}
			refusedReason(t, claim, v1alpha1.ReasonSlugConflict)
		}},
		{"the victim's connection pages", func(t *testing.T) {
			for _, path := range []string{"", "/status", "/edit", "/delete", "/files?path=/", "/files/view?path=/arrivals",
				"/files/download?path=/arrivals/file-1.csv", "/files/delete?path=/arrivals"} {
				if status, _ := attacker.ui.Get(t, "/connections/"+victim.uiConn+path); status != http.StatusNotFound {
					t.Errorf("GET %s: %d, want 404", path, status)
				}
			}
			for _, path := range []string{"/edit", "/delete", "/try", "/files/mkdir", "/files/rename", "/files/delete"} {
				if status, _ := attacker.ui.Form(t, "/connections/"+victim.uiConn+path, url.Values{"host": {attacker.sshd.Host},
					"dir": {"/"}, "name": {"planted"}, "path": {"/arrivals"}}); status != http.StatusNotFound {
					t.Errorf("POST %s: %d, want 404", path, status)
				}
			}
		}},
		{"the victim's expectation, through the attacker's web UI", func(t *testing.T) {
			e := victim.expectation(t, "payments")
			for _, path := range []string{"", "/delete"} {
				if status, _ := attacker.ui.Get(t, "/expectations/"+e.Name+path); status != http.StatusNotFound {
					t.Errorf("GET %s: %d, want 404", path, status)
				}
			}
			if status, _ := attacker.ui.Form(t, "/expectations/"+e.Name+"/delete", url.Values{}); status != http.StatusNotFound {
				t.Errorf("POST delete: %d, want 404", status)
			}
			must(t, k8s.Get(ctx, client.ObjectKeyFromObject(e), e)) // still there
		}},
		{"the victim's resumable upload, through the attacker's key, connection and web UI", func(t *testing.T) {
			up := tusAs(t, http.MethodPost, gatewayURL+"/"+victim.slug+"/uploads/", victim.token, "", "Upload-Length", "10",
				"Upload-Metadata", "path "+base64.StdEncoding.EncodeToString([]byte("/upload.bin")))
			if up.status != http.StatusCreated {
				t.Fatalf("the victim begins an upload: %d", up.status)
			}
			id := path.Base(up.header.Get("Location"))
			if got := tusAs(t, http.MethodPatch, gatewayURL+up.header.Get("Location"), victim.token, "hello", "Upload-Offset", "0"); got.status != http.StatusNoContent {
				t.Fatalf("the victim's first part: %d", got.status)
			}
			for _, c := range []struct{ what, url string }{
				{"at the victim's slug", gatewayURL + "/" + victim.slug + "/uploads/" + id},
				{"at the attacker's slug", gatewayURL + "/" + attacker.slug + "/uploads/" + id},
			} {
				for _, method := range []string{http.MethodHead, http.MethodPatch, http.MethodDelete} {
					if got := tusAs(t, method, c.url, attacker.token, "evil!", "Upload-Offset", "5"); got.status != http.StatusNotFound {
						t.Errorf("the attacker's key %s, %s: %d, want 404", c.what, method, got.status)
					}
				}
			}
			// The attacker's web UI, with its own connection and the victim's id.
			for _, method := range []string{http.MethodHead, http.MethodPatch, http.MethodDelete} {
				req, err := http.NewRequest(method, uiURL+"/connections/"+attacker.uiConn+"/uploads/"+id, strings.NewReader("evil!"))
				must(t, err)
				req.Header.Set("Tus-Resumable", "1.0.0")
				req.Header.Set("Upload-Offset", "5")
				req.Header.Set("Content-Type", "application/offset+octet-stream")
				req.Header.Set("Origin", uiURL)
				req.Header.Set("Sec-Fetch-Site", "same-origin")
				if status, _ := attacker.ui.Do(t, req); status != http.StatusNotFound {
					t.Errorf("the attacker's web UI, %s: %d, want 404", method, status)
				}
			}
			head := tusAs(t, http.MethodHead, gatewayURL+up.header.Get("Location"), victim.token, "")
			if head.header.Get("Upload-Offset") != "5" {
				t.Errorf("the victim's upload is at %q, want 5", head.header.Get("Upload-Offset"))
			}
			if got := tusAs(t, http.MethodPatch, gatewayURL+up.header.Get("Location"), victim.token, "world", "Upload-Offset", "5"); got.status != http.StatusNoContent {
				t.Fatalf("the victim's last part: %d", got.status)
			}
			if b, err := os.ReadFile(filepath.Join(victim.sshd.Dir, "upload.bin")); err != nil || string(b) != "helloworld" {
				t.Errorf("the victim's file holds %q (%v)", b, err)
			}
		}},
		{"the API server, flooded by the attacker's HEADs of its own upload", func(t *testing.T) {
			up := tusAs(t, http.MethodPost, gatewayURL+"/"+attacker.slug+"/uploads/", attacker.token, "", "Upload-Length", "10",
				"Upload-Metadata", "path "+base64.StdEncoding.EncodeToString([]byte("/flood.bin")))
			if up.status != http.StatusCreated {
				t.Fatalf("the attacker begins an upload: %d", up.status)
			}
			flooded := gatewayURL + up.header.Get("Location")
			record := func() string {
				var list corev1.ConfigMapList
				must(t, k8s.List(ctx, &list, client.InNamespace(framework.Namespace), client.MatchingLabels{uploadrecord.LabelNamespace: attacker.ns}))
				if len(list.Items) != 1 {
					t.Fatalf("%d records of the attacker's uploads, want 1", len(list.Items))
				}
				return list.Items[0].ResourceVersion
			}
			before := record()
			heads := make(chan int, 200)
			go func() {
				defer close(heads)
				for range 200 {
					req, _ := http.NewRequest(http.MethodHead, flooded, nil)
					req.Header.Set("Authorization", "Bearer "+attacker.token)
					req.Header.Set("Tus-Resumable", "1.0.0")
					if resp, err := http.DefaultClient.Do(req); err == nil {
						_ = resp.Body.Close()
						heads <- resp.StatusCode
					}
				}
			}()
			// Meanwhile the victim's upload goes on.
			mine := tusAs(t, http.MethodPost, gatewayURL+"/"+victim.slug+"/uploads/", victim.token, "", "Upload-Length", "5",
				"Upload-Metadata", "path "+base64.StdEncoding.EncodeToString([]byte("/during-flood.bin")))
			if mine.status != http.StatusCreated {
				t.Fatalf("the victim begins an upload during the flood: %d", mine.status)
			}
			if got := tusAs(t, http.MethodPatch, gatewayURL+mine.header.Get("Location"), victim.token, "whole", "Upload-Offset", "0"); got.status != http.StatusNoContent {
				t.Errorf("the victim's part during the flood: %d", got.status)
			}
			answered := 0
			for status := range heads {
				if status == http.StatusOK {
					answered++
				}
			}
			if after := record(); after != before || answered < 190 {
				t.Errorf("%d of 200 HEADs answered, and the record went from version %s to %s: a HEAD writes nothing", answered, before, after)
			}
			if got := tusAs(t, http.MethodDelete, flooded, attacker.token, ""); got.status != http.StatusNoContent {
				t.Errorf("the attacker ends its upload: %d", got.status)
			}
		}},
		{"sftpgate's storage in etcd, filled by the attacker's uploads and watch", func(t *testing.T) {
			note := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("n", 4000)))
			made := 0
			for ; made < maxUploadsPerNamespace; made++ {
				up := tusAs(t, http.MethodPost, gatewayURL+"/"+hoarder.slug+"/uploads/", hoarder.token, "", "Upload-Length", "1",
					"Upload-Metadata", "path "+base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "/h-%d", made))+",note "+note)
				if up.status == http.StatusCreated {
					continue
				}
				if up.status != http.StatusTooManyRequests {
					t.Fatalf("the attacker's upload %d: %d", made, up.status)
				}
				break
			}
			if made == maxUploadsPerNamespace {
				t.Errorf("%d uploads with large metadata fit in a budget of %d bytes", made, statePerAccount)
			}
			if n := storedFor(t, hoarder.ns); n > statePerAccount {
				t.Errorf("%d bytes stored for the attacker, past its budget of %d", n, statePerAccount)
			}
			hoarder.watchedFolder(t, "heap")
			for range 500 {
				must(t, os.WriteFile(filepath.Join(hoarder.sshd.Dir, "heap", rand.Text()+rand.Text()), nil, 0o644))
			}
			heap := hoarder.watch(t, "heap", "/heap", v1alpha1.Destination{URI: "http://127.0.0.1:9"})
			refusedReason(t, heap, v1alpha1.ReasonStateBudgetExceeded)
			if n := storedFor(t, hoarder.ns); n > statePerAccount {
				t.Errorf("%d bytes stored for the attacker, past its budget of %d", n, statePerAccount)
			}
			t.Logf("at the bound, %d bytes stored for the attacker's namespace (budget %d)", storedFor(t, hoarder.ns), statePerAccount)
			mine := tusAs(t, http.MethodPost, gatewayURL+"/"+victim.slug+"/uploads/", victim.token, "", "Upload-Length", "5",
				"Upload-Metadata", "path "+base64.StdEncoding.EncodeToString([]byte("/while-full.bin"))+",note "+note)
			if mine.status != http.StatusCreated {
				t.Fatalf("the victim's upload while the attacker's namespace is at its budget: %d", mine.status)
			}
			_ = tusAs(t, http.MethodDelete, gatewayURL+mine.header.Get("Location"), victim.token, "")
			// An earlier row made the victim's connection anew, which its
			// watch takes for another folder at its next look (a snapshot,
			// reporting nothing): two polls, and that is behind it.
			testkit.Polls(t, k8s, &v1alpha1.SftpWatch{ObjectMeta: metav1.ObjectMeta{Namespace: victim.ns, Name: "arrivals"}})(2)
			victimEventArrives(t, "while the attacker's namespace is at its budget")
		}},
		{"the removal of expired uploads, held by the attacker's server that never answers", func(t *testing.T) {
			stalling := testsftp.Stalling(t)
			conn := attacker.tarpitConnection(t, stalling, "stalling")
			records := &uploadrecord.Store{Client: k8s, Namespace: framework.Namespace}
			past := time.Now().Add(-time.Hour)
			for i := range 20 {
				must(t, records.Create(ctx, &uploadrecord.Record{ID: uploadrecord.NewID(), Namespace: attacker.ns, Connection: conn.Name,
					ConnectionUID: conn.UID, Target: fmt.Sprintf("/f-%d", i), Partial: tempname.For("/", fmt.Sprintf("upload/%d", i)),
					Size: 1, Created: past, Expires: past}))
			}
			t.Cleanup(func() {
				_ = k8s.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(framework.Namespace), client.MatchingLabels{uploadrecord.LabelNamespace: attacker.ns})
			})
			var reports v1alpha1.SftpConnection
			must(t, k8s.Get(ctx, client.ObjectKey{Namespace: victim.ns, Name: "reports"}, &reports))
			partial := tempname.For(victim.sshd.Dir, "upload/expired")
			must(t, os.WriteFile(partial, []byte("abandoned"), 0o644))
			must(t, records.Create(ctx, &uploadrecord.Record{ID: uploadrecord.NewID(), Namespace: victim.ns, Connection: "reports",
				ConnectionUID: reports.UID, Target: filepath.Join(victim.sshd.Dir, "expired.bin"), Partial: partial, Size: 20, Created: past, Expires: past}))
			start := time.Now()
			testkit.Eventually(t, "the victim's expired upload is removed while the attacker's server holds its own", func() bool {
				_, err := os.Stat(partial)
				return os.IsNotExist(err)
			})
			t.Logf("the victim's expired upload went %v after it was due, the attacker's 20 held by its server", time.Since(start).Round(time.Millisecond))
			var left corev1.ConfigMapList
			must(t, k8s.List(ctx, &left, client.InNamespace(framework.Namespace), client.MatchingLabels{uploadrecord.LabelNamespace: attacker.ns}))
			if len(left.Items) != 20 {
				t.Errorf("%d of the attacker's 20 expired uploads left: its server answers no stat, so none could go", len(left.Items))
			}
		}},
		{"more uploads than the attacker's namespace may have", func(t *testing.T) {
			begin := func(tn *tenant, name string) int {
				return tusAs(t, http.MethodPost, gatewayURL+"/"+tn.slug+"/uploads/", tn.token, "", "Upload-Length", "10",
					"Upload-Metadata", "path "+base64.StdEncoding.EncodeToString([]byte("/"+name))).status
			}
			for i := range maxUploadsPerNamespace {
				if status := begin(attacker, fmt.Sprintf("hoard-%d", i)); status != http.StatusCreated {
					t.Fatalf("the attacker's upload %d: %d", i, status)
				}
			}
			if status := begin(attacker, "one-more"); status != http.StatusTooManyRequests {
				t.Errorf("the attacker's upload past its namespace's bound: %d, want 429", status)
			}
			if status := begin(victim, "mine"); status != http.StatusCreated {
				t.Errorf("the victim's upload while the attacker's namespace is full: %d, want 201", status)
			}
		}},
		{"the victim's connections and transfers, through the attacker's web UI", func(t *testing.T) {
			for _, conns := range [][2]string{{victim.uiConn, attacker.uiConn}, {attacker.uiConn, victim.uiConn}} {
				status, _ := attacker.ui.Form(t, "/transfers", url.Values{"from": {conns[0]}, "path": {"/"}, "to": {conns[1]},
					"folder": {"/stolen"}, "mode": {"Copy"}, "overwrite": {"Never"}})
				if status != http.StatusUnprocessableEntity {
					t.Errorf("a transfer %s → %s: %d, want 422", conns[0], conns[1], status)
				}
			}
			theirs := victim.transfer(t, "theirs", "reports", "/nowhere", "reports", "/copies")
			if _, page := attacker.ui.Get(t, "/transfers"); strings.Contains(page, theirs.Name) {
				t.Error("the attacker's transfers page lists the victim's transfer")
			}
			if status, _ := attacker.ui.Form(t, "/transfers/"+theirs.Name+"/delete", nil); status != http.StatusNotFound {
				t.Errorf("removing the victim's transfer: %d, want 404", status)
			}
			if status, page := attacker.ui.Get(t, "/transfers/"+theirs.Name+"/delete"); status != http.StatusNotFound || strings.Contains(page, "/nowhere") {
				t.Errorf("asking to remove the victim's transfer: %d, want 404", status)
			}
			must(t, k8s.Get(ctx, client.ObjectKeyFromObject(theirs), theirs))
		}},
		{"a key for the victim's connection", func(t *testing.T) {
			if status, _ := attacker.ui.Form(t, "/keys", url.Values{"connection": {victim.uiConn}, "expires": {"never"}}); status != http.StatusUnprocessableEntity {
				t.Errorf("%d, want 422", status)
			}
		}},
		{"the victim's stored password, sent to the attacker's server with a stolen session", func(t *testing.T) {
			stolen := newClient(t)
			u, err := url.Parse(victim.ui.Base)
			must(t, err)
			stolen.HTTP.Jar.SetCookies(u, victim.ui.HTTP.Jar.Cookies(u))
			logins := attacker.sshd.Logins(t)
			status, page := stolen.Form(t, "/connections/"+victim.uiConn+"/edit", url.Values{"host": {attacker.sshd.Host},
				"port": {fmt.Sprint(attacker.sshd.Port)}, "username": {testsshd.User}, "auth": {"password"}, "trust": {"first-use"}})
			if status != http.StatusUnprocessableEntity || !strings.Contains(page, "Enter the password again") {
				t.Errorf("editing the host without the password: %d", status)
			}
			var conn v1alpha1.SftpConnection
			must(t, k8s.Get(ctx, client.ObjectKey{Namespace: victim.ns, Name: victim.uiConn}, &conn))
			if conn.Spec.Port != victim.sshd.Port || attacker.sshd.Logins(t) != logins {
				t.Errorf("the connection now reaches port %d; the attacker's server saw %d log-ins", conn.Spec.Port, attacker.sshd.Logins(t)-logins)
			}
		}},
		{"the gateway's memory, held by the attacker's downloads it never reads", func(t *testing.T) {
			must(t, os.WriteFile(filepath.Join(attacker.sshd.Dir, "large.bin"), make([]byte, 64<<20), 0o644))
			refused := 0
			for range 8 {
				req, err := http.NewRequest(http.MethodPost, ownGateway.URL+"/"+attacker.slug+"/read", strings.NewReader(`{"path": "large.bin"}`))
				must(t, err)
				req.Header.Set("Authorization", "Bearer "+attacker.token)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/octet-stream")
				resp, err := http.DefaultClient.Do(req)
				must(t, err)
				defer func() { _ = resp.Body.Close() }() // read only at the end
				if resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusTooManyRequests {
					refused++
					break
				}
			}
			if refused == 0 {
				t.Fatal("eight downloads never read were all let in")
			}
			victim.writesThrough(t, ownGateway.URL, "while the attacker holds the gateway's memory")
		}},
		{"the gateway's CPU, taken by the attacker's large reads", func(t *testing.T) {
			must(t, os.WriteFile(filepath.Join(attacker.sshd.Dir, "text.txt"), bytes.Repeat([]byte("<"), 4<<20), 0o644))
			paced := gatewayMetric(t, ownGateway, "sftpgate_gateway_paced_seconds_total")
			var reads sync.WaitGroup
			for range 3 {
				reads.Go(func() {
					for range 2 {
						// 200, or 503 when the others hold the budget.
						req, err := http.NewRequest(http.MethodPost, ownGateway.URL+"/"+attacker.slug+"/read", strings.NewReader(`{"path": "text.txt"}`))
						if err != nil {
							t.Error(err)
							return
						}
						req.Header.Set("Authorization", "Bearer "+attacker.token)
						resp, err := http.DefaultClient.Do(req)
						if err != nil {
							t.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						_ = resp.Body.Close()
					}
				})
			}
			attacked := make(chan struct{})
			go func() {
				reads.Wait()
				close(attacked)
			}()
			over := func() bool {
				select {
				case <-attacked:
					return true
				default:
					return false
				}
			}
			for i := 0; !over(); i++ {
				victim.writesThrough(t, ownGateway.URL, fmt.Sprintf("while the attacker reads (%d)", i))
			}
			if gatewayMetric(t, ownGateway, "sftpgate_gateway_paced_seconds_total") <= paced {
				t.Error("the attacker's large reads never yielded to the victim's writes")
			}
		}},
		{"the victim's connection, with the attacker's ServiceAccount, bound in the attacker's namespace", func(t *testing.T) {
			// The attacker grants its ServiceAccount every command on
			// "reports", a name both tenants' connections have, in the
			// only namespace where it may make RoleBindings: its own.
			sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: attacker.ns, Name: "intruder"}}
			must(t, k8s.Create(ctx, sa))
			must(t, k8s.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: attacker.ns, Name: "everything"},
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{"sftpgate.dev"}, Resources: []string{"sftpconnections/commands"}, Verbs: []string{"*"}}}}))
			must(t, k8s.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: attacker.ns, Name: "everything"},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "everything"},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: attacker.ns, Name: sa.Name}}}))
			tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}}}
			must(t, k8s.SubResource("token").Create(ctx, sa, tr))
			// Its own connection answers it, so the token works.
			testkit.EventuallyFound(t, "the attacker's ServiceAccount on its own connection is answered", func() (bool, string) {
				status, _ := testhttp.PostJSON(t, gatewayURL+"/"+attacker.slug+"/stat", tr.Status.Token, `{"path": "."}`)
				return status == http.StatusOK, fmt.Sprint(status)
			})
			for _, command := range []string{"stat", "read", "write"} {
				status, body := testhttp.PostJSON(t, gatewayURL+"/"+victim.slug+"/"+command, tr.Status.Token, `{"path": "x", "file": {"text": "x"}}`)
				if status != http.StatusNotFound || !strings.Contains(body, "connection_not_found") {
					t.Errorf("%s on the victim's slug: %d %s, want 404 connection_not_found", command, status, body)
				}
			}
		}},
		{"the victim's other folders, with a key the victim limited to /incoming/ and gave the attacker", func(t *testing.T) {
			must(t, os.MkdirAll(filepath.Join(victim.sshd.Dir, "incoming"), 0o755))
			must(t, os.WriteFile(filepath.Join(victim.sshd.Dir, "private.txt"), []byte("private"), 0o644))
			for _, p := range []string{"incoming", "private.txt"} {
				must(t, os.Chown(filepath.Join(victim.sshd.Dir, p), victim.sshd.UID, victim.sshd.GID))
			}
			status, page := victim.ui.Form(t, "/keys", url.Values{"connection": {victim.uiConn}, "expires": {"30d"}, "paths": {"/incoming/"}})
			token := regexp.MustCompile(`sgk_[A-Za-z0-9_]+`).FindString(page)
			if status != http.StatusOK || token == "" {
				t.Fatalf("the victim makes a key limited to /incoming/: %d", status)
			}
			var conn v1alpha1.SftpConnection
			must(t, k8s.Get(ctx, client.ObjectKey{Namespace: victim.ns, Name: victim.uiConn}, &conn))
			endpoint := gatewayURL + "/" + cmp.Or(conn.Status.Slug, conn.EffectiveSlug()) + "/"
			testkit.EventuallyFound(t, "a write to the key's own folder", func() (bool, string) {
				status, _ := testhttp.PostJSON(t, endpoint+"write", token, `{"path": "incoming/hello.txt", "file": {"text": "hi"}}`)
				return status == http.StatusOK, fmt.Sprint(status)
			})
			for _, attempt := range []struct{ command, body string }{
				{"read", `{"path": "private.txt"}`},
				{"read", `{"path": "incoming/../private.txt"}`},
				{"list", `{"path": "/"}`},
				{"symlink", `{"path": "incoming/way-out", "target": "/"}`},
				{"rename", `{"from": "private.txt", "to": "incoming/private.txt"}`},
				{"copy", `{"from": "private.txt", "to": "incoming/private.txt"}`},
				{"write", `{"path": "private.txt", "file": {"text": "overwritten"}}`},
			} {
				status, body := testhttp.PostJSON(t, endpoint+attempt.command, token, attempt.body)
				if status != http.StatusForbidden || !strings.Contains(body, "path_not_allowed") {
					t.Errorf("%s %s: %d %s, want 403 path_not_allowed", attempt.command, attempt.body, status, body)
				}
			}
			if b, err := os.ReadFile(filepath.Join(victim.sshd.Dir, "private.txt")); err != nil || string(b) != "private" {
				t.Errorf("the victim's private file: %q %v", b, err)
			}
			// The victim sees when the key it gave out was last used.
			testkit.Eventually(t, "the keys page shows the key's last use", func() bool {
				_, list := victim.ui.Get(t, "/keys")
				return regexp.MustCompile(`<td data-label="Last used">(just now|\d+ seconds ago)</td>`).MatchString(list)
			})
		}},
		{"the victim's files outside a key it limited to /scoped/ and gave the attacker, racing renames against reads and writes", func(t *testing.T) {
			scoped := filepath.Join(victim.sshd.Dir, conformance.ScopedPath)
			must(t, os.Mkdir(scoped, 0o755))
			must(t, os.Chown(scoped, victim.sshd.UID, victim.sshd.GID))
			status, page := victim.ui.Form(t, "/keys", url.Values{"connection": {victim.uiConn}, "expires": {"30d"}, "paths": {conformance.ScopedPath}})
			token := regexp.MustCompile(`sgk_[A-Za-z0-9_]+`).FindString(page)
			if status != http.StatusOK || token == "" {
				t.Fatalf("the victim makes a key limited to %s: %d", conformance.ScopedPath, status)
			}
			var conn v1alpha1.SftpConnection
			must(t, k8s.Get(ctx, client.ObjectKey{Namespace: victim.ns, Name: victim.uiConn}, &conn))
			endpoint := gatewayURL + "/" + cmp.Or(conn.Status.Slug, conn.EffectiveSlug())
			testkit.EventuallyFound(t, "a stat of the key's own folder", func() (bool, string) {
				status, _ := testhttp.PostJSON(t, endpoint+"/stat", token, `{"path": "scoped"}`)
				return status == http.StatusOK, fmt.Sprint(status)
			})
			conformance.Race(t, conformance.Target{URL: endpoint, ScopedToken: token, Dir: victim.sshd.Dir, UID: victim.sshd.UID, GID: victim.sshd.GID,
				MaxInFlight: maxRequestsPerNamespace})
		}},
		{"the audit trail: each namespace's records reach its own sink and Activity page only", func(t *testing.T) {
			// The attacker's sink at the cluster's Service range: refused
			// at the dial, like any private address; then its own.
			theirs := attackersAuditSink
			refusedReason(t, theirs, v1alpha1.ReasonSinkNotAllowed)
			theirs.Spec.Sink.URI = attackerAudit.URL
			must(t, k8s.Update(ctx, theirs))
			victim.writes(t, "audited")
			attacker.writes(t, "audited")
			for _, c := range []struct {
				tn   *tenant
				sink *testsink.Sink
			}{{victim, victimAudit}, {attacker, attackerAudit}} {
				testkit.EventuallyFound(t, c.tn.ns+"'s sink gets a record of its write", func() (bool, string) {
					records := c.sink.AuditRecords(t)
					return slices.ContainsFunc(records, func(r audit.Record) bool {
						return r.Action == "gateway.write" && slices.ContainsFunc(r.Paths, func(p string) bool { return strings.HasSuffix(p, "-audited") })
					}), fmt.Sprintf("%d records", len(records))
				})
				records := c.sink.AuditRecords(t)
				for _, r := range records {
					if r.Namespace != c.tn.ns {
						t.Fatalf("%s's sink got a record of %s: %s", c.tn.ns, r.Namespace, r)
					}
				}
				for _, rep := range audit.Verify(records) {
					if !rep.Whole() {
						t.Errorf("%s's sink: chain %+v", c.tn.ns, rep)
					}
				}
			}
			status, body := attacker.ui.Get(t, "/activity?format=jsonl")
			exported, _, err := audit.Read(strings.NewReader(body))
			must(t, err)
			if status != http.StatusOK || len(exported) == 0 {
				t.Fatalf("the attacker's export: %d, %d records", status, len(exported))
			}
			for _, r := range exported {
				if r.Namespace != attacker.ns {
					t.Fatalf("the attacker's Activity export has a record of %s", r.Namespace)
				}
			}
		}},
		{"a huge and a binary X-Request-Id through the victim's share link", func(t *testing.T) {
			link := shareLinkURL(t, victim, url.Values{"name": {"hostile-ids"}, "path": {"/"}, "mode": {"Download"}, "expires": {"1d"}})
			sendHostileIDs(t, http.StatusOK, func(id string) int {
				status, _ := testhttp.Raw(t, http.MethodGet, link, "", "X-Request-Id", id)
				return status
			})
			trailHolds(t, victim, victimAudit, "after-hostile-share-ids", func(r audit.Record) bool {
				return r.Action == "webui.share.open" && r.Actor.Name == "hostile-ids"
			})
		}},
		{"a huge and a binary X-Request-Id as a failed log-in to the victim's email", func(t *testing.T) {
			form := url.Values{"email": {victim.ui.Email}, "password": {"not the password"}}.Encode()
			sendHostileIDs(t, http.StatusUnauthorized, func(id string) int {
				status, _ := testhttp.Raw(t, http.MethodPost, uiURL+"/login", form, "Content-Type", "application/x-www-form-urlencoded", "X-Request-Id", id)
				return status
			})
			trailHolds(t, victim, victimAudit, "after-hostile-login-ids", func(r audit.Record) bool {
				return r.Action == "webui.login" && r.Actor.Name == victim.ui.Email && r.Result != audit.ResultOK
			})
		}},
		{"the victim's key", func(t *testing.T) {
			if victim.uiKey == "" {
				t.Fatal("the victim's web UI key was not found")
			}
			if status, _ := attacker.ui.Get(t, "/keys/"+victim.uiKey+"/created"); status != http.StatusNotFound {
				t.Errorf("GET: %d, want 404", status)
			}
			if status, _ := attacker.ui.Form(t, "/keys/"+victim.uiKey+"/revoke", nil); status != http.StatusNotFound {
				t.Errorf("revoke: %d, want 404", status)
			}
			if status, _ := attacker.ui.Get(t, "/keys/"+victim.uiKey+"/revoke"); status != http.StatusNotFound {
				t.Errorf("asking to revoke: %d, want 404", status)
			}
		}},
		{"the victim's share link and member, through the attacker's web UI", func(t *testing.T) {
			shareLinkURL(t, victim, url.Values{"name": {"not-yours"}, "path": {"/"}, "mode": {"Download"}, "expires": {"1d"}})
			member := testwebui.NewEmail(t)
			addMember(t, victim.ui, "person", member, "viewer")
			binding := memberBinding(t, victim.ns, accountUser(member))
			for _, path := range []string{"/shares/not-yours/delete", "/members/" + binding + "/remove"} {
				if status, page := attacker.ui.Get(t, path); status != http.StatusNotFound || strings.Contains(page, member) {
					t.Errorf("asking %s: %d, want 404", path, status)
				}
				if status, _ := attacker.ui.Form(t, path, nil); status != http.StatusNotFound {
					t.Errorf("posting %s: %d, want 404", path, status)
				}
			}
			must(t, k8s.Get(ctx, client.ObjectKey{Namespace: victim.ns, Name: "not-yours"}, &v1alpha1.ShareLink{}))
			must(t, k8s.Get(ctx, client.ObjectKey{Namespace: victim.ns, Name: binding}, &rbacv1.RoleBinding{}))
		}},
		{"the victim's files outside a share link it gave the attacker, through .. and a symlink", func(t *testing.T) {
			shared := filepath.Join(victim.sshd.Dir, "shared")
			must(t, os.MkdirAll(shared, 0o755))
			must(t, os.WriteFile(filepath.Join(shared, "for-the-partner.csv"), []byte("shared"), 0o644))
			must(t, os.Symlink(victim.sshd.Dir, filepath.Join(shared, "escape")))
			link := shareLinkURL(t, victim, url.Values{"name": {"for-attacker"}, "path": {"/shared"}, "mode": {"Download"}, "expires": {"1d"}})
			secret := "from-" + victim.ns + "-setup"
			if status, body := fetch(t, link+"?path=/for-the-partner.csv&download=1"); status != http.StatusOK || body != "shared" {
				t.Fatalf("the link's own file: %d %q", status, body)
			}
			for _, p := range []string{"/../" + secret, "/escape/" + secret, "/escape/../" + secret} {
				if status, body := fetch(t, link+"?download=1&path="+url.QueryEscape(p)); status == http.StatusOK {
					t.Errorf("%s through the link: %d %q", p, status, body)
				}
			}
			for _, p := range []string{"/escape", "/.."} {
				if _, body := fetch(t, link+"?path="+url.QueryEscape(p), "Accept", "text/html"); strings.Contains(body, secret) {
					t.Errorf("listing %s through the link shows the victim's other files", p)
				}
			}
		}},
		{"a share link of the victim's, forged or named in the attacker's namespace", func(t *testing.T) {
			link := shareLinkURL(t, attacker, url.Values{"name": {"own"}, "path": {"/"}, "mode": {"Download"}, "expires": {"1d"}})
			base, token, _ := strings.Cut(link, "/s/")
			_, secret, _ := strings.Cut(strings.TrimPrefix(token, "sgs_"), "_")
			locator := base64.RawURLEncoding.EncodeToString([]byte(victim.ns + "/for-attacker"))
			for what, forged := range map[string]string{
				"the attacker's secret on the victim's link": "sgs_" + locator + "_" + secret,
				"a made-up secret on the victim's link":      "sgs_" + locator + "_" + strings.Repeat("A", 52),
				"a link in sftpgate's own namespace":         "sgs_" + base64.RawURLEncoding.EncodeToString([]byte(framework.Namespace+"/x")) + "_" + secret,
			} {
				if status, _ := fetch(t, base+"/s/"+forged); status != http.StatusNotFound {
					t.Errorf("%s: %d, want 404", what, status)
				}
			}
			// A ShareLink of the attacker's naming the victim's connection.
			token = "sgs_" + base64.RawURLEncoding.EncodeToString([]byte(attacker.ns+"/reach")) + "_" + strings.Repeat("B", 52)
			must(t, k8s.Create(ctx, &v1alpha1.ShareLink{ObjectMeta: metav1.ObjectMeta{Namespace: attacker.ns, Name: "reach"},
				Spec: v1alpha1.ShareLinkSpec{Connection: victim.uiConn, Path: "/", TokenSHA256: apitoken.Hash(token)}}))
			if status, body := fetch(t, base+"/s/"+token+"?path=/from-"+victim.ns+"-setup&download=1"); status == http.StatusOK {
				t.Errorf("the attacker's link to the victim's connection: %d %q", status, body)
			}
		}},
		{"the victim's team, as the holder of an unverified account of the email the victim added", func(t *testing.T) {
			// The attacker signed up with a password: no one vouched for
			// its email, so the victim's grant to that email is not its.
			addMember(t, victim.ui, "person", attacker.ui.Email, "viewer")
			if _, body := attacker.ui.Get(t, "/teams"); strings.Contains(body, victim.ui.Email) {
				t.Error("an unverified account lists the team its email was added to")
			}
			if status, _ := attacker.ui.Form(t, "/teams", url.Values{"namespace": {victim.ns}}); status != http.StatusNotFound {
				t.Errorf("an unverified account switches to the team its email was added to: %d, want 404", status)
			}
			if status, _ := attacker.ui.Get(t, "/connections/"+victim.uiConn+"/files?path=%2F"); status != http.StatusNotFound {
				t.Errorf("an unverified account browses the team's files: %d, want 404", status)
			}
		}},
		{"the victim's team, as its viewer trying an editor's and an admin's actions", func(t *testing.T) {
			// As if the operator vouched for the attacker's email (sftpgate
			// webui add-account does): the victim's grant is now its.
			verifyEmail(t, attacker.ui.Email)
			addMember(t, victim.ui, "person", attacker.ui.Email, "viewer")
			if _, body := attacker.ui.Get(t, "/teams"); !strings.Contains(body, victim.ui.Email) {
				t.Fatal("the victim's team is not among the attacker's")
			}
			if status, body := attacker.ui.Form(t, "/teams", url.Values{"namespace": {victim.ns}}); status != http.StatusOK || !strings.Contains(body, victim.uiConn) {
				t.Fatalf("switching to the victim's team: %d", status)
			}
			conn := "/connections/" + victim.uiConn
			if status, _ := attacker.ui.Get(t, conn+"/files?path=%2F"); status != http.StatusOK {
				t.Fatalf("a viewer browses the team's files: %d", status)
			}
			upload, err := http.NewRequest(http.MethodPost, attacker.ui.Base+conn+"/uploads/", nil)
			must(t, err)
			upload.Header.Set("Sec-Fetch-Site", "same-origin")
			upload.Header.Set("Tus-Resumable", "1.0.0")
			upload.Header.Set("Upload-Length", "1")
			upload.Header.Set("Upload-Metadata", "filename "+base64.StdEncoding.EncodeToString([]byte("/planted")))
			for what, status := range map[string]int{
				"create a folder":       first(attacker.ui.Form(t, conn+"/files/mkdir", url.Values{"dir": {"/"}, "name": {"planted"}})),
				"delete a file":         first(attacker.ui.Form(t, conn+"/files/delete", url.Values{"path": {"/from-" + victim.ns + "-setup"}})),
				"rename a file":         first(attacker.ui.Form(t, conn+"/files/rename", url.Values{"path": {"/from-" + victim.ns + "-setup"}, "name": {"planted"}})),
				"upload":                first(attacker.ui.Do(t, upload)),
				"watch a folder":        first(attacker.ui.Form(t, conn+"/watches", url.Values{"path": {"/"}, "sink": {"http://127.0.0.1:9"}, "events": {"created"}})),
				"copy files":            first(attacker.ui.Form(t, "/transfers", url.Values{"from": {victim.uiConn}, "path": {"/"}, "to": {victim.uiConn}, "folder": {"/planted"}})),
				"delete the connection": first(attacker.ui.Form(t, conn+"/delete", nil)),
				"edit the connection":   first(attacker.ui.Form(t, conn+"/edit", url.Values{"host": {"127.0.0.1"}})),
				"make a key":            first(attacker.ui.Form(t, "/keys", url.Values{"connection": {victim.uiConn}, "expires": {"30d"}})),
				"list the keys":         first(attacker.ui.Get(t, "/keys")),
				"make itself an admin":  first(attacker.ui.Form(t, "/members", url.Values{"kind": {"person"}, "name": {attacker.ui.Email}, "role": {"admin"}})),
				"read the activity":     first(attacker.ui.Get(t, "/activity")),
				"rename the team":       first(attacker.ui.Form(t, "/members/team-name", url.Values{"team": {"Planted"}})),
			} {
				if status != http.StatusForbidden {
					t.Errorf("a viewer may %s: %d, want 403", what, status)
				}
			}
			if _, err := os.Stat(filepath.Join(victim.sshd.Dir, "planted")); err == nil {
				t.Error("a viewer planted a file in the team's server")
			}
			var b rbacv1.RoleBinding
			must(t, k8s.Get(ctx, client.ObjectKey{Namespace: victim.ns, Name: memberBinding(t, victim.ns, accountUser(attacker.ui.Email))}, &b))
			if b.RoleRef.Name != "sftpgate-team-viewer" {
				t.Errorf("the viewer's role became %s", b.RoleRef.Name)
			}
			if status, _ := attacker.ui.Form(t, "/teams", url.Values{"namespace": {hoarder.ns}}); status != http.StatusNotFound {
				t.Errorf("switching to a team it is no member of: %d, want 404", status)
			}
			// Making a team of its own, the attacker (who has one) gets no
			// other: not the victim's, which it acts in.
			if status, _ := attacker.ui.Form(t, "/teams/own", nil); status != http.StatusOK {
				t.Errorf("asking for a team of its own, again: %d", status)
			}
			var owner rbacv1.RoleBinding
			must(t, k8s.Get(ctx, client.ObjectKey{Namespace: victim.ns, Name: "sftpgate-owner"}, &owner))
			if !strings.HasSuffix(owner.Subjects[0].Name, ":"+victim.ui.Email) || owner.Annotations["sftpgate.dev/team-name"] != "" {
				t.Errorf("the victim's team changed owner or name: %v %v", owner.Subjects, owner.Annotations)
			}
		}},
		{"the victim's team, as a member the victim removed", func(t *testing.T) {
			addMember(t, victim.ui, "person", attacker.ui.Email, "editor")
			if status, _ := attacker.ui.Form(t, "/teams", url.Values{"namespace": {victim.ns}}); status != http.StatusOK {
				t.Fatalf("switching to the victim's team: %d", status)
			}
			conn := "/connections/" + victim.uiConn
			if status, _ := attacker.ui.Form(t, conn+"/files/mkdir", url.Values{"dir": {"/"}, "name": {"by-the-editor"}}); status != http.StatusOK {
				t.Fatalf("an editor makes a folder: %d", status)
			}
			binding := memberBinding(t, victim.ns, accountUser(attacker.ui.Email))
			if status, _ := victim.ui.Form(t, "/members/"+binding+"/remove", nil); status != http.StatusOK {
				t.Fatalf("the owner removes the member: %d", status)
			}
			// The next request, at once: no cache holds the old answer.
			if status, _ := attacker.ui.Form(t, conn+"/files/mkdir", url.Values{"dir": {"/"}, "name": {"planted"}}); status != http.StatusNotFound {
				t.Errorf("a removed member makes a folder: %d, want 404 (back in its own team)", status)
			}
			if _, err := os.Stat(filepath.Join(victim.sshd.Dir, "planted")); err == nil {
				t.Error("a removed member planted a folder")
			}
			if _, body := attacker.ui.Get(t, "/connections"); strings.Contains(body, victim.uiConn) {
				t.Error("a removed member still sees the team's connection")
			}
			if status, _ := attacker.ui.Form(t, "/teams", url.Values{"namespace": {victim.ns}}); status != http.StatusNotFound {
				t.Errorf("a removed member switches back to the team: %d, want 404", status)
			}
		}},
		{"the team switcher of a person whom a hundred strangers add to their teams", func(t *testing.T) {
			// A person whose email is verified (as a provider's sign-in
			// makes it), whom strangers' password sign-ups each make a
			// member of their team: as many as one person's index once
			// held in all.
			person := newClient(t)
			person.SignUp(t)
			verifyEmail(t, person.Email)
			var strangers []string
			for range 100 {
				stranger := newClient(t)
				stranger.SignUp(t)
				addMember(t, stranger, "person", person.Email, "viewer")
				strangers = append(strangers, stranger.Email)
			}
			// The victim's team, and the attacker's (its email verified
			// in a row above), still reach the person's switcher, and a
			// switch to them holds.
			addMember(t, victim.ui, "person", person.Email, "viewer")
			addMember(t, attacker.ui, "person", person.Email, "viewer")
			_, body := person.Get(t, "/teams")
			switcher := map[string]string{} // each team's entry, by its owner's email
			for _, entry := range strings.Split(body, "<li ")[1:] {
				for _, email := range append([]string{victim.ui.Email, attacker.ui.Email}, strangers...) {
					if strings.Contains(entry, ">"+email+"<") {
						switcher[email] = entry
					}
				}
			}
			for _, tn := range []*tenant{victim, attacker} {
				if _, ok := switcher[tn.ui.Email]; !ok {
					t.Errorf("%s's team is not in the person's switcher", tn.ui.Email)
				}
				if status, body := person.Form(t, "/teams", url.Values{"namespace": {tn.ns}}); status != http.StatusOK || !strings.Contains(body, tn.uiConn) {
					t.Errorf("switching to %s's team: %d", tn.ui.Email, status)
				}
			}
			// Teams named by emails no one vouched for are marked so.
			unmarked := slices.DeleteFunc(append([]string{victim.ui.Email}, strangers...), func(email string) bool {
				return strings.Contains(switcher[email], "email not verified")
			})
			if len(unmarked) > 0 {
				t.Errorf("%d of %d teams whose owners' emails are not verified are not marked so, %s's first", len(unmarked), len(strangers)+1, unmarked[0])
			}
			if strings.Contains(switcher[attacker.ui.Email], "email not verified") {
				t.Error("the team of a verified email is marked as not verified")
			}
			// A membership made some other way (GitOps), which no index
			// names: RBAC alone decides, and the switch holds.
			must(t, k8s.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: hoarder.ns, Name: "by-gitops"},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "sftpgate-team-viewer"},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: accountUser(person.Email)}}}))
			if status, body := person.Form(t, "/teams", url.Values{"namespace": {hoarder.ns}}); status != http.StatusOK || !strings.Contains(body, hoarder.uiConn) {
				t.Errorf("switching to a team that made the person a member with kubectl: %d", status)
			}
			// Not a team, or not the person's: not found, either way.
			for _, namespace := range []string{"kube-system", strings.Repeat("x", 70), "../" + victim.ns} {
				if status, _ := person.Form(t, "/teams", url.Values{"namespace": {namespace}}); status != http.StatusNotFound {
					t.Errorf("switching to %q: %d, want 404", namespace, status)
				}
			}
		}},
	}
	for _, row := range rows {
		t.Run(row.name, row.attack)
	}
	// Nothing crossed: each server holds only its own tenant's files.
	for _, tn := range []*tenant{victim, attacker} {
		entries, err := os.ReadDir(tn.sshd.Dir)
		must(t, err)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "from-") && !strings.HasPrefix(e.Name(), "from-"+tn.ns+"-") || e.Name() == "planted" {
				t.Errorf("%s's server holds %s", tn.ns, e.Name())
			}
		}
	}
	var key v1alpha1.ApiKey
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: attacker.ns, Name: "copied"}, &key))
	if meta.IsStatusConditionTrue(key.Status.Conditions, v1alpha1.ConditionReady) {
		t.Error("the attacker's copy of the victim's hash is Ready")
	}
}

// storedFor is the bytes sftpgate stores for namespace, as its budget
// counts them.
func storedFor(t *testing.T, namespace string) int64 {
	t.Helper()
	n, err := (&storedbytes.Budget{Client: k8s, Namespace: framework.Namespace}).Used(context.Background(), namespace)
	must(t, err)
	return n
}

// gatewayMetric reads a metric of gateway's.
func gatewayMetric(t *testing.T, gateway *framework.Process, name string) float64 {
	t.Helper()
	v, err := gateway.Metric(context.Background(), name)
	must(t, err)
	return v
}

// first is the status of a UI client's answer.
func first(status int, _ string) int { return status }

// verifyEmail marks the account of email as one whose email an operator
// vouched for.
func verifyEmail(t *testing.T, email string) {
	t.Helper()
	var list corev1.SecretList
	must(t, k8s.List(context.Background(), &list, client.InNamespace(testwebui.AccountsNamespace)))
	for i := range list.Items {
		if s := &list.Items[i]; string(s.Data["email"]) == email {
			s.Data["emailVerified"] = []byte("true")
			must(t, k8s.Update(context.Background(), s))
			return
		}
	}
	t.Fatalf("no account of %s", email)
}
