package sftpdial

import (
	"bytes"
	"io"
	"net"
	"testing"

	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
)

func TestBatchConnSendsEverythingInOrder(t *testing.T) {
	client, server := net.Pipe()
	b := newBatchConn(client)
	defer func() { _ = b.Close() }()
	var want bytes.Buffer
	go func() {
		for i := range 1000 {
			p := bytes.Repeat([]byte{byte(i)}, 1+i%700)
			want.Write(p)
			if _, err := b.Write(p); err != nil {
				t.Error(err)
				return
			}
		}
		_ = b.Close()
	}()
	got, _ := io.ReadAll(server)
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("received %d bytes, not the %d written in order", len(got), want.Len())
	}
}

func TestBatchConnReportsAWriteError(t *testing.T) {
	client, server := net.Pipe()
	b := newBatchConn(client)
	defer func() { _ = b.Close() }()
	_ = server.Close()
	// The first writes may be queued before the socket's error shows.
	testkit.Eventually(t, "a write to a closed peer fails", func() bool {
		_, err := b.Write([]byte("x"))
		return err != nil
	})
}
