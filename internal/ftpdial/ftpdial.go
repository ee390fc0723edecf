// Package ftpdial opens sessions (internal/ftpfs) to the servers that
// FtpConnections describe: it reads the credentials Secret, checks the
// server's certificate against the pinned fingerprint or the CA bundle,
// keeps the dial policy (and plaintext out of strangers' namespaces), and
// names what a failed dial or test found with a Ready reason.
package ftpdial

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/textproto"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/egress"
	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/ftpfs"
	"github.com/sftpgate/sftpgate/internal/tenants"
)

// Target is what dialling one FtpConnection needs, prepared once: its
// TLS session cache lets later sessions, and every data connection,
// resume the first's TLS session.
type Target struct {
	namespace string
	cfg       ftpfs.Config
	mode      v1alpha1.FTPTLS
	pin       []byte
	roots     *x509.CertPool
	host      string
}

// NewTarget prepares dials of conn with the password in secret. It fails
// with an *egress.Error when the Secret or the spec's trust cannot be
// used.
func NewTarget(conn *v1alpha1.FtpConnection, secret *corev1.Secret) (*Target, error) {
	password, ok := secret.Data[v1alpha1.SecretKeyPassword]
	if !ok || len(password) == 0 {
		return nil, &egress.Error{Reason: v1alpha1.ReasonInvalidCredentials,
			Message: fmt.Sprintf("Secret %q has no key %q", secret.Name, v1alpha1.SecretKeyPassword)}
	}
	if strings.ContainsAny(string(password), "\r\n") {
		return nil, &egress.Error{Reason: v1alpha1.ReasonInvalidCredentials,
			Message: fmt.Sprintf("the password in Secret %q has a line break, which FTP cannot send", secret.Name)}
	}
	spec := &conn.Spec
	t := &Target{namespace: conn.Namespace, mode: spec.TLS, host: spec.Host}
	if spec.CertificateSHA256 != "" {
		pin, err := hex.DecodeString(strings.ReplaceAll(spec.CertificateSHA256, ":", ""))
		if err != nil || len(pin) != sha256.Size {
			return nil, &egress.Error{Reason: v1alpha1.ReasonCertificateNotTrusted,
				Message: "spec.certificateSHA256 is not a SHA-256 fingerprint in hex"}
		}
		t.pin = pin
	}
	if spec.CABundle != "" {
		t.roots = x509.NewCertPool()
		if !t.roots.AppendCertsFromPEM([]byte(spec.CABundle)) {
			return nil, &egress.Error{Reason: v1alpha1.ReasonInvalidCABundle, Message: "spec.caBundle holds no PEM certificate"}
		}
	}
	mode := map[v1alpha1.FTPTLS]ftpfs.TLS{v1alpha1.FTPTLSExplicit: ftpfs.Explicit, v1alpha1.FTPTLSImplicit: ftpfs.Implicit, v1alpha1.FTPTLSNone: ftpfs.None}[spec.TLS]
	t.cfg = ftpfs.Config{
		Addr: Address(conn), TLS: mode, User: spec.Username, Password: string(password),
		ConnectTimeout: spec.Limits.ConnectTimeoutOrDefault(), OperationTimeout: spec.Limits.OperationTimeoutOrDefault(),
		DisableEPSV: spec.DisableEPSV,
	}
	if mode != ftpfs.None {
		// Verification is VerifyConnection's: a pin or a chain, and the
		// certificate seen either way (for status).
		t.cfg.TLSConfig = &tls.Config{
			MinVersion: tls.VersionTLS12, ServerName: spec.Host, InsecureSkipVerify: true, //nolint:gosec // verified in VerifyConnection
			ClientSessionCache: tls.NewLRUClientSessionCache(8),
		}
	}
	return t, nil
}

// Address is the host:port a connection dials.
func Address(conn *v1alpha1.FtpConnection) string {
	return net.JoinHostPort(conn.Spec.Host, strconv.Itoa(int(conn.Spec.PortOrDefault())))
}

