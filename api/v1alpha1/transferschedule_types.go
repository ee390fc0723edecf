package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConcurrencyPolicy says what a schedule does when a run is due while its
// previous Transfer still runs, as a CronJob's.
// +kubebuilder:validation:Enum=Allow;Forbid;Replace
type ConcurrencyPolicy string

// What a due run does while the previous one runs.
const (
	// ConcurrencyAllow starts it anyway.
	ConcurrencyAllow ConcurrencyPolicy = "Allow"
	// ConcurrencyForbid skips it.
	ConcurrencyForbid ConcurrencyPolicy = "Forbid"
	// ConcurrencyReplace deletes the running Transfer and starts the new
	// one (which resumes what the deleted one left only where files were
	// done).
	ConcurrencyReplace ConcurrencyPolicy = "Replace"
)

// Reasons of a TransferSchedule's conditions.
const (
	// ReasonScheduled: the schedule makes its Transfers when due.
	ReasonScheduled = "Scheduled"
	// ReasonSuspended: spec.suspend holds the runs back.
	ReasonSuspended = "Suspended"
	// ReasonInvalidSchedule: the cron expression or the time zone is not
	// one the controller can read.
	ReasonInvalidSchedule = "InvalidSchedule"
)

// TransferTemplate is the Transfer a schedule makes each time.
type TransferTemplate struct {
	// Metadata holds labels and annotations for the Transfers.
	// +optional
	Metadata TemplateMetadata `json:"metadata,omitempty"`
	// Spec is the Transfers' spec.
	Spec TransferSpec `json:"spec"`
}

// TemplateMetadata is the labels and annotations a template gives.
type TemplateMetadata struct {
	// Labels for the Transfers.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations for the Transfers.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// TransferScheduleSpec is when to make Transfers, and which.
type TransferScheduleSpec struct {
	// Schedule is a cron expression (five fields: minute, hour, day of
	// month, month, day of week; or a descriptor such as @daily or
	// @every 1h).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Schedule string `json:"schedule"`

	// TimeZone is the IANA time zone the schedule is read in, such as
	// Europe/Paris; UTC when unset.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	TimeZone string `json:"timeZone,omitempty"`

	// StartingDeadlineSeconds is how late a missed run may still start
	// (after the controller was down); later runs are skipped. Unset: a
	// run missed by more than one period is skipped.
	// +kubebuilder:validation:Minimum=0
	// +optional
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`

	// ConcurrencyPolicy: Allow, Forbid (skip a run while the previous one
	// runs) or Replace (delete the running one).
	// +kubebuilder:default=Forbid
	// +optional
	ConcurrencyPolicy ConcurrencyPolicy `json:"concurrencyPolicy,omitempty"`

	// Suspend holds every further run back.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// SuccessfulTransfersHistoryLimit is how many succeeded Transfers are
	// kept; older ones are deleted.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=3
	// +optional
	SuccessfulTransfersHistoryLimit *int32 `json:"successfulTransfersHistoryLimit,omitempty"`

	// FailedTransfersHistoryLimit is how many failed Transfers are kept.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=1
	// +optional
	FailedTransfersHistoryLimit *int32 `json:"failedTransfersHistoryLimit,omitempty"`

	// TransferTemplate is the Transfer made at each run.
	TransferTemplate TransferTemplate `json:"transferTemplate"`
}

// TransferScheduleStatus is what the schedule did last.
type TransferScheduleStatus struct {
	// Conditions: Ready, Reconciling and Stalled, as kstatus reads them.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the generation of the spec the status
	// describes; -1 until the controller has seen the schedule.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Active lists the schedule's Transfers that have not finished.
	// +listType=atomic
	// +optional
	Active []string `json:"active,omitempty"`

	// LastScheduleTime is when the last Transfer was due.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`

	// LastSuccessfulTime is when the last Transfer that succeeded
	// finished.
	// +optional
	LastSuccessfulTime *metav1.Time `json:"lastSuccessfulTime,omitempty"`

	// NextScheduleTime is when the next Transfer is due.
	// +optional
	NextScheduleTime *metav1.Time `json:"nextScheduleTime,omitempty"`
}

// TransferSchedule makes Transfers on a cron schedule, as a CronJob makes
// Jobs: "every night at two, pull from the partner" is one object. Its
// name is at most 52 characters, as a CronJob's: its Transfers are named
// after it and the run's time, and labelled with it.
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 52",message="a TransferSchedule's name is at most 52 characters"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sftpts,categories=sftpgate
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Suspend",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Last schedule",type=date,JSONPath=`.status.lastScheduleTime`
// +kubebuilder:printcolumn:name="Next",type=date,JSONPath=`.status.nextScheduleTime`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TransferSchedule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TransferScheduleSpec `json:"spec"`
	// +kubebuilder:default={"observedGeneration":-1}
	// +optional
	Status TransferScheduleStatus `json:"status,omitempty"`
}

// GetConditions gives the shared status code the conditions.
func (s *TransferSchedule) GetConditions() *[]metav1.Condition { return &s.Status.Conditions }

// +kubebuilder:object:root=true

// TransferScheduleList is a list of TransferSchedules.
type TransferScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TransferSchedule `json:"items"`
}
