package dev

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/sftpserver"
	"github.com/sftpgate/sftpgate/hack/fixtures/tests3"
	"github.com/sftpgate/sftpgate/internal/apitoken"
	"github.com/sftpgate/sftpgate/webui/accounts"
)

// The demo's names.
const (
	demoNamespace = "demo"
	demoName      = "demo"
	archiveName   = "archive"
	demoUser      = "demo"
	demoEmail     = "demo@sftpgate.dev"
	// demoViewer signs in with the demo provider only, and is a viewer of
	// the demo team through the group demoViewers.
	demoViewer  = "viewer@sftpgate.dev"
	demoViewers = "demo-viewers"
)

// state is what a restart keeps: the demo's secrets, made once.
type state struct {
	SFTPPassword string `json:"sftpPassword"`
	HostKeyPEM   string `json:"hostKey"`
	DemoToken    string `json:"demoToken"`
	DemoKeyID    string `json:"demoKeyID"`
	DemoPassword string `json:"demoPassword"`
	SessionKey   string `json:"sessionKey"`
	// S3SecretKey is the demo S3 server's (a state.json from before it
	// existed gets one at the next start).
	S3SecretKey string `json:"s3SecretKey,omitempty"`
	// OpenPGP is the demo's key pairs, made once (a state.json from
	// before they existed gets them at the next start).
	OpenPGP *openPGPKeys `json:"openPGP,omitempty"`
}

func loadState(dir string) (*state, error) {
	path := filepath.Join(dir, "state.json")
	var st state
	if raw, err := os.ReadFile(path); err == nil { //nolint:gosec // in the data directory the user chose
		if err := json.Unmarshal(raw, &st); err != nil {
			return nil, fmt.Errorf("%s is damaged (start afresh with --fresh): %w", path, err)
		}
		if st.OpenPGP != nil && st.S3SecretKey != "" {
			return &st, nil
		}
		if st.OpenPGP == nil {
			if st.OpenPGP, err = newOpenPGPKeys(rand.Text()); err != nil {
				return nil, err
			}
		}
		if st.S3SecretKey == "" {
			st.S3SecretKey = rand.Text()
		}
		return &st, st.save(path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		return nil, err
	}
	st = state{SFTPPassword: rand.Text(), HostKeyPEM: string(pem.EncodeToMemory(block)), DemoPassword: rand.Text()[:16],
		SessionKey: rand.Text() + rand.Text(), S3SecretKey: rand.Text()}
	st.DemoToken, st.DemoKeyID = apitoken.NewToken()
	if st.OpenPGP, err = newOpenPGPKeys(rand.Text()); err != nil {
		return nil, err
	}
	return &st, st.save(path)
}

func (st *state) save(path string) error {
	raw, err := json.MarshalIndent(st, "", "  ") //nolint:gosec // the demo's own secrets, kept in a 0600 file on purpose
	if err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o600)
}

func (st *state) hostKey() (ssh.Signer, error) {
	return ssh.ParsePrivateKey([]byte(st.HostKeyPEM))
}

