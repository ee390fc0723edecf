package sftpdial

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
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
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The first writes may be queued before the socket's error shows.
		if _, err := b.Write([]byte("x")); err != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("writes to a closed peer keep succeeding")
		}
		time.Sleep(time.Millisecond)
	}
}
