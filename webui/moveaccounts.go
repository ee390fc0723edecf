package webui

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client/config"
)

// MoveAccounts runs "sftpgate webui move-accounts --from NAMESPACE": it
// moves the account Secrets that versions before the accounts namespace
// kept in NAMESPACE (sftpgate-system) into --accounts-namespace. Run it
// once, as a cluster admin (the web UI may not read the old namespace),
// after upgrading. It never overwrites an account, and running it again
// is harmless.
func MoveAccounts(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("webui move-accounts", flag.ContinueOnError)
	var opts Options
	opts.BindFlags(fs)
	from := fs.String("from", "sftpgate-system", "The namespace the accounts were kept in.")
	config.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	restConfig, err := config.GetConfig()
	if err != nil {
		return err
	}
	s, err := NewForConfig(restConfig, opts)
	if err != nil {
		return err
	}
	moved, conflicts, err := s.Accounts().MoveFrom(ctx, *from)
	fmt.Fprintf(stdout, "moved %d accounts from %s to %s\n", len(moved), *from, opts.Namespace)
	if len(conflicts) > 0 {
		fmt.Fprintf(stdout, "left in %s, since %s has an account of the same email: %s\n", *from, opts.Namespace, strings.Join(conflicts, ", "))
		err = errors.Join(err, fmt.Errorf("%d accounts not moved", len(conflicts)))
	}
	return err
}