// createDemo makes the demo web UI account, which owns the demo namespace,
// and in it the demo server's Secret, SftpConnection and ApiKey. A restart
// finds them and only points the connection at the server's address.
func (st *state) createDemo(ctx context.Context, k8s client.Client, store *accounts.Store, demo *sftpserver.Server, sftpAddr net.Addr, eventsURL string) error {
	if _, err := store.SignUpWithNamespace(ctx, demoEmail, st.DemoPassword, demoNamespace, true); err != nil && !errors.Is(err, accounts.ErrEmailTaken) {
		return fmt.Errorf("the demo account: %w", err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: demoNamespace, Name: demoName + "-credentials"},
		StringData: map[string]string{v1alpha1.SecretKeyPassword: st.SFTPPassword}}
	key := &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: demoNamespace, Name: demoName},
		Spec: v1alpha1.ApiKeySpec{Token: v1alpha1.TokenSource{SHA256: apitoken.Hash(st.DemoToken), KeyID: st.DemoKeyID}}}
	for _, obj := range []client.Object{secret, key} {
		if err := k8s.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	host, port, err := net.SplitHostPort(sftpAddr.String())
	if err != nil {
		return err
	}
	portNumber, err := strconv.ParseInt(port, 10, 32)
	if err != nil {
		return err
	}
	// The demo connection, and "archive": the same server's archive/
	// folder, for the tour's transfer.
	for _, name := range []string{demoName, archiveName} {
		conn := &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: demoNamespace, Name: name}}
		_, err = controllerutil.CreateOrUpdate(ctx, k8s, conn, func() error {
			conn.Spec.Host, conn.Spec.Port, conn.Spec.Username, conn.Spec.Slug = host, int32(portNumber), demoUser, name //nolint:gosec // parsed as 32 bits
			conn.Spec.Credentials.SecretRef.Name = secret.Name
			conn.Spec.HostKey.Trusted = []string{demo.HostKeyLine()}
			if name == archiveName {
				conn.Spec.RootPath = "/archive"
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	// A watch of incoming/ whose events the event printer prints: polled
	// every 5 seconds, a file reported once a second poll saw it the same.
	watch := &v1alpha1.SftpWatch{ObjectMeta: metav1.ObjectMeta{Namespace: demoNamespace, Name: "incoming"}}
	_, err = controllerutil.CreateOrUpdate(ctx, k8s, watch, func() error {
		watch.Spec.ConnectionRef.Name, watch.Spec.Path = demoName, "/incoming"
		watch.Spec.PollInterval = &metav1.Duration{Duration: 5 * time.Second}
		watch.Spec.Stability.MinAge = &metav1.Duration{}
		watch.Spec.Events = []v1alpha1.WatchEvent{v1alpha1.WatchCreated, v1alpha1.WatchModified, v1alpha1.WatchDeleted}
		watch.Spec.Sink = &v1alpha1.Destination{URI: eventsURL}
		return nil
	})
	if err != nil {
		return err
	}
	// An expectation of incoming/: a report-*.csv every three minutes,
	// by a minute after each window opens; its outcomes print as the
	// watch's events do.
	expectation := &v1alpha1.FileExpectation{ObjectMeta: metav1.ObjectMeta{Namespace: demoNamespace, Name: "reports"}}
	_, err = controllerutil.CreateOrUpdate(ctx, k8s, expectation, func() error {
		spec := &expectation.Spec
		spec.ConnectionRef.Name, spec.Path = demoName, "/incoming"
		spec.Files.Include = []string{"report-*.csv"}
		spec.Schedule.Opens, spec.Schedule.Deadline = "*/3 * * * *", metav1.Duration{Duration: time.Minute}
		spec.PollInterval = &metav1.Duration{Duration: 10 * time.Second}
		spec.Stability.MinAge = &metav1.Duration{}
		spec.Sink = &v1alpha1.Destination{URI: eventsURL}
		return nil
	})
	if err != nil {
		return err
	}
	if err := createDemoViewers(ctx, k8s, store); err != nil {
		return err
	}
	return st.createInbox(ctx, k8s, eventsURL)
}

// createDemoViewers names the demo team and makes the demo provider's
// group demoViewers its viewers, as its Members page would.
func createDemoViewers(ctx context.Context, k8s client.Client, store *accounts.Store) error {
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: demoNamespace, Name: "demo-viewers"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "sftpgate-team-viewer"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: accounts.GroupName(demoViewers)}}}
	if err := k8s.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	team, err := store.RenameTeam(ctx, demoNamespace, "Demo team")
	if err != nil {
		return err
	}
	return store.IndexTeam(ctx, accounts.GroupName(demoViewers), team)
}

