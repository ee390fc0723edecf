package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/gateway/answer"
	"github.com/sftpgate/sftpgate/gateway/budget"
	"github.com/sftpgate/sftpgate/gateway/commands"
	"github.com/sftpgate/sftpgate/gateway/keyauth"
	"github.com/sftpgate/sftpgate/gateway/kubeauth"
	"github.com/sftpgate/sftpgate/internal/egress"
	"github.com/sftpgate/sftpgate/internal/pool"
	"github.com/sftpgate/sftpgate/internal/recovery"
)

// This file says which API error (package answer) each error of the
// gateway's parts becomes.

// authError answers a request the authorizer refused.
func authError(err error) error {
	switch {
	case errors.Is(err, keyauth.ErrNoSuchConnection):
		return answer.ConnectionNotFound()
	case keyauth.Unauthenticated(err):
		return answer.Unauthorized(err.Error())
	case errors.Is(err, keyauth.ErrConnectionNotAllowed), errors.Is(err, keyauth.ErrCommandNotAllowed):
		return answer.Forbidden(err.Error())
	}
	return err
}

// reviewError answers a ServiceAccount token or request that could not be
// let in: 401 for a token that is no good, 403 for RBAC's refusal, 503
// when the API server could not be asked.
func reviewError(err error) error {
	switch {
	case kubeauth.Unauthenticated(err):
		return answer.Unauthorized(err.Error())
	case errors.Is(err, kubeauth.ErrDenied):
		return answer.Forbidden(err.Error())
	}
	if answered := waitError(err); answered != nil {
		return answered
	}
	return answer.AuthUnavailable(err)
}

// ready refuses a connection whose last test, for its current spec, failed.
func ready(conn endpoint) error {
	c := meta.FindStatusCondition(*conn.GetConditions(), v1alpha1.ConditionReady)
	root, _ := conn.ServedAt()
	tested := c != nil && c.ObservedGeneration == conn.GetGeneration()
	switch {
	case tested && c.Status != metav1.ConditionTrue:
		// Before the root: a connection whose test never passed has none.
		return answer.ConnectionNotReady(fmt.Sprintf("the connection is not ready (%s): %s", c.Reason, c.Message), nil)
	case !tested || !path.IsAbs(root) || path.Clean(root) != root:
		return answer.ConnectionNotReady("the connection is being tested; retry shortly", nil)
	}
	return nil
}

// runError answers a command that did not run to a result or a failure of
// the SFTP server's.
func (h *handler) runError(err error) error {
	var (
		bad        *commands.BadRequest
		outside    *commands.PathNotAllowed
		link       *commands.SymlinkNotAllowed
		bodyErr    *commands.BodyError
		tooLarge   *http.MaxBytesError
		overBudget *budget.TooLargeError
	)
	switch {
	case errors.As(err, &bad):
		return answer.InvalidRequest(bad.Error(), bad.Field)
	case errors.As(err, &outside):
		return answer.PathNotAllowed(outside.Error(), outside.Field)
	case errors.As(err, &link):
		return answer.SymlinkNotAllowed(link.Error(), link.Field)
	case errors.As(err, &tooLarge):
		return answer.BodyTooLarge("upload", h.limits.MaxUploadBytes)
	case errors.As(err, &bodyErr):
		return answer.InvalidRequest("the request body ended early", "body")
	case errors.Is(err, recovery.ErrPanic):
		return answer.Internal(err)
	case errors.As(err, &overBudget):
		return answer.InvalidRequest(fmt.Sprintf("reading %d bytes at once needs more than this gateway's memory budget of %d bytes; read the file in smaller parts with offset and length",
			overBudget.Size, overBudget.Budget), "length")
	}
	if err := waitError(err); err != nil {
		return err
	}
	return upstreamError(err)
}

// waitError answers a request that waited in vain: for room in the
// memory budget, or for a session of a busy connection; or whose client
// went away while it waited. Nil for any other error.
func waitError(err error) error {
	switch {
	case errors.Is(err, budget.ErrBusy):
		return answer.Busy(err)
	case errors.Is(err, pool.ErrQueueFull):
		return answer.ConnectionBusy()
	case errors.Is(err, context.Canceled):
		return answer.ClientGone(err)
	}
	return nil
}

// upstreamError says why the server (SFTP, FTP or a store) could not
// serve the request.
func upstreamError(err error) error {
	var dialErr *egress.Error
	switch {
	case errors.Is(err, pool.ErrCredentials):
		// Not the SFTP server's fault, and the API server's error says
		// nothing a client can act on.
		return answer.ConnectionNotReady(pool.ErrCredentials.Error(), err)
	case errors.Is(err, pool.ErrTimeout), errors.As(err, &dialErr) && dialErr.Reason == v1alpha1.ReasonTimeout:
		return answer.UpstreamTimeout(err)
	case errors.As(err, &dialErr):
		return answer.UpstreamUnavailable(dialErr.Message, err)
	case errors.Is(err, pool.ErrClosed):
		return answer.ConnectionNotReady(err.Error(), err)
	}
	// The error's text may name the server's absolute paths: say less.
	return answer.UpstreamUnavailable("the connection to the server broke; retry", err)
}
