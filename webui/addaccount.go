package webui

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/sftpgate/sftpgate/webui/accounts"
)

// AddAccount runs "sftpgate webui add-account --email ADDRESS": it adds an
// account as sign-up would, for a deployment with --signup=false. The
// password is the first line of stdin; with none, one is made and printed.
// It takes the web UI's flags, so that the account gets the same
// namespace, rights and quota (run it where the UI runs: kubectl exec).
func AddAccount(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("webui add-account", flag.ContinueOnError)
	var opts Options
	opts.BindFlags(fs)
	email := fs.String("email", "", "The new account's email address.")
	config.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *email == "" {
		return errors.New("--email is required")
	}
	password, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	password = strings.TrimRight(password, "\r\n")
	made := password == ""
	if made {
		password = rand.Text()
	}
	restConfig, err := config.GetConfig()
	if err != nil {
		return err
	}
	s, err := NewForConfig(restConfig, opts)
	if err != nil {
		return err
	}
	// The operator vouches for the email: teams may name it.
	acct, err := s.Accounts().SignUpWithNamespace(ctx, *email, password, accounts.NewNamespaceName(), true)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "added account %s (namespace %s)\n", acct.Email, acct.Namespace)
	if made {
		fmt.Fprintf(stdout, "password: %s\n", password)
	}
	return nil
}
