package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AuditSinkName is the one name an AuditSink may have: a namespace has
// at most one, and its records go there.
const AuditSinkName = "audit"

// Reasons of an AuditSink's conditions; the sink's own (SinkNotFound,
// SinkNotAllowed, SinkUnreachable, DeliveryFailing, InvalidSpec) are the
// SftpWatch's.
const (
	// ReasonDelivering: the namespace's records go to the sink.
	ReasonDelivering = "Delivering"
	// ReasonDeliveryStuck: the oldest undelivered record has waited past
	// the worker's --audit-stuck-after, though no delivery failed; its
	// message says since when.
	ReasonDeliveryStuck = "DeliveryStuck"
)

// AuditSinkSpec is where a namespace's audit records go.
type AuditSinkSpec struct {
	// Sink is where the records go, as CloudEvents of type
	// dev.sftpgate.audit.batch, each a batch of records.
	// +required
	Sink Destination `json:"sink"`

	// Delivery is how batches are retried. A batch that failed every try
	// goes to the dead-letter sink; without one, it waits for the sink to
	// come back, within the namespace's outbox (past it, the oldest
	// records are dropped and the drop is itself a record).
	// +kubebuilder:default={}
	// +optional
	Delivery DeliverySpec `json:"delivery,omitempty"`

	// MaxBatch is the most records one event carries.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=100
	// +optional
	MaxBatch int32 `json:"maxBatch,omitempty"`

	// SigningSecretRef names a Secret of this namespace whose key
	// "secret" (whsec_ and base64) signs each event as Standard Webhooks
	// asks, as an SftpWatch's events are signed.
	// +optional
	SigningSecretRef *LocalSecretReference `json:"signingSecretRef,omitempty"`
}

// AuditSinkStatus is what the worker last delivered.
type AuditSinkStatus struct {
	// Conditions: Ready, Reconciling and Stalled, as kstatus reads them.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the generation of the spec the status
	// describes; -1 until a worker has seen the sink.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// SinkURI is where records go: spec.sink resolved.
	// +optional
	SinkURI string `json:"sinkURI,omitempty"`

	// Worker names the worker replica that delivers the records.
	// +optional
	Worker string `json:"worker,omitempty"`

	// Delivered counts the records the sink (or the dead-letter sink)
	// took.
	// +optional
	Delivered int64 `json:"delivered,omitempty"`
	// Pending is how many stored records wait to be delivered.
	// +optional
	Pending int64 `json:"pending,omitempty"`
	// Dropped counts the records removed undelivered because the outbox
	// was full.
	// +optional
	Dropped int64 `json:"dropped,omitempty"`
	// LastDeliveryTime is when a batch was last delivered.
	// +optional
	LastDeliveryTime *metav1.Time `json:"lastDeliveryTime,omitempty"`

	// OldestPendingTime is when the oldest record not yet delivered was
	// made.
	// +optional
	OldestPendingTime *metav1.Time `json:"oldestPendingTime,omitempty"`

	// LastError is the last delivery's failure, for people.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	LastError string `json:"lastError,omitempty"`
}

// AuditSink sends its namespace's audit records (every gateway command,
// web UI action and worker action on the namespace's files and
// resources) to a sink, in batches, chained so that a receiver can tell
// none is missing. A namespace has at most one, named "audit".
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=sftpgate
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'audit'",message="an AuditSink is named audit: a namespace has one"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Delivered",type=integer,JSONPath=`.status.delivered`
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.pending`
// +kubebuilder:printcolumn:name="Dropped",type=integer,JSONPath=`.status.dropped`
// +kubebuilder:printcolumn:name="Sink",type=string,JSONPath=`.status.sinkURI`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AuditSink struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec AuditSinkSpec `json:"spec"`
	// +kubebuilder:default={"observedGeneration":-1}
	// +optional
	Status AuditSinkStatus `json:"status,omitempty"`
}

// GetConditions gives the shared status code the conditions.
func (s *AuditSink) GetConditions() *[]metav1.Condition { return &s.Status.Conditions }

// +kubebuilder:object:root=true

// AuditSinkList is a list of AuditSinks.
type AuditSinkList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AuditSink `json:"items"`
}
