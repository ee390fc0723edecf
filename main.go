// Command sftpgate is the one binary of sftpgate, an HTTP-to-SFTP gateway run
// as a Kubernetes operator. Each component is a subcommand.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/sftpgate/sftpgate/controllers"
	"github.com/sftpgate/sftpgate/gateway"
	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/kubectlplugin"
	"github.com/sftpgate/sftpgate/webui"
	"github.com/sftpgate/sftpgate/worker"
)

var subcommands = []struct {
	name, summary string
	run           func(ctx context.Context, args []string) error
}{
	{"manager", "run the controllers: SftpConnection tests and ApiKey tokens", controllers.RunManager},
	{"gateway", "serve the HTTP API: POST {base}/<slug>/<command>", gateway.Run},
	{"webui", "serve the web UI: accounts, connections and API keys (webui add-account adds one)", webui.Run},
	{"worker", "run the work apart from requests: SftpWatches and Transfers", worker.Run},
	{"audit", "check exported audit records: audit verify [file...]", audit.Run},
	{"kubectl", "kubectl sftpgate: status, test, events, audit verify, share (as kubectl-sftpgate on the PATH)", plugin},
}

// plugin runs the kubectl plugin's command, printing to standard output.
func plugin(ctx context.Context, args []string) error { return kubectlplugin.Run(ctx, args, os.Stdout) }

// pluginName is the binary's name as a kubectl plugin: a link or copy by
// that name on the PATH makes `kubectl sftpgate ...` run it.
const pluginName = "kubectl-sftpgate"

func usage() {
	fmt.Fprintf(os.Stderr, "Usage: sftpgate <command> [flags]\n\nCommands:\n")
	for _, c := range subcommands {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(os.Stderr, "\nRun 'sftpgate <command> -h' for a command's flags.\n")
}

func main() {
	args := os.Args
	if filepath.Base(args[0]) == pluginName {
		args = append([]string{args[0], "kubectl"}, args[1:]...)
	}
	if len(args) < 2 {
		usage()
		os.Exit(2)
	}
	name := args[1]
	for _, c := range subcommands {
		if c.name != name {
			continue
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := c.run(ctx, args[2:])
		stop()
		switch {
		case errors.Is(err, flag.ErrHelp):
			os.Exit(0)
		case err != nil:
			fmt.Fprintf(os.Stderr, "sftpgate %s: %v\n", name, err)
			os.Exit(1)
		}
		return
	}
	usage()
	if name == "-h" || name == "--help" || name == "help" {
		return
	}
	fmt.Fprintf(os.Stderr, "\nsftpgate: unknown command %q\n", name)
	os.Exit(2)
}