// waitReady waits for the demo connection, key and watch to be Ready, so
// that the printed examples work at once.
func waitReady(ctx context.Context, k8s client.Client) error {
	deadline := time.Now().Add(time.Minute)
	for {
		var conn v1alpha1.SftpConnection
		var key v1alpha1.ApiKey
		var watch v1alpha1.SftpWatch
		var store v1alpha1.ObjectStore
		name := client.ObjectKey{Namespace: demoNamespace, Name: demoName}
		connErr, keyErr := k8s.Get(ctx, name, &conn), k8s.Get(ctx, name, &key)
		watchErr := k8s.Get(ctx, client.ObjectKey{Namespace: demoNamespace, Name: "incoming"}, &watch)
		storeErr := k8s.Get(ctx, client.ObjectKey{Namespace: demoNamespace, Name: bucketName}, &store)
		// The watch too, so that a file dropped at once is a change to
		// its first poll, not part of it.
		if connErr == nil && keyErr == nil && watchErr == nil && storeErr == nil && isReady(conn.Status.Conditions, conn.Generation) &&
			isReady(key.Status.Conditions, key.Generation) && isReady(watch.Status.Conditions, watch.Generation) &&
			isReady(store.Status.Conditions, store.Generation) {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if ready := meta.FindStatusCondition(conn.Status.Conditions, v1alpha1.ConditionReady); ready != nil && ready.Status != metav1.ConditionTrue {
				return fmt.Errorf("the demo connection is not Ready: %s: %s", ready.Reason, ready.Message)
			}
			if ready := meta.FindStatusCondition(store.Status.Conditions, v1alpha1.ConditionReady); ready != nil && ready.Status != metav1.ConditionTrue {
				return fmt.Errorf("the demo bucket's ObjectStore is not Ready: %s: %s", ready.Reason, ready.Message)
			}
			return errors.New("the demo connection did not become Ready")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitOpenAPI waits until the API server's OpenAPI documents, which
// kubectl apply validates against, describe sftpgate's kinds, as kubectl
// reads them.
func waitOpenAPI(ctx context.Context, cfg *rest.Config) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	group := "apis/" + v1alpha1.GroupVersion.Group + "/" + v1alpha1.GroupVersion.Version
	deadline := time.Now().Add(2 * time.Minute)
	for {
		paths, err := dc.OpenAPIV3().Paths()
		if err == nil {
			if gv, ok := paths[group]; !ok {
				err = fmt.Errorf("the OpenAPI document does not list %s yet", group)
			} else if _, err = gv.Schema("application/json"); err == nil {
				_, err = dc.OpenAPISchema()
			}
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("kubectl would not validate sftpgate's kinds: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func isReady(conditions []metav1.Condition, generation int64) bool {
	ready := meta.FindStatusCondition(conditions, v1alpha1.ConditionReady)
	return ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == generation
}

// envValues are what dev.env holds, in order.
func envValues(kubeconfig, gatewayURL, webuiURL, eventsURL string, st *state, s3 *tests3.Server) [][2]string {
	abs, err := filepath.Abs(kubeconfig)
	if err != nil {
		abs = kubeconfig
	}
	return [][2]string{
		{"KUBECONFIG", abs},
		{"GATEWAY_URL", gatewayURL},
		{"WEBUI_URL", webuiURL},
		{"OPENAPI_URL", gatewayURL + "/openapi.json"},
		{"DEMO_SLUG", demoName},
		{"DEMO_API_KEY", st.DemoToken},
		{"DEMO_EMAIL", demoEmail},
		{"DEMO_PASSWORD", st.DemoPassword},
		{"EVENTS_URL", eventsURL},
		{"S3_ENDPOINT", "http://" + s3.Endpoint},
		{"AWS_ACCESS_KEY_ID", s3.AccessKey},
		{"AWS_SECRET_ACCESS_KEY", s3.SecretKey},
		{"AWS_REGION", s3.Region},
		{"DEMO_BUCKET_DIR", s3.Path(bucketName, "")},
	}
}

// writeEnv writes values as a file a shell can source.
func writeEnv(path string, values [][2]string) error {
	var b strings.Builder
	b.WriteString("# Written by sftpgate dev; source it: . " + path + "\n")
	for _, kv := range values {
		fmt.Fprintf(&b, "%s='%s'\n", kv[0], strings.ReplaceAll(kv[1], "'", `'\''`))
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

func printWelcome(w io.Writer, values [][2]string, envFile string) {
	v := map[string]string{}
	for _, kv := range values {
		v[kv[0]] = kv[1]
	}
	fmt.Fprintf(w, `
sftpgate is running. Ctrl-C stops it; the data stays in %s.

  Gateway   %s   (API docs: %s/docs)
  Web UI    %s   (log in as %s, password %s, or sign in
            with the demo provider as that person or as %s,
            a viewer of the demo team, with the same password)

Write a file through the demo connection, then read it back:

  curl -X POST %s/%s/write \
    -H 'Authorization: Bearer %s' \
    -H 'Content-Type: application/json' \
    -d '{"path": "hello.txt", "file": {"text": "Hello, SFTP!"}}'

  curl -X POST %s/%s/read \
    -H 'Authorization: Bearer %s' \
    -H 'Content-Type: application/json' \
    -d '{"path": "hello.txt"}'

Drop a file into the watched folder incoming/; within ten seconds the
demo watch's event prints here:

  curl -X POST %s/%s/write \
    -H 'Authorization: Bearer %s' \
    -H 'Content-Type: application/json' \
    -d '{"path": "incoming/report.csv", "file": {"text": "id,total\n1,42\n"}}'

The demo expects incoming/report-*.csv every three minutes, by a minute
after each window opens (a FileExpectation). Drop nothing, and within
four minutes a window's missed event prints here; drop a report in the
two minutes after it, and its late event follows within ten seconds:

  curl -X POST %s/%s/write \
    -H 'Authorization: Bearer %s' \
    -H 'Content-Type: application/json' \
    -d '{"path": "incoming/report-1.csv", "file": {"text": "id,total\n1,42\n"}}'

Use kubectl against this control plane:

  export KUBECONFIG=%s
  kubectl get sftpconnections,apikeys,sftpwatches,transfers,fileexpectations -A

Copy incoming/ into the archive connection (the demo server's archive/
folder), server to server; its end prints here too:

  kubectl apply -f hack/dev/demo-transfer.yaml
  kubectl get transfers -n demo -w

Copy incoming/ into the demo bucket (an S3 server on %s; any S3 client
reads it with the keys in dev.env), each object checked by SHA-256:

  kubectl apply -f hack/dev/demo-bucket.yaml
  ls %s/incoming

The bucket is served at the gateway too (its slug: %s), and browsed in
the web UI as the connections are:

  curl -X POST %s/%s/list \
    -H 'Authorization: Bearer %s' \
    -H 'Content-Type: application/json' \
    -d '{"path": "incoming"}'

A partner drops a payroll file encrypted to the demo's OpenPGP key and
signed by theirs into partner/inbox/; the watch there decrypts it into
clear/, checks the signature, files the original in partner/done/, and
the transfer's end prints here:

  curl -X POST %s/%s/write \
    -H 'Authorization: Bearer %s' \
    -H 'Content-Type: application/json' \
    -d "{\"path\": \"partner/inbox/%s\", \"file\": {\"base64\": \"$(base64 -w0 %s)\"}}"

  curl -X POST %s/%s/read \
    -H 'Authorization: Bearer %s' \
    -H 'Content-Type: application/json' \
    -d '{"path": "clear/payroll.csv"}'

All of this, for scripts: . %s
`, filepath.Dir(envFile), v["GATEWAY_URL"], v["GATEWAY_URL"], v["WEBUI_URL"], v["DEMO_EMAIL"], v["DEMO_PASSWORD"], v["DEMO_VIEWER_EMAIL"],
		v["GATEWAY_URL"], v["DEMO_SLUG"], v["DEMO_API_KEY"], v["GATEWAY_URL"], v["DEMO_SLUG"], v["DEMO_API_KEY"],
		v["GATEWAY_URL"], v["DEMO_SLUG"], v["DEMO_API_KEY"], v["GATEWAY_URL"], v["DEMO_SLUG"], v["DEMO_API_KEY"],
		v["KUBECONFIG"], v["S3_ENDPOINT"], v["DEMO_BUCKET_DIR"],
		bucketName, v["GATEWAY_URL"], bucketName, v["DEMO_API_KEY"],
		v["GATEWAY_URL"], v["DEMO_SLUG"], v["DEMO_API_KEY"], tourMessage, filepath.Join(filepath.Dir(envFile), tourMessage),
		v["GATEWAY_URL"], v["DEMO_SLUG"], v["DEMO_API_KEY"], envFile)
}
