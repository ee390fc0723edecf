package v1alpha1

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Keys of an ObjectStore's credentials Secret.
const (
	SecretKeyAccessKeyID     = "accessKeyID"
	SecretKeySecretAccessKey = "secretAccessKey"
	SecretKeySessionToken    = "sessionToken"
)

// Reasons of an ObjectStore's Ready condition beyond those it shares with
// SftpConnection (Connected, SecretNotFound, InvalidCredentials, DNSError,
// DestinationNotAllowed, ConnectionRefused, HostUnreachable, Timeout,
// AuthenticationFailed, RootPathInaccessible).
const (
	// ReasonBucketNotFound: the store has no such bucket.
	ReasonBucketNotFound = "BucketNotFound"
	// ReasonInvalidCABundle: spec.caBundle holds no PEM certificate.
	ReasonInvalidCABundle = "InvalidCABundle"
	// ReasonTLSHandshakeFailed: the store's certificate is not trusted, or
	// TLS failed otherwise.
	ReasonTLSHandshakeFailed = "TLSHandshakeFailed"
	// ReasonStoreUnavailable: the store answered, but not as S3 does.
	ReasonStoreUnavailable = "StoreUnavailable"
)

// Addressing is how requests name the bucket.
// +kubebuilder:validation:Enum=Auto;Path;VirtualHosted
type Addressing string

// How requests name the bucket.
const (
	// AddressingAuto is virtual-hosted for AWS and Google Cloud Storage
	// endpoints, path-style for others.
	AddressingAuto Addressing = "Auto"
	// AddressingPath: https://endpoint/bucket/key.
	AddressingPath Addressing = "Path"
	// AddressingVirtualHosted: https://bucket.endpoint/key.
	AddressingVirtualHosted Addressing = "VirtualHosted"
)

// ObjectStoreSpec is where a bucket is and how to reach it.
type ObjectStoreSpec struct {
	// Endpoint is the store's S3 API: https://host[:port] (http:// only
	// where the network itself is trusted), without a path.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^https?://[^/?#@]+/?$')",message="must be http(s)://host[:port], without a path, query or user"
	Endpoint string `json:"endpoint"`

	// Region is the bucket's region, which requests are signed for.
	// +kubebuilder:default="us-east-1"
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-z0-9-]+$`
	// +optional
	Region string `json:"region,omitempty"`

	// Bucket is the bucket's name.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`
	Bucket string `json:"bucket"`

	// Prefix is the root of the store's files: keys below it are paths
	// below /, and nothing outside it is reached. Empty: the whole bucket.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.endsWith('/') && !self.startsWith('/') && !self.contains('//') && !self.split('/').exists(p, p == '..' || p == '.')",message="must be key parts, each followed by / (reports/), without . or .. parts"
	// +optional
	Prefix string `json:"prefix,omitempty"`

	// Addressing is how requests name the bucket.
	// +kubebuilder:default=Auto
	// +optional
	Addressing Addressing `json:"addressing,omitempty"`

	// Credentials names the Secret of the access key pair: keys
	// accessKeyID and secretAccessKey, and sessionToken for temporary
	// credentials.
	Credentials Credentials `json:"credentials"`

	// CABundle is PEM certificates that the endpoint's certificate must
	// chain to, instead of the system's.
	// +kubebuilder:validation:MaxLength=65536
	// +optional
	CABundle string `json:"caBundle,omitempty"`

	// Slug, when set, has the gateway serve this store at
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

	// +kubebuilder:default={}
	// +optional
	Limits ObjectStoreLimits `json:"limits,omitempty"`
}

// ObjectStoreLimits bound what sftpgate asks of the store at once.
type ObjectStoreLimits struct {
	// MaxConnections is the most connections to the store each sftpgate
	// process opens.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	// +kubebuilder:default=16
	// +optional
	MaxConnections int32 `json:"maxConnections,omitempty"`

	// PartSizeMiB is the size of an upload's parts: a file of up to
	// 10,000 parts can be written (80 GB at the default).
	// +kubebuilder:validation:Minimum=5
	// +kubebuilder:validation:Maximum=512
	// +kubebuilder:default=8
	// +optional
	PartSizeMiB int32 `json:"partSizeMiB,omitempty"`

	// PartsInFlight is how many parts of one file are sent at once; each
	// copy holds this many parts in memory (within the worker's
	// --max-upload-memory-per-namespace).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	// +kubebuilder:default=4
	// +optional
	PartsInFlight int32 `json:"partsInFlight,omitempty"`

	// ConnectTimeout bounds a connection's dial and TLS handshake.
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('2m')",message="connectTimeout must be between 1s and 2m"
	// +optional
	ConnectTimeout *metav1.Duration `json:"connectTimeout,omitempty"`

	// OperationTimeout bounds each request but the streams of a file's
	// content.
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('1h')",message="operationTimeout must be between 1s and 1h"
	// +optional
	OperationTimeout *metav1.Duration `json:"operationTimeout,omitempty"`
}

