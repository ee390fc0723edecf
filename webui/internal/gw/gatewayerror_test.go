package gw

import (
	"errors"
	"net/http"
	"testing"

	"github.com/sftpgate/sftpgate/webui/internal/web"
)

// TestGatewayUnavailableIsNotTheirMistake: the gateway's 5xx (its
// server unreachable, a replica gone) is "try again", never a refusal
// shown as the person's mistake or a file not found (chaos seed 3: share
// downloads answered 422 while sshd restarted); its refusals stay theirs.
func TestGatewayUnavailableIsNotTheirMistake(t *testing.T) {
	for _, status := range []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout} {
		err := gatewayError(status, &GatewayFailure{Status: status, Code: "upstream_unavailable", Message: "connection lost"})
		if !errors.As(err, new(*web.UnavailableError)) || errors.As(err, new(*GatewayFailure)) {
			t.Errorf("%d: %T %v, want unavailable", status, err, err)
		}
	}
	for _, status := range []int{http.StatusOK, http.StatusNotFound, http.StatusForbidden} {
		if err := gatewayError(status, &GatewayFailure{Status: status, Code: "not_found"}); !errors.As(err, new(*GatewayFailure)) {
			t.Errorf("%d: %T %v, want the gateway's failure", status, err, err)
		}
	}
}
