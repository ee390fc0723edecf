package v1alpha1

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Keys read from the credentials Secret. They are the keys of the built-in
// Secret types kubernetes.io/basic-auth and kubernetes.io/ssh-auth, so either
// type works as it is; SecretKeyPassphrase is sftpgate's own.
const (
	SecretKeyPassword   = "password"
	SecretKeyPrivateKey = "ssh-privatekey"
	SecretKeyPassphrase = "passphrase"
)

// Condition types of both kinds, as kstatus reads them (so do kubectl wait,
// Flux and Argo CD).
const (
	// ConditionReady is true while the object works: for an SftpConnection,
	// when the last test reached the server and stat'ed the root path; for
	// an ApiKey, while the gateway accepts its token. Its reason says why
	// not.
	ConditionReady = "Ready"
	// ConditionReconciling is true while the current spec (or Secret) has
	// not been acted on yet: a connection test of it is due or running.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is true when only a change to the spec or its
	// Secret (or, for a connection, to the server's account) can make the
	// object Ready. Its reason and message are Ready's.
	ConditionStalled = "Stalled"
)

// Reasons of the Reconciling condition of an SftpConnection.
const (
	// ReasonTestPending: a test of the current spec and Secret waits its
	// turn (its namespace's test slots, its budget, or the backoff after
	// failed tests).
	ReasonTestPending = "TestPending"
	// ReasonTesting: the test of the current spec and Secret is running.
	ReasonTesting = "Testing"
)

// Reasons of the Ready condition. Each names what the connection test found,
// precisely enough that a person knows what to fix.
const (
	ReasonConnected             = "Connected"
	ReasonSecretNotFound        = "SecretNotFound"
	ReasonInvalidCredentials    = "InvalidCredentials"
	ReasonInvalidHostKey        = "InvalidHostKey"
	ReasonDNSError              = "DNSError"
	ReasonDestinationNotAllowed = "DestinationNotAllowed"
	ReasonConnectionRefused     = "ConnectionRefused"
	ReasonHostUnreachable       = "HostUnreachable"
	ReasonTimeout               = "Timeout"
	ReasonHostKeyMismatch       = "HostKeyMismatch"
	ReasonAuthenticationFailed  = "AuthenticationFailed"
	ReasonSSHHandshakeFailed    = "SSHHandshakeFailed"
	ReasonSFTPUnavailable       = "SFTPUnavailable"
	ReasonRootPathNotFound      = "RootPathNotFound"
	ReasonRootPathInaccessible  = "RootPathInaccessible"
	ReasonSlugConflict          = "SlugConflict"
)

// AnnotationTestRequestedAt asks for a new connection test: whenever its
// value differs from status.lastHandledTestRequest, the controller tests
// again and records the value there. Any new value works; the current time
// is the convention (the web UI sets it whenever a connection is saved).
const AnnotationTestRequestedAt = "sftpgate.dev/test-requested-at"

