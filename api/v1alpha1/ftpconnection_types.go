package v1alpha1

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reasons of an FtpConnection's Ready condition beyond those it shares
// with SftpConnection (Connected, SecretNotFound, InvalidCredentials,
// DNSError, DestinationNotAllowed, ConnectionRefused, HostUnreachable,
// Timeout, AuthenticationFailed, RootPathNotFound, RootPathInaccessible)
// and ObjectStore (TLSHandshakeFailed, InvalidCABundle).
const (
	// ReasonCertificateNotTrusted: the server's certificate matches
	// neither the pinned fingerprint nor the CA bundle (or the system's
	// roots), or names another host.
	ReasonCertificateNotTrusted = "CertificateNotTrusted"
	// ReasonPassiveModeFailed: the login worked, but no passive data
	// connection could be opened (a firewall, or a server that names an
	// address it does not listen on).
	ReasonPassiveModeFailed = "PassiveModeFailed"
	// ReasonFTPUnavailable: something answered on the port, but not as an
	// FTP server does.
	ReasonFTPUnavailable = "FTPUnavailable"
	// ReasonPlaintextNotAllowed: tls is None in a web UI account's
	// namespace, which the manager's --ftp-plaintext-for-accounts allows.
	ReasonPlaintextNotAllowed = "PlaintextNotAllowed"
)

// FTPTLS is how an FTP connection is encrypted.
// +kubebuilder:validation:Enum=Explicit;Implicit;None
type FTPTLS string

// How an FTP connection is encrypted.
const (
	// FTPTLSExplicit: plain TCP, then AUTH TLS before logging in (FTPES,
	// RFC 4217); data connections are encrypted too. Port 21 by default.
	FTPTLSExplicit FTPTLS = "Explicit"
	// FTPTLSImplicit: TLS from the first byte (FTPS). Port 990 by default.
	FTPTLSImplicit FTPTLS = "Implicit"
	// FTPTLSNone: no encryption: the password and every file cross the
	// network as they are. Only for private networks.
	FTPTLSNone FTPTLS = "None"
)

// FtpConnectionSpec describes one FTP or FTPS server and how to log in.
// +kubebuilder:validation:XValidation:rule="!(has(self.certificateSHA256) && has(self.caBundle))",message="certificateSHA256 and caBundle are mutually exclusive"
// +kubebuilder:validation:XValidation:rule="self.tls != 'None' || (!has(self.certificateSHA256) && !has(self.caBundle))",message="certificateSHA256 and caBundle need tls Explicit or Implicit"
type FtpConnectionSpec struct {
	// Host name or IP address of the FTP server.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9.:_-]+$`
	Host string `json:"host"`

	// TCP port of the control connection; 0 is 990 for Implicit TLS and
	// 21 otherwise.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`

	// TLS is how the connection is encrypted. None sends the password in
	// the clear; it is refused in web UI accounts' namespaces unless the
	// manager allows it (--ftp-plaintext-for-accounts).
	// +kubebuilder:default=Explicit
	// +optional
	TLS FTPTLS `json:"tls,omitempty"`

	// CertificateSHA256 pins the server's certificate: the SHA-256 of its
	// DER bytes, in hex (colons allowed), as "openssl x509 -fingerprint
	// -sha256" prints it. Any certificate with another fingerprint is
	// refused, whoever signed it. Without it (and without caBundle), the
	// certificate must chain to the system's roots and name host.
	// +kubebuilder:validation:Pattern=`^([0-9A-Fa-f]{2}:?){31}[0-9A-Fa-f]{2}$`
	// +optional
	CertificateSHA256 string `json:"certificateSHA256,omitempty"`

	// CABundle is PEM certificates that the server's certificate must
	// chain to, instead of the system's; it must also name host.
	// +kubebuilder:validation:MaxLength=65536
	// +optional
	CABundle string `json:"caBundle,omitempty"`

	// User name to log in as.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!self.contains('\\r') && !self.contains('\\n')",message="username must be one line"
	Username string `json:"username"`

	// Credentials names the Secret that holds the password (key
	// "password", as in kubernetes.io/basic-auth Secrets).
	Credentials Credentials `json:"credentials"`

	// RootPath is the directory on the server that every path is relative
	// to; nothing outside it is reached. Empty means the login directory.
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="!self.contains('\\u0000') && !self.contains('\\r') && !self.contains('\\n')",message="rootPath must be one line without NUL bytes"
	// +optional
	RootPath string `json:"rootPath,omitempty"`

	// Slug, when set, has the gateway serve this connection at
	// POST {base}/<slug>/<command>, as it serves SftpConnections: unique
	// across the cluster and across kinds (the oldest claim gets it; any
	// other claim is not Ready, reason SlugConflict). Unset, the gateway
	// does not serve it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="!(self in ['api','docs','healthz','livez','metrics','openapi','readyz','static','version'])",message="slug is reserved for the gateway's own endpoints"
	// +optional
	Slug string `json:"slug,omitempty"`

	// DisableEPSV asks for passive data connections with PASV only, for
	// servers (or firewalls) that mishandle EPSV. Data connections always
	// go to the control connection's address, whatever PASV names.
	// +optional
	DisableEPSV bool `json:"disableEPSV,omitempty"`

	// Limits bound what sftpgate asks of the server at once.
	// +kubebuilder:default={}
	// +optional
	Limits Limits `json:"limits,omitempty"`
}