// ConnectTimeoutOrDefault is the dial timeout.
func (l *ObjectStoreLimits) ConnectTimeoutOrDefault() time.Duration {
	if l.ConnectTimeout == nil || l.ConnectTimeout.Duration <= 0 {
		return DefaultConnectTimeout
	}
	return l.ConnectTimeout.Duration
}

// OperationTimeoutOrDefault is the timeout of one request.
func (l *ObjectStoreLimits) OperationTimeoutOrDefault() time.Duration {
	if l.OperationTimeout == nil || l.OperationTimeout.Duration <= 0 {
		return DefaultOperationTimeout
	}
	return l.OperationTimeout.Duration
}

// ObjectStoreStatus is what the last test of the store found.
type ObjectStoreStatus struct {
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

	TestStatus `json:",inline"`
}

// ObjectStore is a bucket (and a prefix in it) of an S3-compatible store:
// a Transfer copies to and from it, and an SftpWatch watches it, as they
// do an SftpConnection. The controller tests it when it is created, when
// its spec or Secret changes, and periodically.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=store;os,categories=sftpgate
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.spec.endpoint`
// +kubebuilder:printcolumn:name="Bucket",type=string,JSONPath=`.spec.bucket`
// +kubebuilder:printcolumn:name="Prefix",type=string,JSONPath=`.spec.prefix`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ObjectStore struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ObjectStoreSpec `json:"spec"`
	// +kubebuilder:default={"observedGeneration":-1}
	// +optional
	Status ObjectStoreStatus `json:"status,omitempty"`
}

// GetConditions is for the status helpers shared by the kinds.
func (s *ObjectStore) GetConditions() *[]metav1.Condition { return &s.Status.Conditions }

// Unusable says why the store cannot be used now, or "".
func (s *ObjectStore) Unusable() string {
	ready := meta.FindStatusCondition(s.Status.Conditions, ConditionReady)
	switch {
	case ready == nil || ready.ObservedGeneration != s.Generation:
		return fmt.Sprintf("the object store %s is being tested", s.Name)
	case ready.Status != metav1.ConditionTrue:
		return fmt.Sprintf("the object store %s is not ready (%s): %s", s.Name, ready.Reason, ready.Message)
	}
	return ""
}

// +kubebuilder:object:root=true

// ObjectStoreList is a list of ObjectStores.
type ObjectStoreList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ObjectStore `json:"items"`
}

// ClaimedSlug is the slug the store asks for: spec.slug, or none.
func (s *ObjectStore) ClaimedSlug() string { return s.Spec.Slug }

// ServedSlug is where the slug the gateway serves it under is kept.
func (s *ObjectStore) ServedSlug() *string { return &s.Status.Slug }

// GetTestStatus is for the controller path the tested kinds share.
func (s *ObjectStore) GetTestStatus() *TestStatus { return &s.Status.TestStatus }

// CredentialsSecret names the Secret of the store's access key.
func (s *ObjectStore) CredentialsSecret() string { return s.Spec.Credentials.SecretRef.Name }

// SessionLimits is for the session pools: a store's sessions share one
// client of maxConnections, and each may run as many operations.
func (s *ObjectStore) SessionLimits() (sessions int32, connect, operation time.Duration) {
	return s.Spec.Limits.MaxConnections, s.Spec.Limits.ConnectTimeoutOrDefault(), s.Spec.Limits.OperationTimeoutOrDefault()
}

// ServedAt is what a store's sessions depend on beyond its generation and
// Secret: nothing, its prefix being the root "/" of its files (the
// prefix and trust are in its spec).
func (s *ObjectStore) ServedAt() (root, identity string) { return "/", "" }
