package web

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ClientAddrs tells a request's client address, for rate limits. Behind a
// trusted proxy (an ingress) it is the last address the proxies were told
// of in X-Forwarded-For; a client cannot forge its way past them, since only
// what the proxies appended is read.
type ClientAddrs struct {
	trusted []netip.Prefix
}

// ParseTrustedProxies reads --trusted-proxies: the addresses whose X-Forwarded-For is believed.
func ParseTrustedProxies(list string) (ClientAddrs, error) {
	var c ClientAddrs
	for s := range strings.SplitSeq(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			addr, addrErr := netip.ParseAddr(s)
			if addrErr != nil {
				return c, fmt.Errorf("--trusted-proxies: %q is neither an address nor a CIDR", s)
			}
			p = netip.PrefixFrom(addr, addr.BitLen())
		}
		c.trusted = append(c.trusted, p.Masked())
	}
	return c, nil
}

func (c ClientAddrs) isTrusted(a netip.Addr) bool {
	for _, p := range c.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Key is the bucket of r's client: its address, or for IPv6 its /64, which
// one client usually holds whole.
func (c ClientAddrs) Key(r *http.Request) string {
	addr, ok := c.Addr(r)
	if !ok {
		return r.RemoteAddr
	}
	if addr.Is6() {
		return netip.PrefixFrom(addr, 64).Masked().String()
	}
	return addr.String()
}

// Addr is r's client's address: the connection's, or the last untrusted
// one the trusted proxies forwarded.
func (c ClientAddrs) Addr(r *http.Request) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	addr = addr.Unmap()
	if c.isTrusted(addr) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
			if err != nil {
				break
			}
			addr = hop.Unmap()
			if !c.isTrusted(addr) {
				break
			}
		}
	}
	return addr, true
}
