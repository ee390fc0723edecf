package sftpdial_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/gateway/sftpdial"
	"github.com/sftpgate/sftpgate/hack/testsshd"
)

// BenchmarkDialOpenSSH measures a new SSH connection with its SFTP session
// to a real sshd on loopback: what a cold pool costs a request.
func BenchmarkDialOpenSSH(b *testing.B) {
	server := testsshd.Start(b)
	conn := &v1alpha1.SftpConnection{Spec: v1alpha1.SftpConnectionSpec{
		Host: server.Host, Port: server.Port, Username: testsshd.User,
		HostKey: v1alpha1.HostKeyTrust{Trusted: []string{server.HostKeyLine}},
	}}
	secret := &corev1.Secret{Data: map[string][]byte{v1alpha1.SecretKeyPassword: []byte(server.Password)}}
	target, err := sftpdial.NewTarget(conn, secret)
	if err != nil {
		b.Fatal(err)
	}
	d := &sftpdial.Dialer{}
	for b.Loop() {
		s, err := d.Dial(context.Background(), target)
		if err != nil {
			b.Fatal(err)
		}
		_ = s.Close()
	}
}
