package sftpdial

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/egress"
)

// TestDialChecksTheResolvedAddress: a host name is refused for the address
// it resolves to, not let through because it is a name.
func TestDialChecksTheResolvedAddress(t *testing.T) {
	policy, err := egress.ParsePolicy(egress.DefaultDeniedNetworks)
	if err != nil {
		t.Fatal(err)
	}
	d := &Dialer{Policy: policy}
	target := &Target{addr: "localhost:22", config: &ssh.ClientConfig{}, trust: &hostKeyTrust{}, timeout: 5 * time.Second}
	_, err = d.Dial(context.Background(), target)
	var dialErr *egress.Error
	if !errors.As(err, &dialErr) || dialErr.Reason != v1alpha1.ReasonDestinationNotAllowed {
		t.Fatalf("dialling localhost: %v, want reason %s", err, v1alpha1.ReasonDestinationNotAllowed)
	}
}
