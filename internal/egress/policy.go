package egress

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"syscall"
)

// DefaultDeniedNetworks is what connections may not reach unless an operator
// says otherwise: link-local and cloud metadata endpoints (credentials of the
// node live there), loopback (the gateway's own pod), and addresses that are
// never a real SFTP server. Private ranges are allowed, since that is where
// most SFTP servers live; add "private" to deny them too.
const DefaultDeniedNetworks = "link-local,metadata,loopback,unspecified,multicast"

// DefaultAccountDeniedNetworks is what the connections and sinks of web UI
// accounts (strangers who signed up) may not reach besides
// DefaultDeniedNetworks: private ranges, where the cluster's own services
// and the operator's other servers live.
const DefaultAccountDeniedNetworks = "private"

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
// Web UI accounts' dials follow the stricter policy ForAccounts gives.
type Policy struct {
	denied   []deniedNetwork
	accounts []deniedNetwork
	// plaintextRefused: this policy's dials may not send credentials in
	// the clear (an FTP connection with tls None); accountsPlaintext
	// lets accounts' do.
	plaintextRefused, accountsPlaintext bool
}

type deniedNetwork struct {
	prefix netip.Prefix
	name   string // the word or CIDR the operator wrote
}

// WithAccounts is p with list (as ParsePolicy reads it; "none" for no
// more than p denies) denied to the dials of web UI accounts as well.
func (p Policy) WithAccounts(list string) (Policy, error) {
	if strings.TrimSpace(list) == "none" {
		list = ""
	}
	accounts, err := ParsePolicy(list)
	if err != nil {
		return Policy{}, err
	}
	p.accounts = accounts.denied
	return p, nil
}

// ForAccounts is the policy of web UI accounts' dials: p's networks and
// the accounts' too.
func (p Policy) ForAccounts() Policy {
	return Policy{denied: append(slices.Clip(p.denied), p.accounts...), plaintextRefused: !p.accountsPlaintext}
}

// WithAccountsPlaintext is p letting web UI accounts' connections send
// credentials in the clear (--plaintext-for-accounts).
func (p Policy) WithAccountsPlaintext(allowed bool) Policy {
	p.accountsPlaintext = allowed
	return p
}

// AllowsPlaintext says whether a dial may send credentials in the clear:
// operators' namespaces may, where their spec says so plainly; web UI
// accounts' may not, unless the operator allows it.
func (p Policy) AllowsPlaintext() bool { return !p.plaintextRefused }

// ParsePolicies reads the deny lists of the --denied-networks and
// --account-denied-networks flags.
func ParsePolicies(denied, accounts string) (Policy, error) {
	p, err := ParsePolicy(denied)
	if err != nil {
		return Policy{}, fmt.Errorf("--denied-networks: %w", err)
	}
	if p, err = p.WithAccounts(accounts); err != nil {
		return Policy{}, fmt.Errorf("--account-denied-networks: %w", err)
	}
	return p, nil
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

// NAT64 prefixes carry an IPv4 address in the IPv6 one, which a NAT64
// gateway reaches: 64:ff9b::a9fe:a9fe reaches 169.254.169.254. The
// well-known prefix (RFC 6052) carries it in its last four bytes; in the
// local-use prefix (RFC 8215) a network may use a prefix of 48, 56, 64 or
// 96 bits, each with the IPv4 address in other bytes (RFC 6052's table,
// around the reserved byte 8): all are checked, but for those that read as
// 0.0.0.0/8, no real destination (the bytes of a longer prefix).
var (
	nat64         = netip.MustParsePrefix("64:ff9b::/96")
	nat64LocalUse = netip.MustParsePrefix("64:ff9b:1::/48")
	// nat64Bytes are where each prefix length puts the IPv4 address.
	nat64Bytes = [][4]int{{6, 7, 9, 10}, {7, 9, 10, 11}, {9, 10, 11, 12}, {12, 13, 14, 15}}
)

// Check returns a *DeniedError when addr, or an IPv4 address it carries
// (IPv4-mapped or NAT64), lies in a denied network.
func (p Policy) Check(addr netip.Addr) error {
	addr = addr.WithZone("").Unmap()
	candidates := []netip.Addr{addr}
	b := addr.As16()
	switch {
	case nat64.Contains(addr):
		candidates = append(candidates, netip.AddrFrom4([4]byte(b[12:])))
	case nat64LocalUse.Contains(addr):
		for _, at := range nat64Bytes {
			if b[at[0]] != 0 {
				candidates = append(candidates, netip.AddrFrom4([4]byte{b[at[0]], b[at[1]], b[at[2]], b[at[3]]}))
			}
		}
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

// Control is a net.Dialer's ControlContext that applies the policy: it
// runs after name resolution, on the address about to be dialled, the one
// place a DNS answer cannot slip past it. Every dial of sftpgate's to a
// place a tenant chose (an SFTP server, a bucket, an event sink) goes
// through it.
func (p Policy) Control(_ context.Context, _, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return err
	}
	return p.Check(ap.Addr())
}

// DeniedError is a dial refused by the Policy.
type DeniedError struct {
	Addr    netip.Addr
	Network string
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("address %s is in a network connections may not reach (%s)", e.Addr, e.Network)
}
