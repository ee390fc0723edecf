package gateway

import (
	"flag"
	"io"
	"reflect"
	"testing"
	"time"
)

// TestZeroOptionsAreTheFlagDefaults: New(Options{}) is the gateway the
// flags make by default, and a flag's 0 that means no limit is Unlimited.
func TestZeroOptionsAreTheFlagDefaults(t *testing.T) {
	var flags Options
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	flags.BindFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if zero := (Options{}).withDefaults(); !reflect.DeepEqual(zero, flags) {
		t.Errorf("Options{} with defaults:\n%+v\nthe flags' defaults:\n%+v", zero, flags)
	}
	if flags.Limits.LargeTransferShare != 0.1 || flags.Audience == "" || flags.NoServiceAccounts {
		t.Errorf("the defaults do not pace large transfers at 0.1 or take ServiceAccounts: %+v", flags)
	}

	fs = flag.NewFlagSet("gateway", flag.ContinueOnError)
	flags.BindFlags(fs)
	if err := fs.Parse([]string{"--rate-per-key=0", "--max-requests-per-key=0", "--max-requests-per-namespace=0",
		"--log-flush-interval=0", "--audience=", "--memory-budget=1Gi", "--max-directory-bytes=1000"}); err != nil {
		t.Fatal(err)
	}
	l := flags.Limits
	if l.RatePerKey != Unlimited || l.MaxRequestsPerKey != Unlimited || l.MaxRequestsPerNamespace != Unlimited ||
		flags.LogFlushInterval != time.Duration(Unlimited) || !flags.NoServiceAccounts {
		t.Errorf("0 is not Unlimited, or an empty audience does not turn ServiceAccounts off: %+v", flags)
	}
	if l.MemoryBudget != 1<<30 || flags.Directories.MaxBytes != 1000 {
		t.Errorf("quantities: %d %d", l.MemoryBudget, flags.Directories.MaxBytes)
	}
	if flags.withDefaults() != flags {
		t.Error("defaults change options given")
	}
	for _, bad := range []string{"--memory-budget=0", "--rate-per-key=-1", "--large-transfer-share=2"} {
		fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		flags.BindFlags(fs)
		if fs.Parse([]string{bad}) == nil {
			t.Errorf("%s is taken", bad)
		}
	}
}
