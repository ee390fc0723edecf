// Package egress decides where sftpgate may dial on a tenant's behalf
// (an SFTP server, a bucket, an event sink): one Policy, checked on the
// address actually dialled; its flags, bound alike in every component
// (Networks); and the errors of a failed dial, with the reasons a tested
// endpoint reports (Error).
package egress

import (
	"cmp"
	"flag"
	"strings"
)

// Networks are the policy's flags, the same in the manager, the gateway
// and the worker (each embeds them in its options): one name, one
// default and one meaning each.
type Networks struct {
	// DeniedNetworks is --denied-networks, AccountDeniedNetworks
	// --account-denied-networks. Empty is the default; "none" denies
	// nothing (more).
	DeniedNetworks, AccountDeniedNetworks string
	// PlaintextForAccounts is --plaintext-for-accounts.
	PlaintextForAccounts bool
}

// BindNetworks registers the flags on fs.
func (n *Networks) BindNetworks(fs *flag.FlagSet) {
	fs.StringVar(&n.DeniedNetworks, "denied-networks", DefaultDeniedNetworks,
		"Comma-separated networks that connections, stores and event sinks may not reach: CIDRs or the names "+strings.Join(networkNames(), ", ")+"; none for none.")
	fs.StringVar(&n.AccountDeniedNetworks, "account-denied-networks", DefaultAccountDeniedNetworks,
		"Networks the connections, stores and event sinks of web UI accounts (namespaces labelled sftpgate.dev/account) may not reach besides --denied-networks; none for no more.")
	fs.BoolVar(&n.PlaintextForAccounts, "plaintext-for-accounts", false,
		"Let the FTP connections of web UI accounts use tls None, which sends their password and files unencrypted.")
}

// NetworksOrDefaults is n with each flag left empty at its default.
func (n Networks) NetworksOrDefaults() Networks {
	n.DeniedNetworks = cmp.Or(strings.TrimSpace(n.DeniedNetworks), DefaultDeniedNetworks)
	n.AccountDeniedNetworks = cmp.Or(strings.TrimSpace(n.AccountDeniedNetworks), DefaultAccountDeniedNetworks)
	return n
}

// DialPolicy is the policy the flags say.
func (n Networks) DialPolicy() (Policy, error) {
	n = n.NetworksOrDefaults()
	if n.DeniedNetworks == "none" {
		n.DeniedNetworks = ""
	}
	p, err := ParsePolicies(n.DeniedNetworks, n.AccountDeniedNetworks)
	return p.WithAccountsPlaintext(n.PlaintextForAccounts), err
}
