package gateway

// Who sent a request: an API key, or a ServiceAccount's token, and whether
// it may run its command on the connection its slug names.

import (
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/gateway/answer"
	"github.com/sftpgate/sftpgate/gateway/commands"
	"github.com/sftpgate/sftpgate/gateway/keyauth"
	"github.com/sftpgate/sftpgate/gateway/kubeauth"
)

// caller is who sent a request, for the bounds on requests: an API key,
// or a ServiceAccount.
type caller struct {
	uid       types.UID
	namespace string
	// whose names it in answers: "this API key's", "this ServiceAccount's".
	whose string
	// paths are where the caller may go below the connection's root (an
	// API key's spec.paths); none is anywhere.
	paths []string
}

// authenticate finds the connection serving slug and the caller that may
// run cmd on it: the API key of the token, or, for a token that is no
// key's and has a JWT's shape, the ServiceAccount it is for, as RBAC
// allows it. A key's token is never sent for review.
func (h *handler) authenticate(r *http.Request, slug string, cmd commands.Command, rec *requestLog) (*served, caller, error) {
	token, ok := bearerToken(r)
	if !ok {
		return nil, caller{}, answer.Unauthorized("send an API key or a ServiceAccount token: Authorization: Bearer <token>")
	}
	conns, err := h.endpoints.bySlug(slug)
	if err != nil {
		return nil, caller{}, err
	}
	var conn *served
	if len(conns) == 1 {
		conn = conns[0]
	}
	var target *keyauth.Target
	if conn != nil {
		target = conn.keyTarget()
	}
	key, err := h.authorizer.Authorize(token, target, cmd.Name)
	if errors.Is(err, keyauth.ErrUnknownToken) && h.reviewer != nil && kubeauth.IsJWT(token) {
		return h.authenticateServiceAccount(r, token, slug, conns, cmd, rec)
	}
	if key != nil {
		rec.keyID = key.Status.KeyID
	}
	if errors.Is(err, keyauth.ErrNoSuchConnection) && len(conns) > 1 {
		// Two connections claim the slug for a moment while one hands it
		// to another.
		return nil, caller{}, slugHandover()
	}
	if err != nil {
		return nil, caller{}, authError(err)
	}
	h.lastUse.Used(key)
	return conn, keyCaller(key), nil
}

// keyCaller is the caller of key's token.
func keyCaller(key *v1alpha1.ApiKey) caller {
	return caller{uid: key.UID, namespace: key.Namespace, whose: "this API key's", paths: key.Spec.Paths}
}

// slugHandover answers a slug that no connection serves for a moment,
// while one hands it to another.
func slugHandover() error {
	return answer.ConnectionNotReady("the slug is being handed from one connection to another; retry", nil)
}

// authenticateServiceAccount verifies a ServiceAccount token and asks
// RBAC whether its ServiceAccount may run cmd on the connection that
// conns, those claiming slug, agree on. As for keys, a connection of
// another namespace that it may not use looks the same as none: by the
// answer, and by its cost, since a slug no connection serves costs the
// same review, of the slug's name in the ServiceAccount's own namespace.
func (h *handler) authenticateServiceAccount(r *http.Request, token, slug string, conns []*served,
	cmd commands.Command, rec *requestLog) (*served, caller, error) {
	address := clientAddress(r)
	id, err := h.reviewer.Authenticate(r.Context(), token, address)
	if err != nil {
		return nil, caller{}, reviewError(err)
	}
	rec.serviceAccount = id.String()
	var conn *served
	target := kubeauth.Target{Namespace: id.Namespace, Name: slug}
	switch {
	case len(conns) == 1:
		conn = conns[0]
		target = conn.rbacTarget()
	case slices.ContainsFunc(conns, func(c *served) bool { return c.GetNamespace() == id.Namespace }):
		return nil, caller{}, slugHandover()
	}
	err = h.reviewer.Authorize(r.Context(), id, target, cmd.Name, address)
	switch {
	case conn == nil && (err == nil || errors.Is(err, kubeauth.ErrDenied)),
		errors.Is(err, kubeauth.ErrDenied) && id.Namespace != conn.GetNamespace():
		return nil, caller{}, answer.ConnectionNotFound()
	case err != nil:
		return nil, caller{}, reviewError(err)
	}
	return conn, caller{uid: id.UID, namespace: id.Namespace, whose: "this ServiceAccount's"}, nil
}

// clientAddress is the address a request came from, without its port:
// where ServiceAccount reviews are charged.
func clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// admit lets the request in if the connection is ready and its caller is
// within its rate and, with its namespace, within the bounds on requests
// in flight. Once admitted, leave counts it out.
func (h *handler) admit(conn *served, who caller) error {
	if ok, delay := h.limiter.Allow(who.uid); !ok {
		return answer.RateLimited(delay)
	}
	if err := ready(conn); err != nil {
		return err
	}
	if !h.perKey.Enter(who.uid) {
		return answer.TooManyInFlight(who.whose, h.perKey.Limit())
	}
	if !h.perNamespace.Enter(who.namespace) {
		h.perKey.Leave(who.uid)
		return answer.TooManyInFlight("this namespace's", h.perNamespace.Limit())
	}
	return nil
}

func (h *handler) leave(who caller) {
	h.perNamespace.Leave(who.namespace)
	h.perKey.Leave(who.uid)
}

func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
