package dev

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testftpd"
)

// ftpsName is the demo FTPS server's FtpConnection, and its slug.
const ftpsName = "demo-ftps"

// startDemoFTPS runs Debian's vsftpd as the demo FTPS server (explicit
// TLS), where it can: vsftpd logs a user in only as root. Its files are
// in a folder of its own under the system's temporary directory, which
// the user it logs in can reach (the data directory may be below a home
// only root may enter); stop removes them. why says why there is none.
func startDemoFTPS(dataDir string) (s *testftpd.Server, stop func(), why string) {
	files, err := os.MkdirTemp("", "sftpgate-demo-ftps-")
	if err != nil {
		return nil, nil, err.Error()
	}
	s, err = testftpd.Run(filepath.Join(dataDir, "ftps-conf"), files)
	if err != nil {
		_ = os.RemoveAll(files)
		return nil, nil, err.Error()
	}
	return s, func() { s.Stop(); _ = os.RemoveAll(files) }, ""
}

// createFTPSConnection makes the demo FtpConnection to s, its
// certificate (new at each start) pinned, served at the gateway.
func createFTPSConnection(ctx context.Context, k8s client.Client, s *testftpd.Server) error {
	conn, secret := s.Connection(demoNamespace, ftpsName)
	want := conn.Spec
	want.Slug = ftpsName
	if _, err := controllerutil.CreateOrUpdate(ctx, k8s, secret, func() error {
		secret.Data = map[string][]byte{v1alpha1.SecretKeyPassword: []byte(s.Password)}
		return nil
	}); err != nil {
		return err
	}
	if _, err := controllerutil.CreateOrUpdate(ctx, k8s, conn, func() error {
		conn.Spec = want
		return nil
	}); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var got v1alpha1.FtpConnection
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(conn), &got); err == nil && isReady(got.Status.Conditions, got.Generation) {
			return nil
		} else if ready := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the demo FTPS connection is not Ready: %+v", ready)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// printFTPS is the tour's stop at the demo FTPS server, or why there is
// none.
func printFTPS(w io.Writer, values [][2]string, started bool, why string) {
	if !started {
		fmt.Fprintf(w, "\nThe demo FTPS server did not start (%s).\n", why)
		return
	}
	v := map[string]string{}
	for _, kv := range values {
		v[kv[0]] = kv[1]
	}
	fmt.Fprintf(w, `
List the demo FTPS server (vsftpd, explicit TLS, its certificate pinned in
the FtpConnection %s) through the same gateway, as any connection:

  curl -X POST %s/%s/write \
    -H 'Authorization: Bearer %s' \
    -H 'Content-Type: application/json' \
    -d '{"path": "hello.txt", "file": {"text": "Hello, FTPS!"}}'
  kubectl get ftpconnections -n %s
`, ftpsName, v["GATEWAY_URL"], ftpsName, v["DEMO_API_KEY"], demoNamespace)
}