// certificateError is a certificate that is not trusted.
type certificateError struct{ msg string }

func (e *certificateError) Error() string { return e.msg }

// verify checks the server's certificate against the pin or the roots.
func (t *Target) verify(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return &certificateError{"the server presented no certificate"}
	}
	leaf := cs.PeerCertificates[0]
	sum := sha256.Sum256(leaf.Raw)
	if t.pin != nil {
		if string(sum[:]) != string(t.pin) {
			return &certificateError{fmt.Sprintf("the server's certificate has the SHA-256 fingerprint %s, not the pinned one", Fingerprint(leaf.Raw))}
		}
		return nil
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: t.roots, Intermediates: inter, DNSName: t.host}); err != nil {
		return &certificateError{fmt.Sprintf("the server's certificate (SHA-256 %s) is not trusted: %v", Fingerprint(leaf.Raw), err)}
	}
	return nil
}

// Fingerprint is the SHA-256 of a DER certificate as spec.certificateSHA256
// takes it.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = fmt.Sprintf("%02X", b)
	}
	return strings.Join(parts, ":")
}

// Dialer dials Targets within a Policy.
type Dialer struct {
	Policy egress.Policy
	// Tenants says which namespaces are web UI accounts', whose dials
	// follow Policy.ForAccounts.
	Tenants tenants.Kinds
	// MaxListing bounds a directory's listing in bytes (0: 16 MiB).
	MaxListing int64
}

// Dial logs in to t's server. Failures are *egress.Error values whose
// Reason says which step failed.
func (d *Dialer) Dial(ctx context.Context, t *Target) (*ftpfs.FS, error) {
	policy := d.Policy
	if d.Tenants.IsAccount(ctx, t.namespace) {
		policy = policy.ForAccounts()
	}
	if t.cfg.TLS == ftpfs.None && !policy.AllowsPlaintext() {
		return nil, &egress.Error{Reason: v1alpha1.ReasonPlaintextNotAllowed,
			Message: "tls None would send the password unencrypted, which this installation does not allow here; use Explicit or Implicit"}
	}
	cfg := t.cfg
	cfg.Control, cfg.MaxListing = policy.Control, d.MaxListing
	var seen []byte
	if cfg.TLSConfig != nil {
		cfg.TLSConfig = cfg.TLSConfig.Clone()
		cfg.TLSConfig.VerifyConnection = func(cs tls.ConnectionState) error {
			if seen == nil && len(cs.PeerCertificates) > 0 {
				seen = cs.PeerCertificates[0].Raw
			}
			return t.verify(cs)
		}
	}
	f, err := ftpfs.Dial(ctx, &cfg)
	if err != nil {
		return nil, t.classify(ctx, err)
	}
	f.Certificate = seen
	return f, nil
}

// classify names the reason of a failed dial.
func (t *Target) classify(ctx context.Context, err error) error {
	addr, timeout := t.cfg.Addr, t.cfg.ConnectTimeout
	var (
		step *ftpfs.DialError
		cert *certificateError
	)
	errors.As(err, &step)
	switch {
	case errors.As(err, &cert):
		return &egress.Error{Reason: v1alpha1.ReasonCertificateNotTrusted, Err: err, Message: fmt.Sprintf("%s: %s", addr, cert.msg)}
	case step != nil && step.Step == ftpfs.StepConnect:
		return egress.NetworkError(err, addr, timeout, "an FTP server")
	case egress.IsTimeout(err) || ctx.Err() != nil:
		return egress.TimeoutError(addr, timeout, err)
	case step != nil && step.Step == ftpfs.StepTLS:
		var reply *textproto.Error
		if errors.As(err, &reply) {
			return &egress.Error{Reason: v1alpha1.ReasonTLSHandshakeFailed, Err: err,
				Message: fmt.Sprintf("%s refused TLS (%s); does it offer %s TLS?", addr, words(reply), t.mode)}
		}
		return &egress.Error{Reason: v1alpha1.ReasonTLSHandshakeFailed, Err: err,
			Message: fmt.Sprintf("TLS with %s failed: %v", addr, err)}
	case step != nil && step.Step == ftpfs.StepGreet:
		return &egress.Error{Reason: v1alpha1.ReasonFTPUnavailable, Err: err,
			Message: fmt.Sprintf("%s did not greet as an FTP server does: %s", addr, short(err))}
	}
	var reply *textproto.Error
	if errors.As(err, &reply) && reply.Code != 530 && reply.Code != 430 && reply.Code/100 == 4 {
		return &egress.Error{Reason: v1alpha1.ReasonFTPUnavailable, Err: err,
			Message: fmt.Sprintf("%s cannot take the login now (%s)", addr, words(reply))}
	}
	return &egress.Error{Reason: v1alpha1.ReasonAuthenticationFailed, Err: err,
		Message: fmt.Sprintf("%s refused the credentials for user %q (%s)", addr, t.cfg.User, short(err))}
}

