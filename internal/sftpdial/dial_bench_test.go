package sftpdial_test

import (
	"context"
	"testing"

	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/internal/sftpdial"
)

// BenchmarkDialOpenSSH measures a new SSH connection with its SFTP session
// to a real sshd on loopback: what a cold pool costs a request.
func BenchmarkDialOpenSSH(b *testing.B) {
	server := testsshd.Start(b)
	target := testsftp.Target(b, server.Host, server.Port, testsshd.User, server.Password, server.HostKeyLine)
	d := &sftpdial.Dialer{}
	for b.Loop() {
		s, err := d.Dial(context.Background(), target)
		if err != nil {
			b.Fatal(err)
		}
		_ = s.Close()
	}
}
