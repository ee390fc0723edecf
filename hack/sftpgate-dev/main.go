// Command sftpgate-dev is `make run`: the whole system on this machine, no
// cluster needed (package dev). It is built from hack/, apart from the
// production binary, which links none of the test cluster or the demo
// server.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sftpgate/sftpgate/hack/dev"
)

func main() {
	// Started as the control plane's kube-apiserver or etcd: become it.
	dev.ExecControlPlane()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := dev.Run(ctx, os.Args[1:])
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintf(os.Stderr, "sftpgate-dev: %v\n", err)
		os.Exit(1)
	}
}
