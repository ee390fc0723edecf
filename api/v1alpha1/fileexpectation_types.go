package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ExpectationOutcome is what became of a window of a FileExpectation.
// +kubebuilder:validation:Enum=Met;Missed;Late;NotProcessed
type ExpectationOutcome string

// The outcomes of a window, in the order a window may have them: Met or
// NotProcessed; or Missed, then perhaps Late, and NotProcessed after
// that.
const (
	// OutcomeMet: the files came, settled, before the deadline (and were
	// picked up in time, if spec.pickUpWithin says they must be).
	OutcomeMet ExpectationOutcome = "Met"
	// OutcomeMissed: at the deadline they had not come.
	OutcomeMissed ExpectationOutcome = "Missed"
	// OutcomeLate: they came after the window was missed.
	OutcomeLate ExpectationOutcome = "Late"
	// OutcomeNotProcessed: they came, but one was still in the folder
	// spec.pickUpWithin after it came.
	OutcomeNotProcessed ExpectationOutcome = "NotProcessed"
)

// ConditionOnTime is a FileExpectation's condition that says how its
// last decided window went: True when Met, False with the outcome as its
// reason. Ready does not read it: a missed window is news, not a broken
// object.
const ConditionOnTime = "OnTime"

// Reasons of a FileExpectation's conditions (and ReasonConnectionNotReady,
// ReasonPathNotFound, ReasonSinkNotFound, ReasonSinkNotAllowed,
// ReasonSinkUnreachable, ReasonDeliveryFailing, ReasonInvalidSpec,
// ReasonOverQuota, ReasonStateBudgetExceeded, as a watch's).
const (
	// ReasonExpecting: the worker lists the folder and decides the
	// windows.
	ReasonExpecting = "Expecting"
	// ReasonCalendarNotFound: spec.schedule.calendarRef names no
	// HolidayCalendar.
	ReasonCalendarNotFound = "CalendarNotFound"
	// ReasonNoWindowDecided: OnTime's reason before the first window is
	// decided.
	ReasonNoWindowDecided = "NoWindowDecided"
)

// ExpectedFiles says which files a window expects.
// +kubebuilder:validation:XValidation:rule="!has(self.maxSize) || !has(self.minSize) || self.minSize <= self.maxSize",message="minSize must not be above maxSize"
type ExpectedFiles struct {
	// Include lists glob patterns (as Go's path.Match: *, ?, [a-z])
	// matched against a file's name; a file matching any counts.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	Include []string `json:"include"`
	// MinCount is how many files must come in a window.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=1
	// +optional
	MinCount int32 `json:"minCount,omitempty"`
	// MinSize is the least size, in bytes, of a file that counts (an
	// empty file is often a failed export).
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinSize *int64 `json:"minSize,omitempty"`
	// MaxSize is the largest size, in bytes, of a file that counts.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxSize *int64 `json:"maxSize,omitempty"`
}

// ExpectationSchedule is when files are expected: windows that open on
// a cron schedule in a time zone and close at a deadline.
type ExpectationSchedule struct {
	// Opens is a cron expression (five fields: minute, hour, day of
	// month, month, day of week) of when each window opens: files that
	// come from then on count for it.
	// +kubebuilder:validation:MinLength=9
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('@') && self.split(' ').filter(f, f != '').size() == 5",message="must be five cron fields, not a descriptor: a window a minute at the most"
	Opens string `json:"opens"`
	// TimeZone is the IANA time zone opens and skipDates are read in,
	// such as Europe/Berlin; UTC when unset.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	TimeZone string `json:"timeZone,omitempty"`
	// Deadline is how long after it opens (on the time zone's clock: a
	// window from 00:00 with a deadline of 6h ends at 06:00 even on the
	// night the clocks change) a window's files must have come.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m') && duration(self) <= duration('744h')",message="must be between 1m and 744h (31 days)"
	Deadline metav1.Duration `json:"deadline"`
	// SkipDates are dates (YYYY-MM-DD, in timeZone) on which no window
	// opens, such as holidays.
	// +kubebuilder:validation:MaxItems=400
	// +kubebuilder:validation:items:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`
	// +listType=set
	// +optional
	SkipDates []string `json:"skipDates,omitempty"`
	// CalendarRef names a HolidayCalendar of this namespace whose dates
	// are skipped too: one list of a team's holidays for all its
	// expectations.
	// +optional
	CalendarRef *LocalObjectReference `json:"calendarRef,omitempty"`
}

