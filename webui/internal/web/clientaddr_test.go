package web

import (
	"net/http"
	"testing"
)

func TestClientAddrKey(t *testing.T) {
	c, err := ParseTrustedProxies("10.0.0.0/8, 192.168.1.1")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ remote, forwarded, want string }{
		{"203.0.113.5:1234", "", "203.0.113.5"},
		{"203.0.113.5:1234", "198.51.100.1", "203.0.113.5"}, // not from a proxy: the header is ignored
		{"10.1.2.3:80", "198.51.100.1", "198.51.100.1"},
		{"10.1.2.3:80", "1.1.1.1, 198.51.100.1, 192.168.1.1", "198.51.100.1"}, // the client wrote 1.1.1.1 itself
		{"10.1.2.3:80", "", "10.1.2.3"},
		{"[2001:db8:1:2:3:4:5:6]:443", "", "2001:db8:1:2::/64"},
		{"[::ffff:203.0.113.5]:1", "", "203.0.113.5"},
	} {
		r := &http.Request{RemoteAddr: tc.remote, Header: http.Header{}}
		if tc.forwarded != "" {
			r.Header.Set("X-Forwarded-For", tc.forwarded)
		}
		if got := c.Key(r); got != tc.want {
			t.Errorf("%s with X-Forwarded-For %q: %s, want %s", tc.remote, tc.forwarded, got, tc.want)
		}
	}
	if _, err := ParseTrustedProxies("not-an-address"); err == nil {
		t.Error("a bad --trusted-proxies is accepted")
	}
}
