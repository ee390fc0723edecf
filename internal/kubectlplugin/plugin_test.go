package kubectlplugin_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/auditstore"
	"github.com/sftpgate/sftpgate/internal/kubectlplugin"
	"github.com/sftpgate/sftpgate/internal/storedbytes"
	"github.com/sftpgate/sftpgate/test/framework"
)

var (
	k8s        client.Client
	kubeconfig string
)

func TestMain(m *testing.M) {
	os.Exit(framework.MainWithManager(m, 2, func(env *envtest.Environment, c client.Client) {
		k8s = c
		f, err := os.CreateTemp("", "kubeconfig-")
		if err == nil {
			_, err = f.Write(env.KubeConfig)
			_ = f.Close()
		}
		if err != nil {
			panic(err)
		}
		kubeconfig = f.Name()
	}))
}

// plugin runs `kubectl sftpgate args...` as a user of the test control
// plane, and returns what it printed.
func plugin(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out testkit.Log
	err := kubectlplugin.Run(context.Background(), append(args, "--kubeconfig="+kubeconfig), &out)
	return out.String(), err
}

// TestPlugin: status lists what is not Ready, test tests a connection
// now, share makes a link whose printed token opens it, events follows a
// watch, and audit verify checks a namespace's stored trail.
func TestPlugin(t *testing.T) {
	ctx := context.Background()
	ns := testkit.Namespace(t, k8s, "plugin-")
	sshd := testsshd.Start(t)
	testkit.ReadyConnection(t, k8s, ns, "good", sshd.Login())
	bad := &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"}, Spec: v1alpha1.SftpConnectionSpec{
		Host: "127.0.0.1", Port: 1, Username: "u", Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.LocalSecretReference{Name: "good"}}}}
	testkit.Must(t, k8s.Create(ctx, bad))

	t.Run("status", func(t *testing.T) {
		testkit.EventuallyFound(t, "status lists the connection that is not Ready, and only it", func() (bool, string) {
			out, err := plugin(t, "-n", ns, "status") // flags first, as kubectl takes them too
			testkit.Must(t, err)
			return regexp.MustCompile(`(?m)^SftpConnection +`+ns+` +bad +False +ConnectionRefused`).MatchString(out) &&
				!strings.Contains(out, " good "), out
		})
	})
	t.Run("test", func(t *testing.T) {
		out, err := plugin(t, "test", "good", "-n", ns)
		if err != nil || !strings.Contains(out, "Ready: True (Connected)") {
			t.Errorf("test good: %v\n%s", err, out)
		}
		if out, err := plugin(t, "test", "bad", "-n", ns, "--timeout=90s"); err == nil || !strings.Contains(out, "ConnectionRefused") {
			t.Errorf("test bad: %v\n%s", err, out)
		}
	})
	t.Run("share", func(t *testing.T) {
		out, err := plugin(t, "share", "good", "/out", "-n", ns, "--url=https://files.example.com/")
		testkit.Must(t, err)
		m := regexp.MustCompile(`https://files\.example\.com/s/(sgs_\S+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no link printed:\n%s", out)
		}
		var links v1alpha1.ShareLinkList
		testkit.Must(t, k8s.List(ctx, &links, client.InNamespace(ns)))
		sum := sha256.Sum256([]byte(m[1]))
		if len(links.Items) != 1 || links.Items[0].Spec.TokenSHA256 != hex.EncodeToString(sum[:]) || links.Items[0].Spec.Path != "/out" {
			t.Errorf("the link made: %+v", links.Items)
		}
	})
	t.Run("events", func(t *testing.T) {
		w := &v1alpha1.SftpWatch{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "inbox"}, Spec: v1alpha1.SftpWatchSpec{
			ConnectionRef: v1alpha1.ConnectionReference{Name: "good"}, Sink: &v1alpha1.Destination{URI: "http://127.0.0.1:9"}}}
		testkit.Must(t, k8s.Create(ctx, w))
		var out testkit.Log
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- kubectlplugin.Run(runCtx, []string{"events", "inbox", "-n", ns, "--kubeconfig=" + kubeconfig}, &out)
		}()
		testkit.Eventually(t, "the first counts print", func() bool { return strings.Contains(out.String(), "delivered 0 (+0)") })
		testkit.Must(t, k8s.Get(ctx, client.ObjectKeyFromObject(w), w))
		w.Status.Delivered, w.Status.ObservedGeneration = 3, w.Generation
		testkit.Must(t, k8s.Status().Update(ctx, w))
		testkit.EventuallyFound(t, "the deliveries print", func() (bool, string) {
			return strings.Contains(out.String(), "delivered 3 (+3)"), out.String()
		})
		// An event of the watch's, as the worker records them, and one of
		// another object's, which is not printed.
		for _, e := range []struct {
			name, reason string
			regarding    corev1.ObjectReference
		}{
			{"of-another", "NotThisOne", corev1.ObjectReference{Kind: "SftpWatch", Namespace: ns, Name: "other", UID: "another-uid"}},
			{"of-the-watch", "DeliveryFailing", corev1.ObjectReference{Kind: "SftpWatch", Namespace: ns, Name: w.Name, UID: w.UID}},
		} {
			testkit.Must(t, k8s.Create(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: e.name},
				EventTime: metav1.NowMicro(), ReportingController: "sftpgate.dev/worker", ReportingInstance: "worker-0",
				Action: "Deliver", Reason: e.reason, Type: corev1.EventTypeWarning, Note: "the sink refused", Regarding: e.regarding}))
		}
		testkit.EventuallyFound(t, "the watch's event prints", func() (bool, string) {
			return strings.Contains(out.String(), "Warning DeliveryFailing: the sink refused"), out.String()
		})
		if strings.Contains(out.String(), "NotThisOne") {
			t.Errorf("another object's event printed:\n%s", out.String())
		}
		stop()
		testkit.Must(t, <-done)
	})
	t.Run("audit verify", func(t *testing.T) {
		const system = "plugin-system"
		testkit.Must(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: system}}))
		chains := &audit.Chains{Replica: "gateway/test/1"}
		var records []audit.Record
		for range 3 {
			records = append(records, chains.Link(audit.Record{Action: "gateway.write", Actor: audit.Actor{Kind: audit.ActorKey, Name: "ci"},
				Namespace: ns, Result: audit.ResultOK, Time: time.Now()}))
		}
		// Another replica's chain whose first two records were delivered
		// and removed: checked from its oldest stored record.
		older := &audit.Chains{Replica: "gateway/test/2"}
		var recent []audit.Record
		for i := range 5 {
			r := older.Link(audit.Record{Action: "gateway.read", Actor: audit.Actor{Kind: audit.ActorKey, Name: "ci"},
				Namespace: ns, Result: audit.ResultOK, Time: time.Now()})
			if i >= 2 {
				recent = append(recent, r)
			}
		}
		store := &auditstore.Store{Client: k8s, Namespace: system, Budget: &storedbytes.Budget{Client: k8s, Namespace: system}}
		for _, rs := range [][]audit.Record{records, recent} {
			if _, err := store.Keep(ctx, ns, rs); err != nil {
				t.Fatal(err)
			}
		}
		out, err := plugin(t, "audit", "verify", "-n", ns, "--system-namespace="+system)
		if err != nil || !strings.Contains(out, "gateway/test/1: 3 records, 1 to 3: whole") ||
			!strings.Contains(out, "gateway/test/2: 3 records, 3 to 5: from 3 (those before were removed); whole") {
			t.Errorf("audit verify: %v\n%s", err, out)
		}
	})
}
