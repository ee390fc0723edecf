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
}

// BindNetworks registers the flags on fs.
func (f *Networks) BindNetworks(fs *flag.FlagSet) {
	fs.StringVar(&f.DeniedNetworks, "denied-networks", DefaultDeniedNetworks,
		"Comma-separated networks that connections, stores and event sinks may not reach: CIDRs or the names "+strings.Join(networkNames(), ", ")+"; none for none.")
	fs.StringVar(&f.AccountDeniedNetworks, "account-denied-networks", DefaultAccountDeniedNetworks,
		"Networks the connections, stores and event sinks of web UI accounts (namespaces labelled sftpgate.dev/account) may not reach besides --denied-networks; none for no more.")
}

// DialPolicy is the policy the flags say.
func (f Networks) DialPolicy() (Policy, error) {
	denied := cmp.Or(strings.TrimSpace(f.DeniedNetworks), DefaultDeniedNetworks)
	if denied == "none" {
		denied = ""
	}
	return ParsePolicies(denied, cmp.Or(strings.TrimSpace(f.AccountDeniedNetworks), DefaultAccountDeniedNetworks))
}
