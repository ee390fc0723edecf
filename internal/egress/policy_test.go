package egress

import (
	"errors"
	"flag"
	"net/netip"
	"testing"
)

func TestPolicy(t *testing.T) {
	policy, err := ParsePolicy(DefaultDeniedNetworks + ", 203.0.113.0/24")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"169.254.169.254":    "link-local",
		"fe80::1":            "link-local",
		"100.100.100.200":    "metadata",
		"127.0.0.1":          "loopback",
		"::ffff:127.0.0.1":   "loopback", // IPv4-mapped addresses are checked as IPv4
		"::1":                "loopback",
		"fe80::1%eth0":       "link-local", // zones do not hide an address
		"64:ff9b::a9fe:a9fe": "link-local", // NAT64 of 169.254.169.254
		// The local-use NAT64 prefix, /96 and /48 forms of 169.254.169.254.
		"64:ff9b:1::a9fe:a9fe":     "link-local",
		"64:ff9b:1:a9fe:a9:fe00::": "link-local",
		"64:ff9b:1::c000:201":      "", // 192.0.2.1 through a /96 local-use prefix
		"0.0.0.0":                  "unspecified",
		"224.0.0.1":                "multicast",
		"203.0.113.7":              "203.0.113.0/24",
		"10.1.2.3":                 "", // private ranges are allowed unless denied
		"192.0.2.1":                "",
		"2001:db8::1":              "",
	}
	for addr, want := range cases {
		err := policy.Check(netip.MustParseAddr(addr))
		var denied *DeniedError
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: denied (%v), want allowed", addr, err)
		case want != "" && !errors.As(err, &denied):
			t.Errorf("%s: allowed, want denied as %s", addr, want)
		case want != "" && denied.Network != want:
			t.Errorf("%s: denied as %s, want %s", addr, denied.Network, want)
		}
	}
}

func TestParsePolicyRejectsUnknownNames(t *testing.T) {
	for _, list := range []string{"intranet", "10.0.0.0/33", "loopback,foo"} {
		if _, err := ParsePolicy(list); err == nil {
			t.Errorf("ParsePolicy(%q) accepted", list)
		}
	}
	if p, err := ParsePolicy(""); err != nil || p.Check(netip.MustParseAddr("127.0.0.1")) != nil {
		t.Errorf("an empty list must deny nothing: %v", err)
	}
}

// TestAccountsKeepOutOfPrivateNetworks: a web UI account's policy refuses
// private addresses the operator's allows; "none" adds nothing. (That an
// account's connection and sink are dialled with it is a row of the web
// UI's isolation test.)
func TestAccountsKeepOutOfPrivateNetworks(t *testing.T) {
	policy, err := ParsePolicies(DefaultDeniedNetworks, DefaultAccountDeniedNetworks)
	if err != nil {
		t.Fatal(err)
	}
	private := netip.MustParseAddr("10.1.2.3")
	if err := policy.Check(private); err != nil {
		t.Errorf("the operator's dial to %s: %v", private, err)
	}
	var denied *DeniedError
	if err := policy.ForAccounts().Check(private); !errors.As(err, &denied) || denied.Network != "private" {
		t.Errorf("an account's dial to %s: %v, want refused as private", private, err)
	}
	if err := policy.ForAccounts().Check(netip.MustParseAddr("169.254.169.254")); err == nil {
		t.Error("an account's dial to the metadata endpoint was let through")
	}
	open, err := ParsePolicies(DefaultDeniedNetworks, "none")
	if err != nil {
		t.Fatal(err)
	}
	if err := open.ForAccounts().Check(private); err != nil {
		t.Errorf("with none, an account's dial to %s: %v", private, err)
	}

}

// TestNetworksFlags: every component binds the same flags with the same
// defaults; left empty they are the defaults, and "none" denies nothing
// (more).
func TestNetworksFlags(t *testing.T) {
	var n Networks
	fs := flag.NewFlagSet("component", flag.ContinueOnError)
	n.BindNetworks(fs)
	if n.DeniedNetworks != DefaultDeniedNetworks || n.AccountDeniedNetworks != DefaultAccountDeniedNetworks {
		t.Errorf("the flags' defaults: %+v", n)
	}
	private, loopback := netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("127.0.0.1")
	for _, tc := range []struct {
		n                        Networks
		loopbackDenied, accounts bool
	}{
		{Networks{}, true, true},
		{Networks{DeniedNetworks: "none"}, false, true},
		{Networks{DeniedNetworks: "none", AccountDeniedNetworks: "none"}, false, false},
		{Networks{DeniedNetworks: "metadata", AccountDeniedNetworks: " "}, false, true},
		{Networks{DeniedNetworks: " "}, true, true},
		{Networks{DeniedNetworks: " none "}, false, true},
	} {
		p, err := tc.n.DialPolicy()
		if err != nil {
			t.Fatalf("%+v: %v", tc.n, err)
		}
		if got := p.Check(loopback) != nil; got != tc.loopbackDenied {
			t.Errorf("%+v: loopback denied %v", tc.n, got)
		}
		if got := p.ForAccounts().Check(private) != nil; got != tc.accounts {
			t.Errorf("%+v: an account's private dial denied %v", tc.n, got)
		}
	}
	if _, err := (Networks{DeniedNetworks: "nowhere"}).DialPolicy(); err == nil {
		t.Error("a denied network that is neither a CIDR nor a name is taken")
	}
}
