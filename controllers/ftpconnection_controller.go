package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/egress"
	"github.com/sftpgate/sftpgate/internal/ftpdial"
)

// +kubebuilder:rbac:groups=sftpgate.dev,resources=ftpconnections,verbs=get;list;watch
// +kubebuilder:rbac:groups=sftpgate.dev,resources=ftpconnections/status,verbs=get;update;patch

// ftpConnections is the tested kind FtpConnection: its test logs in,
// resolves rootPath to a directory and lists it (which proves passive
// data connections), and records the certificate the server presented.
func ftpConnections(dialer *ftpdial.Dialer) testedKind {
	return testedKind{
		kind: v1alpha1.KindFtpConnection, what: "FTP connection", name: "ftpconnection",
		object: func() testedObject { return &v1alpha1.FtpConnection{} },
		list:   func() client.ObjectList { return &v1alpha1.FtpConnectionList{} },
		test: func(ctx context.Context, obj testedObject, secret *corev1.Secret) testOutcome {
			conn := obj.(*v1alpha1.FtpConnection) //nolint:forcetypeassert // the kind's
			root, err := testFTP(ctx, dialer, conn, secret)
			if err == nil {
				conn.Status.RootPath = root
			}
			return outcomeOf(err, v1alpha1.ReasonFTPUnavailable, func() string {
				return fmt.Sprintf("Logged in to %s as %q (TLS %s); rootPath %s is a directory that lists",
					ftpdial.Address(conn), conn.Spec.Username, conn.Spec.TLS, root)
			})
		},
	}
}

func testFTP(ctx context.Context, dialer *ftpdial.Dialer, conn *v1alpha1.FtpConnection, secret *corev1.Secret) (string, error) {
	target, err := ftpdial.NewTarget(conn, secret)
	if err != nil {
		return "", err
	}
	f, err := dialer.Dial(ctx, target)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	if f.Certificate != nil {
		conn.Status.CertificateSHA256 = ftpdial.Fingerprint(f.Certificate)
	}
	// Closing the session ends a stat or listing that hangs; each read is
	// bounded by the operation timeout, the whole by the shorter timeout.
	timeout := min(conn.Spec.Limits.OperationTimeoutOrDefault(), conn.Spec.Limits.ConnectTimeoutOrDefault())
	opCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer context.AfterFunc(opCtx, func() { _ = f.Close() })()
	root, err := ftpdial.Test(f, conn.Spec.RootPath)
	if err != nil && opCtx.Err() != nil {
		err = &egress.Error{Reason: v1alpha1.ReasonTimeout, Err: err, Message: fmt.Sprintf(
			"%s did not answer within %s after the login", ftpdial.Address(conn), timeout)}
	}
	return root, err
}