func words(reply *textproto.Error) string {
	return short(fmt.Errorf("%d %s", reply.Code, reply.Msg))
}

// short is err's words, on one line, bounded: they reach a status.
func short(err error) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	if len(s) > ftpfs.MaxWords {
		s = s[:ftpfs.MaxWords] + "…"
	}
	return s
}

// Test resolves rootPath (empty: the login directory) to a directory and
// lists it, which proves that passive data connections work. Failures are
// *egress.Error values.
func Test(f *ftpfs.FS, rootPath string) (string, error) {
	root := f.Abs(rootPath)
	fi, err := f.Stat(root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", &egress.Error{Reason: v1alpha1.ReasonRootPathNotFound, Err: err,
			Message: fmt.Sprintf("rootPath %q does not exist on the server", root)}
	case err != nil:
		return "", &egress.Error{Reason: v1alpha1.ReasonRootPathInaccessible, Err: err,
			Message: fmt.Sprintf("cannot reach rootPath %q: %v", root, err)}
	case !fi.IsDir():
		return "", &egress.Error{Reason: v1alpha1.ReasonRootPathInaccessible,
			Message: fmt.Sprintf("rootPath %q is not a directory", root)}
	}
	err = f.Each(root, func(fs.FileInfo) error { return files.Stop })
	var passive *ftpfs.PassiveError
	var reply *ftpfs.ReplyError
	switch {
	case err == nil:
		return root, nil
	case errors.As(err, &passive) || (errors.As(err, &reply) && (reply.Code == 425 || reply.Code == 426)):
		return "", &egress.Error{Reason: v1alpha1.ReasonPassiveModeFailed, Err: err,
			Message: fmt.Sprintf("logged in, but no passive data connection opened: %s", short(err))}
	case errors.Is(err, fs.ErrPermission):
		return "", &egress.Error{Reason: v1alpha1.ReasonRootPathInaccessible, Err: err,
			Message: fmt.Sprintf("user may not list rootPath %q", root)}
	}
	return "", &egress.Error{Reason: v1alpha1.ReasonPassiveModeFailed, Err: err,
		Message: fmt.Sprintf("logged in, but listing rootPath %q failed: %s", root, short(err))}
}

// Target prepares pooled dials of obj, an FtpConnection, with secret.
func (d *Dialer) Target(obj client.Object, secret *corev1.Secret) (files.Target, error) {
	conn, ok := obj.(*v1alpha1.FtpConnection)
	if !ok {
		return nil, fmt.Errorf("ftpdial cannot dial a %T", obj)
	}
	t, err := NewTarget(conn, secret)
	if err != nil {
		return nil, err
	}
	return pooled{d, t}, nil
}

type pooled struct {
	d *Dialer
	t *Target
}

// Exclusive: an FTP session serves one operation at a time.
func (pooled) Exclusive() {}

func (p pooled) Dial(ctx context.Context) (files.Session, error) {
	f, err := p.d.Dial(ctx, p.t)
	if err != nil {
		return nil, err // not a nil *FS in an interface
	}
	return f, nil
}