// LocalObjectReference names an object of the referring object's kind's
// choosing in its namespace.
type LocalObjectReference struct {
	// Name of the object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// FileExpectationSpec is which files must come to a folder, and when.
type FileExpectationSpec struct {
	// ConnectionRef names the SftpConnection, FtpConnection or
	// ObjectStore of this namespace whose folder (a key prefix, on a
	// store) is expected to receive the files.
	ConnectionRef ConnectionReference `json:"connectionRef"`

	// Path is the folder, below the connection's root.
	// +kubebuilder:default="/"
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/') && !self.split('/').exists(p, p == '..' || p == '.')",message="must be an absolute folder without . or .. parts"
	// +optional
	Path string `json:"path,omitempty"`

	// Files says which files are expected.
	Files ExpectedFiles `json:"files"`

	// Schedule says when.
	Schedule ExpectationSchedule `json:"schedule"`

	// PickUpWithin, when set, is how soon after it came each counted file
	// must be gone from the folder (moved or deleted, by a watch's
	// afterDelivery, a triggered transfer or the partner's own job); one
	// still there then makes the window NotProcessed.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m') && duration(self) <= duration('744h')",message="must be between 1m and 744h (31 days)"
	// +optional
	PickUpWithin *metav1.Duration `json:"pickUpWithin,omitempty"`

	// PollInterval is how often the folder is listed; it is listed at
	// each deadline besides.
	// +kubebuilder:default="1m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s')",message="must be at least 10s"
	// +optional
	PollInterval *metav1.Duration `json:"pollInterval,omitempty"`

	// Stability holds a file back until it stopped changing: a file still
	// being written at the deadline has not come.
	// +kubebuilder:default={}
	// +optional
	Stability Stability `json:"stability,omitempty"`

	// Sink is where each outcome goes as a CloudEvent
	// (dev.sftpgate.expectation.met, .missed, .late, .notprocessed);
	// without one, outcomes are in the status, the metrics, the audit
	// trail and the object's events only.
	// +optional
	Sink *Destination `json:"sink,omitempty"`

	// Delivery is how events are retried.
	// +kubebuilder:default={}
	// +optional
	Delivery DeliverySpec `json:"delivery,omitempty"`

	// SigningSecretRef names a Secret of this namespace whose key
	// "secret" (whsec_ and base64, as Standard Webhooks' secrets) signs
	// each event, as a watch's.
	// +optional
	SigningSecretRef *LocalSecretReference `json:"signingSecretRef,omitempty"`
}

// ExpectationWindow is one window: when it opened and its deadline.
type ExpectationWindow struct {
	// Opens is when the window opened: files count from then on.
	Opens metav1.Time `json:"opens"`
	// Deadline is when its files were due.
	Deadline metav1.Time `json:"deadline"`
}

// ExpectedFile is a file a window counted.
type ExpectedFile struct {
	// Name is the file's name in the folder.
	// +kubebuilder:validation:MaxLength=1024
	Name string `json:"name"`
	// Size is its size in bytes, as listed.
	Size int64 `json:"size"`
	// Came is when it settled in the folder (or, for one that came while
	// the worker was down, its modification time).
	Came metav1.Time `json:"came"`
	// Gone is when it left the folder, if it did.
	// +optional
	Gone *metav1.Time `json:"gone,omitempty"`
}

// ExpectationResult is one outcome of a window.
type ExpectationResult struct {
	Outcome ExpectationOutcome `json:"outcome"`
	Window  ExpectationWindow  `json:"window"`
	// Time is when the outcome happened by the rules: the deadline for
	// Missed, the last needed file's coming for Met and Late, a file's
	// pick-up limit for NotProcessed.
	Time metav1.Time `json:"time"`
	// DecidedTime is when the worker decided it: more than a poll interval
	// after time, the worker was down or the folder could not be listed
	// meanwhile, and the outcome was decided late, from what the listing
	// showed and the files' times.
	DecidedTime metav1.Time `json:"decidedTime"`
	// Files are the files counted, the first to come.
	// +kubebuilder:validation:MaxItems=10
	// +optional
	Files []ExpectedFile `json:"files,omitempty"`
	// FileCount is how many files were counted; files lists ten at most.
	// +optional
	FileCount int32 `json:"fileCount,omitempty"`
}

// FileExpectationStatus is what the worker decided of the expectation.
type FileExpectationStatus struct {
	// Conditions: Ready, Reconciling and Stalled, as kstatus reads them,
	// and OnTime, how the last decided window went.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the generation of the spec the status
	// describes; -1 until a worker has seen the expectation.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Worker names the worker replica that holds the expectation.
	// +optional
	Worker string `json:"worker,omitempty"`

	// SinkURI is where outcomes go: spec.sink resolved.
	// +optional
	SinkURI string `json:"sinkURI,omitempty"`

	// CurrentWindow is the window being decided.
	// +optional
	CurrentWindow *ExpectationWindow `json:"currentWindow,omitempty"`

	// NextDeadline is the next deadline still ahead.
	// +optional
	NextDeadline *metav1.Time `json:"nextDeadline,omitempty"`

	// LastOutcomes are the last outcomes, the newest first (the worker's
	// --expectation-outcomes-kept, ten by default).
	// +kubebuilder:validation:MaxItems=50
	// +optional
	LastOutcomes []ExpectationResult `json:"lastOutcomes,omitempty"`

	// LastMetTime is when a window was last Met.
	// +optional
	LastMetTime *metav1.Time `json:"lastMetTime,omitempty"`

	// Missed counts the windows missed since the expectation was made.
	// +optional
	Missed int64 `json:"missed,omitempty"`

	// Pending is how many outcomes wait to be delivered to the sink.
	// +optional
	Pending int32 `json:"pending,omitempty"`

	// LastError is the last listing's or delivery's failure, for people.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	LastError string `json:"lastError,omitempty"`
}

// FileExpectation says which files must come to a folder by when: on a
// schedule of windows in a time zone, each window's outcome (Met,
// Missed, Late, NotProcessed) is decided by a worker replica from the
// folder's listings, announced as a CloudEvent, recorded in the audit
// trail and kept in the status.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fexp,categories=sftpgate
// +kubebuilder:printcolumn:name="Connection",type=string,JSONPath=`.spec.connectionRef.name`
// +kubebuilder:printcolumn:name="Path",type=string,JSONPath=`.spec.path`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Last",type=string,JSONPath=`.status.lastOutcomes[0].outcome`
// +kubebuilder:printcolumn:name="Next deadline",type=date,JSONPath=`.status.nextDeadline`
// +kubebuilder:printcolumn:name="Missed",type=integer,JSONPath=`.status.missed`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Sink",type=string,JSONPath=`.status.sinkURI`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type FileExpectation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec FileExpectationSpec `json:"spec"`
	// +kubebuilder:default={"observedGeneration":-1}
	// +optional
	Status FileExpectationStatus `json:"status,omitempty"`
}

// GetConditions gives the shared status code the conditions.
func (e *FileExpectation) GetConditions() *[]metav1.Condition { return &e.Status.Conditions }

// +kubebuilder:object:root=true

// FileExpectationList is a list of FileExpectations.
type FileExpectationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FileExpectation `json:"items"`
}

// HolidayCalendarSpec lists dates.
type HolidayCalendarSpec struct {
	// Dates (YYYY-MM-DD, in each expectation's time zone) on which the
	// expectations that name the calendar open no window.
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`
	// +listType=set
	// +optional
	Dates []string `json:"dates,omitempty"`
}

// HolidayCalendar is a list of dates to skip, shared by the
// FileExpectations of its namespace that name it (a team's public
// holidays, a market's closing days).
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=hcal,categories=sftpgate
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type HolidayCalendar struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec HolidayCalendarSpec `json:"spec,omitempty"`
}

// +kubebuilder:object:root=true

// HolidayCalendarList is a list of HolidayCalendars.
type HolidayCalendarList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HolidayCalendar `json:"items"`
}
