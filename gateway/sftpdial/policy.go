package sftpdial

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// DefaultDeniedNetworks is what connections may not reach unless an operator
// says otherwise: link-local and cloud metadata endpoints (credentials of the
// node live there), loopback (the gateway's own pod), and addresses that are
// never a real SFTP server. Private ranges are allowed, since that is where
// most SFTP servers live; add "private" to deny them too.
const DefaultDeniedNetworks = "link-local,metadata,loopback,unspecified,multicast"

// namedNetworks are the words a deny list may use instead of CIDRs.
var namedNetworks = map[string][]string{
	"link-local":  {"169.254.0.0/16", "fe80::/10"},
	"metadata":    {"169.254.169.254/32", "100.100.100.200/32", "fd00:ec2::254/128"},
	"loopback":    {"127.0.0.0/8", "::1/128"},
	"private":     {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7"},
	"unspecified": {"0.0.0.0/8", "::/128"},
	"multicast":   {"224.0.0.0/4", "ff00::/8"},
}

// Policy says which networks a dial may not reach. It is checked on the
// address actually dialled, after name resolution, so a host name that
// resolves to a denied address (or is re-pointed there later) is refused.
type Policy struct {
	denied []deniedNetwork
}

type deniedNetwork struct {
	prefix netip.Prefix
	name   string // the word or CIDR the operator wrote
}

// ParsePolicy reads a comma-separated deny list of CIDRs and the names
// link-local, metadata, loopback, private, unspecified and multicast.
// An empty list denies nothing.
func ParsePolicy(list string) (Policy, error) {
	var p Policy
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		cidrs, named := namedNetworks[item]
		if !named {
			cidrs = []string{item}
		}
		for _, c := range cidrs {
			prefix, err := netip.ParsePrefix(c)
			if err != nil {
				return Policy{}, fmt.Errorf("denied network %q is neither a CIDR nor one of %s", item, strings.Join(networkNames(), ", "))
			}
			p.denied = append(p.denied, deniedNetwork{prefix: prefix.Masked(), name: item})
		}
	}
	return p, nil
}

func networkNames() []string {
	names := make([]string, 0, len(namedNetworks))
	for n := range namedNetworks {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// nat64 is the well-known NAT64 prefix (RFC 6052), whose addresses carry an
// IPv4 address in their last four bytes: 64:ff9b::a9fe:a9fe reaches
// 169.254.169.254 through a NAT64 gateway.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// Check returns a *DeniedError when addr, or the IPv4 address it carries
// (IPv4-mapped or NAT64), lies in a denied network.
func (p Policy) Check(addr netip.Addr) error {
	addr = addr.WithZone("").Unmap()
	candidates := []netip.Addr{addr}
	if nat64.Contains(addr) {
		b := addr.As16()
		candidates = append(candidates, netip.AddrFrom4([4]byte(b[12:])))
	}
	for _, a := range candidates {
		for _, d := range p.denied {
			if d.prefix.Contains(a) {
				return &DeniedError{Addr: addr, Network: d.name}
			}
		}
	}
	return nil
}

// DeniedError is a dial refused by the Policy.
type DeniedError struct {
	Addr    netip.Addr
	Network string
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("address %s is in a network connections may not reach (%s)", e.Addr, e.Network)
}