// FtpConnectionStatus is what the last test of the server found.
type FtpConnectionStatus struct {
	// Conditions: Ready, with a reason that says what the test found;
	// Reconciling while a test of the current spec and Secret is due;
	// Stalled when only a change can mend it.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Slug is the slug the gateway serves it under; empty while another
	// object holds it, or none is asked for.
	// +optional
	Slug string `json:"slug,omitempty"`

	// CertificateSHA256 is the fingerprint of the certificate the server
	// presented at the last test that got that far, to pin in the spec.
	// +optional
	CertificateSHA256 string `json:"certificateSHA256,omitempty"`

	// RootPath is spec.rootPath as the server resolved it: an absolute
	// path.
	// +optional
	RootPath string `json:"rootPath,omitempty"`

	TestStatus `json:",inline"`
}

// FtpConnection is one FTP or FTPS server: a Transfer copies to and from
// it, and an SftpWatch watches its folders, as they do an SftpConnection.
// The controller tests it when it is created, when its spec or Secret
// changes, and periodically.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ftpconn;ftpc,categories=sftpgate
// +kubebuilder:printcolumn:name="Host",type=string,JSONPath=`.spec.host`
// +kubebuilder:printcolumn:name="TLS",type=string,JSONPath=`.spec.tls`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type FtpConnection struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec FtpConnectionSpec `json:"spec"`
	// +kubebuilder:default={"observedGeneration":-1}
	// +optional
	Status FtpConnectionStatus `json:"status,omitempty"`
}

// GetConditions is for the status helpers shared by the kinds.
func (c *FtpConnection) GetConditions() *[]metav1.Condition { return &c.Status.Conditions }

// Unusable says why the connection cannot be used now, or "".
func (c *FtpConnection) Unusable() string {
	ready := meta.FindStatusCondition(c.Status.Conditions, ConditionReady)
	switch {
	case ready == nil || ready.ObservedGeneration != c.Generation || c.Status.RootPath == "":
		return fmt.Sprintf("the FTP connection %s is being tested", c.Name)
	case ready.Status != metav1.ConditionTrue:
		return fmt.Sprintf("the FTP connection %s is not ready (%s): %s", c.Name, ready.Reason, ready.Message)
	}
	return ""
}

// ClaimedSlug is the slug the connection asks for: spec.slug, or none.
func (c *FtpConnection) ClaimedSlug() string { return c.Spec.Slug }

// ServedSlug is where the slug the gateway serves it under is kept.
func (c *FtpConnection) ServedSlug() *string { return &c.Status.Slug }

// PortOrDefault is the control connection's port.
func (s *FtpConnectionSpec) PortOrDefault() int32 {
	switch {
	case s.Port != 0:
		return s.Port
	case s.TLS == FTPTLSImplicit:
		return 990
	}
	return 21
}

// +kubebuilder:object:root=true

// FtpConnectionList is a list of FtpConnections.
type FtpConnectionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FtpConnection `json:"items"`
}

// GetTestStatus is for the controller path the tested kinds share.
func (c *FtpConnection) GetTestStatus() *TestStatus { return &c.Status.TestStatus }

// CredentialsSecret names the Secret the connection logs in with.
func (c *FtpConnection) CredentialsSecret() string { return c.Spec.Credentials.SecretRef.Name }

// SessionLimits is for the session pools: the most sessions, and the
// timeouts of a dial and of an operation.
func (c *FtpConnection) SessionLimits() (sessions int32, connect, operation time.Duration) {
	return c.Spec.Limits.MaxConnections, c.Spec.Limits.ConnectTimeoutOrDefault(), c.Spec.Limits.OperationTimeoutOrDefault()
}

// ServedAt is what a connection's sessions depend on beyond its
// generation and Secret: the root its test resolved (the certificate it
// trusts is in its spec).
func (c *FtpConnection) ServedAt() (root, identity string) { return c.Status.RootPath, "" }
