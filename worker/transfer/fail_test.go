package transfer

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/files"
)

// TestOnlyTheServersAnswersCountAsTries: a connection lost or closed is
// no try of the file's (it is copied again on a new session, however
// often); what the server refused is, with its reason, and what it
// refuses for good is not tried again.
func TestOnlyTheServersAnswersCountAsTries(t *testing.T) {
	for _, c := range []struct {
		name      string
		err       error
		reason    string // "": not the file's try
		permanent bool
	}{
		{"connection lost", &files.StatusError{Code: files.FxConnectionLost}, "", false},
		{"no connection", fmt.Errorf("open: %w", &files.StatusError{Code: files.FxNoConnection}), "", false},
		{"cut mid-reply", errors.New("unexpected EOF"), "", false},
		{"no space", &files.StatusError{Code: files.FxNoSpace}, v1alpha1.ReasonDestinationFull, false},
		{"quota", &files.StatusError{Code: files.FxQuotaExceeded}, v1alpha1.ReasonDestinationFull, false},
		{"failure", &files.StatusError{Code: files.FxFailure}, v1alpha1.ReasonFilesFailed, false},
		{"denied", fs.ErrPermission, v1alpha1.ReasonPermissionDenied, true},
		{"missing", fs.ErrNotExist, v1alpha1.ReasonFilesFailed, false},
	} {
		err := fail(c.err, "copying")
		var typed *Error
		switch {
		case c.reason == "" && errors.As(err, &typed):
			t.Errorf("%s counts as the file's try (%s)", c.name, typed.Reason)
		case c.reason != "" && !errors.As(err, &typed):
			t.Errorf("%s is not the file's try: %v", c.name, err)
		case c.reason != "" && (typed.Reason != c.reason || typed.Permanent != c.permanent):
			t.Errorf("%s: reason %s, permanent %v; want %s, %v", c.name, typed.Reason, typed.Permanent, c.reason, c.permanent)
		}
	}
}
