// Package testhttp has the tests' HTTP helpers: an address for a server a
// test starts, and a command sent as a client would.
package testhttp

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// FreeAddr is a loopback address nothing listens on, for a server the test
// starts next.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// PostJSON posts body with a Bearer token, as the README's curl does, and
// returns the status and the answer.
func PostJSON(t testing.TB, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(raw)
}