// SftpConnectionSpec describes one remote SFTP server and how to log in to it.
type SftpConnectionSpec struct {
	// Host name or IP address of the SFTP server.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9.:_-]+$`
	Host string `json:"host"`

	// TCP port of the SSH server.
	// +kubebuilder:default=22
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`

	// User name to log in as.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Username string `json:"username"`

	// Credentials names the Secret that holds the password or private key.
	Credentials Credentials `json:"credentials"`

	// HostKey says which host keys the server may present. When it names no
	// keys, the first connection test records the server's key in
	// status.hostKey and every later connection must present it (trust on
	// first use); the gateway never connects before that.
	// +optional
	HostKey HostKeyTrust `json:"hostKey,omitempty"`

	// RootPath is the directory on the server that every gateway path is
	// relative to; requests can never leave it. Empty means the login
	// (home) directory of the user.
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="!self.contains('\\u0000')",message="rootPath must not contain NUL bytes"
	// +optional
	RootPath string `json:"rootPath,omitempty"`

	// Slug is the path segment the gateway serves this connection under:
	// POST {base}/<slug>/<command>. It is unique across the cluster: a slug
	// stays with the connection serving it, and any other connection that
	// claims it is not Ready (reason SlugConflict) until it is free; then the
	// oldest claim gets it. Defaults to metadata.name. Names the gateway uses
	// for its own endpoints are reserved.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="!(self in ['api','docs','healthz','livez','metrics','openapi','readyz','static','version'])",message="slug is reserved for the gateway's own endpoints"
	// +optional
	Slug string `json:"slug,omitempty"`

	// Limits the gateway honours when it serves this connection.
	// +kubebuilder:default={}
	// +optional
	Limits Limits `json:"limits,omitempty"`
}

// Credentials names the Secret, in the connection's namespace, that holds
// what the gateway logs in with. The Secret holds a password (key
// "password", as in kubernetes.io/basic-auth Secrets), or a private key (key
// "ssh-privatekey", as in kubernetes.io/ssh-auth Secrets; OpenSSH, PEM or
// PKCS#8; RSA, ECDSA or Ed25519) with an optional "passphrase", or both, in
// which case the key is tried first.
type Credentials struct {
	// SecretRef names the Secret in the same namespace.
	SecretRef LocalSecretReference `json:"secretRef"`
}

// LocalSecretReference names a Secret in the namespace of the referring object.
type LocalSecretReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// HostKeyTrust says which SSH host keys are accepted from the server.
// +kubebuilder:validation:XValidation:rule="!(has(self.insecureSkipVerify) && self.insecureSkipVerify && has(self.trusted) && size(self.trusted) > 0)",message="trusted and insecureSkipVerify are mutually exclusive"
type HostKeyTrust struct {
	// Trusted host keys: each either a public key as in known_hosts or
	// authorized_keys ("ssh-ed25519 AAAA..."), or a SHA256 fingerprint as
	// printed by "ssh-keygen -lf" ("SHA256:..."). The server must present one
	// of them. Empty means trust on first use.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=16384
	// +kubebuilder:validation:items:Pattern=`^(SHA256:[A-Za-z0-9+/]{43}=?|(ssh|ecdsa|sk)-[a-z0-9@.-]+ [A-Za-z0-9+/]{40,}={0,2}( .*)?)$`
	// +listType=atomic
	// +optional
	Trusted []string `json:"trusted,omitempty"`

	// InsecureSkipVerify accepts any host key. A connection made this way
	// can be intercepted; the controller says so in the Ready condition and
	// in a warning event. Only for tests.
	// +optional
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
}

// Limits the gateway honours for one connection.
type Limits struct {
	// MaxConnections is how many SSH connections the gateway opens to the
	// server at most, per gateway replica. It opens them as load needs:
	// commands share a connection, up to 64 at a time, and a command that
	// moves a whole file or reads a whole directory (raw transfers, copy,
	// hash, list, rmdir) gets one of its own while the limit allows.
	// +kubebuilder:default=4
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +optional
	MaxConnections int32 `json:"maxConnections,omitempty"`

	// ConnectTimeout bounds resolving, dialling and the SSH handshake.
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('2m')",message="connectTimeout must be between 1s and 2m"
	// +optional
	ConnectTimeout *metav1.Duration `json:"connectTimeout,omitempty"`

	// OperationTimeout bounds one SFTP command.
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('1h')",message="operationTimeout must be between 1s and 1h"
	// +optional
	OperationTimeout *metav1.Duration `json:"operationTimeout,omitempty"`
}

// Defaults of Limits, as the CRD schema applies them; the methods below use
// them for objects that did not pass through the API server.
const (
	DefaultConnectTimeout   = 10 * time.Second
	DefaultOperationTimeout = 30 * time.Second
)

// ConnectTimeoutOrDefault is ConnectTimeout, or its default when unset.
func (l *Limits) ConnectTimeoutOrDefault() time.Duration {
	if l.ConnectTimeout == nil || l.ConnectTimeout.Duration <= 0 {
		return DefaultConnectTimeout
	}
	return l.ConnectTimeout.Duration
}

// OperationTimeoutOrDefault is OperationTimeout, or its default when unset.
func (l *Limits) OperationTimeoutOrDefault() time.Duration {
	if l.OperationTimeout == nil || l.OperationTimeout.Duration <= 0 {
		return DefaultOperationTimeout
	}
	return l.OperationTimeout.Duration
}

// SftpConnectionStatus is what the last connection test found.
type SftpConnectionStatus struct {
	// Conditions: Ready, with a reason that says what the test found.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Slug is the slug the gateway serves this connection under; empty while
	// another connection holds it.
	// +optional
	Slug string `json:"slug,omitempty"`

	// HostKey is the public host key (authorized_keys format) the server
	// presented in the last test that got past the host-key check. With
	// trust on first use it is the key every later connection must present.
	// +optional
	HostKey string `json:"hostKey,omitempty"`

	// HostKeyFingerprint is the SHA256 fingerprint of hostKey, as
	// "ssh-keygen -lf" prints it, for people to compare.
	// +optional
	HostKeyFingerprint string `json:"hostKeyFingerprint,omitempty"`

	// HostKeyAddress is the host:port hostKey was seen at. Trust on first
	// use starts afresh when spec.host or spec.port changes.
	// +optional
	HostKeyAddress string `json:"hostKeyAddress,omitempty"`

	// ServerVersion is the SSH version string the server announced.
	// +optional
	ServerVersion string `json:"serverVersion,omitempty"`

	// RootPath is spec.rootPath as the server resolved it: an absolute path.
	// +optional
	RootPath string `json:"rootPath,omitempty"`

	TestStatus `json:",inline"`
}

// SftpConnection is one remote SFTP server that the gateway serves at
// POST {base}/<slug>/<command>. The controller tests the connection when it
// is created, when its spec or its Secret changes, and periodically, and
// writes the result to the Ready condition.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sftpconn;sftpc,categories=sftpgate
// +kubebuilder:printcolumn:name="Slug",type=string,JSONPath=`.status.slug`
// +kubebuilder:printcolumn:name="Host",type=string,JSONPath=`.spec.host`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="has(self.spec.slug) || (size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'))",message="metadata.name is not a valid slug (a DNS label of at most 63 characters); set spec.slug"
// +kubebuilder:validation:XValidation:rule="has(self.spec.slug) || !(self.metadata.name in ['api','docs','healthz','livez','metrics','openapi','readyz','static','version'])",message="metadata.name is reserved for the gateway's own endpoints; set spec.slug"
type SftpConnection struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec SftpConnectionSpec `json:"spec"`
	// +kubebuilder:default={"observedGeneration":-1}
	// +optional
	Status SftpConnectionStatus `json:"status,omitempty"`
}

// ClaimedSlug is the slug the connection asks for (EffectiveSlug).
func (c *SftpConnection) ClaimedSlug() string { return c.EffectiveSlug() }

// ServedSlug is where the slug the gateway serves it under is kept.
func (c *SftpConnection) ServedSlug() *string { return &c.Status.Slug }

// EffectiveSlug is the slug the connection asks for: spec.slug, or its name.
func (c *SftpConnection) EffectiveSlug() string {
	if c.Spec.Slug != "" {
		return c.Spec.Slug
	}
	return c.Name
}

// GetConditions gives the controllers' shared status code the conditions.
func (c *SftpConnection) GetConditions() *[]metav1.Condition { return &c.Status.Conditions }

// +kubebuilder:object:root=true

// SftpConnectionList is a list of SftpConnections.
type SftpConnectionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SftpConnection `json:"items"`
}

// Unusable says why the worker cannot use c now (its test has not passed
// for its current spec); "" when it can.
func (c *SftpConnection) Unusable() string {
	ready := meta.FindStatusCondition(c.Status.Conditions, ConditionReady)
	switch {
	case ready == nil || ready.ObservedGeneration != c.Generation:
		return fmt.Sprintf("the connection %s is being tested", c.Name)
	case ready.Status != metav1.ConditionTrue:
		return fmt.Sprintf("the connection %s is not ready (%s): %s", c.Name, ready.Reason, ready.Message)
	case c.Status.RootPath == "":
		return fmt.Sprintf("the connection %s is being tested", c.Name)
	}
	return ""
}

// TestStatus is what every tested endpoint's status (SftpConnection,
// ObjectStore, FtpConnection) keeps of its tests, apart from its
// conditions: the controller path they share reads and writes it.
type TestStatus struct {
	// ObservedGeneration is the generation of the spec the status describes;
	// -1 until the controller has seen the object, so that kstatus (kubectl
	// wait, Flux, Argo CD) reads a new object as in progress, not current.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// LastTestTime is when the endpoint was last tested.
	// +optional
	LastTestTime *metav1.Time `json:"lastTestTime,omitempty"`

	// FailedTests counts the tests that failed in a row since the last that
	// passed. The next test waits the longer the more there are (5s,
	// doubling, up to the manager's --max-test-backoff), whatever changed:
	// the test is no oracle for guessing passwords or scanning ports at
	// full speed.
	// +optional
	FailedTests int32 `json:"failedTests,omitempty"`

	// LastHandledTestRequest is the value of the
	// sftpgate.dev/test-requested-at annotation the last test answered.
	// +optional
	LastHandledTestRequest string `json:"lastHandledTestRequest,omitempty"`

	// CredentialsHash identifies the version of the credentials Secret that
	// was tested. It changes whenever the Secret does and reveals nothing of
	// its contents.
	// +optional
	CredentialsHash string `json:"credentialsHash,omitempty"`
}

// GetTestStatus is for the controller path the tested kinds share.
func (c *SftpConnection) GetTestStatus() *TestStatus { return &c.Status.TestStatus }

// CredentialsSecret names the Secret the connection logs in with.
func (c *SftpConnection) CredentialsSecret() string { return c.Spec.Credentials.SecretRef.Name }

// SessionLimits is for the session pools: the most sessions, and the
// timeouts of a dial and of an operation.
func (c *SftpConnection) SessionLimits() (sessions int32, connect, operation time.Duration) {
	return c.Spec.Limits.MaxConnections, c.Spec.Limits.ConnectTimeoutOrDefault(), c.Spec.Limits.OperationTimeoutOrDefault()
}

// ServedAt is what a connection's sessions depend on beyond its
// generation and Secret: the root its test resolved, and the host key
// it accepted.
func (c *SftpConnection) ServedAt() (root, identity string) {
	return c.Status.RootPath, c.Status.HostKey
}
