package v1alpha1

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// WatchEvent is a change to a watched folder that a watch reports.
// +kubebuilder:validation:Enum=Created;Modified;Deleted
type WatchEvent string

// The changes a watch reports.
const (
	// WatchCreated is a file that appeared, once it is stable.
	WatchCreated WatchEvent = "Created"
	// WatchModified is a file whose size or modification time changed,
	// once it is stable again.
	WatchModified WatchEvent = "Modified"
	// WatchDeleted is a file that is gone.
	WatchDeleted WatchEvent = "Deleted"
)

// InitialState says what a new watch makes of the files already there.
// +kubebuilder:validation:Enum=Snapshot;EmitExisting
type InitialState string

const (
	// InitialSnapshot reports only what changes from the first poll on.
	InitialSnapshot InitialState = "Snapshot"
	// InitialEmitExisting reports the files already there as created.
	InitialEmitExisting InitialState = "EmitExisting"
)

// AfterDeliveryAction is what becomes of a file once its event is
// delivered.
// +kubebuilder:validation:Enum=None;Delete;Move
type AfterDeliveryAction string

// What becomes of a delivered file: left, removed, or moved.
const (
	AfterDeliveryNone   AfterDeliveryAction = "None"
	AfterDeliveryDelete AfterDeliveryAction = "Delete"
	AfterDeliveryMove   AfterDeliveryAction = "Move"
)

// BackoffPolicy is how the delay between delivery attempts grows.
// +kubebuilder:validation:Enum=linear;exponential
type BackoffPolicy string

// How the delay between tries grows.
const (
	BackoffLinear      BackoffPolicy = "linear"
	BackoffExponential BackoffPolicy = "exponential"
)

// Reasons of an SftpWatch's conditions.
const (
	// ReasonWatching: the watch polls its folder and delivers its events.
	ReasonWatching = "Watching"
	// ReasonFirstPoll: the watch's current spec has not been polled yet.
	ReasonFirstPoll = "FirstPoll"
	// ReasonConnectionNotReady: the connection is missing or not Ready.
	ReasonConnectionNotReady = "ConnectionNotReady"
	// ReasonSinkNotFound: the sink's ref names no object, or one with no
	// address yet.
	ReasonSinkNotFound = "SinkNotFound"
	// ReasonSinkNotAllowed: the sink's address is one the worker may not
	// reach (its dial policy).
	ReasonSinkNotAllowed = "SinkNotAllowed"
	// ReasonSinkUnreachable: the sink does not answer: its address does not
	// resolve, refuses connections, or a try timed out.
	ReasonSinkUnreachable = "SinkUnreachable"
	// ReasonPathNotFound: the watched folder is not on the server.
	ReasonPathNotFound = "PathNotFound"
	// ReasonDirectoryTooLarge: the folder holds more files than a watch
	// may track.
	ReasonDirectoryTooLarge = "DirectoryTooLarge"
	// ReasonDeliveryFailing: the sink answers, but not with 2xx: events
	// wait for it (or for the dead-letter sink).
	ReasonDeliveryFailing = "DeliveryFailing"
	// ReasonInvalidSpec: the spec cannot work as it is (the message says
	// why), which the API server's validation could not tell.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonOverQuota (watches and transfers): the namespace has more
	// watches than it may, or the cluster runs as many watches, or web UI
	// accounts as many watches or transfers, as it holds (the worker's
	// totals); the watch is not polled, the transfer waits its turn.
	ReasonOverQuota = "OverQuota"
	// ReasonStateBudgetExceeded (watches and transfers): what sftpgate
	// stores for the namespace is at its budget, so the state or plan
	// cannot be stored; the watch waits (it polls no more), the transfer
	// copies nothing until there is room.
	ReasonStateBudgetExceeded = "StateBudgetExceeded"
	// ReasonTransfersAtLimit: the namespace has as many Transfers made by
	// watches as it may: the next file's waits until one is deleted.
	ReasonTransfersAtLimit = "TransfersAtLimit"
	// ReasonReplicaAtCapacity: the worker replica holding the watch tracks
	// as many files as it may (its memory's bound); the watch waits for
	// room, polling no more meanwhile.
	ReasonReplicaAtCapacity = "ReplicaAtCapacity"
)

// ConnectionReference names an SftpConnection or an ObjectStore of the
// same namespace: the files a watch or a transfer works on.
type ConnectionReference struct {
	// Kind is what Name names: an SftpConnection (the default), an
	// FtpConnection or an ObjectStore.
	// +kubebuilder:validation:Enum=SftpConnection;FtpConnection;ObjectStore
	// +kubebuilder:default=SftpConnection
	// +optional
	Kind string `json:"kind,omitempty"`
	// Name is the object's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// Kinds a ConnectionReference names.
const (
	KindSftpConnection = "SftpConnection"
	KindFtpConnection  = "FtpConnection"
	KindObjectStore    = "ObjectStore"
)

// String is how status and events name it: "name" for an SftpConnection,
// "Kind/name" for another kind.
func (r ConnectionReference) String() string {
	if r.Kind != "" && r.Kind != KindSftpConnection {
		return r.Kind + "/" + r.Name
	}
	return r.Name
}

// ParseConnectionReference reads what String writes, as ApiKeys' and
// ShareLinks' connections name an object: "name" or "Kind/name".
func ParseConnectionReference(s string) ConnectionReference {
	if i := strings.IndexByte(s, '/'); i >= 0 {
		return ConnectionReference{Kind: s[:i], Name: s[i+1:]}
	}
	return ConnectionReference{Kind: KindSftpConnection, Name: s}
}

// KReference names an object of the same namespace whose
// status.address.url is where events go, as Knative's Destination does: a
// Knative Broker, Channel or Service, or a plain Kubernetes Service (its
// cluster address, http://name.namespace.svc.cluster.local, port 80).
type KReference struct {
	// APIVersion is the object's group and version, such as
	// eventing.knative.dev/v1 or v1.
	// +kubebuilder:validation:MinLength=1
	APIVersion string `json:"apiVersion"`
	// Kind is the object's kind, such as Broker or Service.
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
	// Name is the object's name, in the watch's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// Destination is where events go: an object's address (ref) or a URI, as
// Knative's duckv1.Destination. With both, uri is resolved against ref's
// address.
// +kubebuilder:validation:XValidation:rule="has(self.ref) || has(self.uri)",message="give a ref or a uri"
type Destination struct {
	// +optional
	Ref *KReference `json:"ref,omitempty"`
	// URI is an absolute http or https URL, or, with ref, a path relative
	// to ref's address.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	URI string `json:"uri,omitempty"`
}

// DeliverySpec is how events are retried, as Knative's delivery spec.
type DeliverySpec struct {
	// Retry is how many times a failed delivery is tried again before the
	// event goes to the dead-letter sink (or, without one, waits for the
	// sink to come back).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=5
	// +optional
	Retry *int32 `json:"retry,omitempty"`
	// BackoffPolicy is how the delay grows between tries: linear
	// (backoffDelay times the try) or exponential (backoffDelay times 2 to
	// the try).
	// +kubebuilder:default=exponential
	// +optional
	BackoffPolicy BackoffPolicy `json:"backoffPolicy,omitempty"`
	// BackoffDelay is the first delay, an ISO 8601 duration such as PT1S.
	// +kubebuilder:validation:Pattern=`^P(T(\d+H)?(\d+M)?(\d+(\.\d+)?S)?)$`
	// +kubebuilder:validation:XValidation:rule="self != 'PT' && self != 'P'",message="give a duration such as PT1S"
	// +kubebuilder:default="PT1S"
	// +optional
	BackoffDelay string `json:"backoffDelay,omitempty"`
	// Timeout bounds one try, an ISO 8601 duration such as PT10S.
	// +kubebuilder:validation:Pattern=`^P(T(\d+H)?(\d+M)?(\d+(\.\d+)?S)?)$`
	// +kubebuilder:validation:XValidation:rule="self != 'PT' && self != 'P'",message="give a duration such as PT10S"
	// +kubebuilder:default="PT10S"
	// +optional
	Timeout string `json:"timeout,omitempty"`
	// DeadLetterSink gets an event that failed every try.
	// +optional
	DeadLetterSink *Destination `json:"deadLetterSink,omitempty"`
}

// Stability holds a file back until it stopped changing.
type Stability struct {
	// MinAge is how long a file's size and modification time must stay
	// the same, seen by two polls at least that far apart, before it is
	// reported: a file still being uploaded never is.
	// +kubebuilder:default="10s"
	// +optional
	MinAge *metav1.Duration `json:"minAge,omitempty"`
}

// AfterDelivery is what becomes of a file once its event is delivered
// and, with spec.transfer, once its transfer finished.
// +kubebuilder:validation:XValidation:rule="!has(self.action) || self.action != 'Move' || has(self.moveTo)",message="action Move needs moveTo"
type AfterDelivery struct {
	// Action: None leaves the file; Delete removes it; Move moves it to
	// moveTo. Created and Modified events only.
	// +kubebuilder:default=None
	// +optional
	Action AfterDeliveryAction `json:"action,omitempty"`
	// MoveTo is the folder, below the connection's root and outside the
	// watched path, that delivered files are moved to.
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/') && !self.split('/').exists(p, p == '..' || p == '.')",message="must be an absolute folder without . or .. parts"
	// +optional
	MoveTo string `json:"moveTo,omitempty"`
	// FailedTo is the folder that files whose events went to the
	// dead-letter sink (or failed every try), or whose transfer failed,
	// are moved to; empty leaves them.
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/') && !self.split('/').exists(p, p == '..' || p == '.')",message="must be an absolute folder without . or .. parts"
	// +optional
	FailedTo string `json:"failedTo,omitempty"`
}

// SftpWatchSpec is a folder to watch and where its changes go.
// +kubebuilder:validation:XValidation:rule="has(self.sink) || has(self.transfer)",message="give a sink, a transfer, or both"
// +kubebuilder:validation:XValidation:rule="!has(self.transfer) || !has(self.transfer.ttlSecondsAfterFinished) || self.transfer.ttlSecondsAfterFinished >= 60",message="transfer.ttlSecondsAfterFinished must leave the watch a minute to see how the transfer ended"
type SftpWatchSpec struct {
	// ConnectionRef names the SftpConnection, or the ObjectStore, of this
	// namespace whose folder (a key prefix, on a store) is watched.
	ConnectionRef ConnectionReference `json:"connectionRef"`

	// Path is the folder watched, below the connection's root.
	// +kubebuilder:default="/"
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/') && !self.split('/').exists(p, p == '..' || p == '.')",message="must be an absolute folder without . or .. parts"
	// +optional
	Path string `json:"path,omitempty"`

	// Recursive watches the folders below path too, down to maxDepth.
	// +optional
	Recursive bool `json:"recursive,omitempty"`

	// MaxDepth is how many levels of folders below path a recursive watch
	// looks into.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=32
	// +kubebuilder:default=8
	// +optional
	MaxDepth int32 `json:"maxDepth,omitempty"`

	// Include lists glob patterns (as Go's path.Match: *, ?, [a-z]) of the
	// files reported, matched against a file's name and against its path
	// below the watched folder; empty reports every file.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=256
	// +optional
	Include []string `json:"include,omitempty"`

	// Exclude lists glob patterns of files never reported, matched as
	// include's. By default the common names of files still being uploaded;
	// the gateway's own temporary files are never reported either way.
	// +kubebuilder:default={"*.part","*.filepart","*.tmp","*.crdownload",".~*"}
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=256
	// +optional
	Exclude []string `json:"exclude,omitempty"`

	// Events lists the changes reported.
	// +kubebuilder:default={"Created"}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=3
	// +listType=set
	// +optional
	Events []WatchEvent `json:"events,omitempty"`

	// PollInterval is how often the folder is listed.
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('5s')",message="must be at least 5s"
	// +optional
	PollInterval *metav1.Duration `json:"pollInterval,omitempty"`

	// Stability holds a file back until it stopped changing.
	// +kubebuilder:default={}
	// +optional
	Stability Stability `json:"stability,omitempty"`

	// InitialState says what a new watch makes of the files already there.
	// +kubebuilder:default=Snapshot
	// +optional
	InitialState InitialState `json:"initialState,omitempty"`

	// AfterDelivery is what becomes of a file once its event is delivered
	// (and its transfer finished).
	// +kubebuilder:default={}
	// +optional
	AfterDelivery AfterDelivery `json:"afterDelivery,omitempty"`

	// Sink is where the events go.
	// +optional
	Sink *Destination `json:"sink,omitempty"`

	// Transfer, when set, makes a Transfer of each file reported as
	// created or modified, from the watch's connection to transfer's
	// destination (below it, the file's folder below path), named after
	// the change's event id: one Transfer per change, even after a
	// restart. afterDelivery then waits for the transfer: the file goes
	// to moveTo (or is deleted) once it succeeded, to failedTo if it
	// failed. Without ttlSecondsAfterFinished, the Transfers are deleted
	// an hour after they finish.
	// +optional
	Transfer *TransferOptions `json:"transfer,omitempty"`

	// Delivery is how events are retried.
	// +kubebuilder:default={}
	// +optional
	Delivery DeliverySpec `json:"delivery,omitempty"`

	// SigningSecretRef names a Secret of this namespace whose key
	// "secret" (whsec_ and base64, as Standard Webhooks' secrets) signs
	// each event in the webhook-id, webhook-timestamp and
	// webhook-signature headers, for receivers that are plain webhooks.
	// +optional
	SigningSecretRef *LocalSecretReference `json:"signingSecretRef,omitempty"`
}

// SftpWatchStatus is what the worker last did with the watch.
type SftpWatchStatus struct {
	// Conditions: Ready, Reconciling and Stalled, as kstatus reads them.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the generation of the spec the status
	// describes; -1 until a worker has seen the watch.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// SinkURI is where events go: spec.sink resolved.
	// +optional
	SinkURI string `json:"sinkURI,omitempty"`

	// DeadLetterSinkURI is where events that failed every try go.
	// +optional
	DeadLetterSinkURI string `json:"deadLetterSinkURI,omitempty"`

	// Worker names the worker replica that holds the watch.
	// +optional
	Worker string `json:"worker,omitempty"`

	// LastPollTime is when the folder was last listed, written with any
	// other change of the status, and on its own at most every 6 hours
	// (each watch from 3 hours, by its UID): it may be that old while the
	// folder is polled at its interval.
	// +optional
	LastPollTime *metav1.Time `json:"lastPollTime,omitempty"`

	// Files is how many files the watch tracks.
	// +optional
	Files int32 `json:"files,omitempty"`

	// Pending is how many events wait to be delivered.
	// +optional
	Pending int32 `json:"pending,omitempty"`

	// Delivered counts the events the sink took.
	// +optional
	Delivered int64 `json:"delivered,omitempty"`
	// Failed counts the tries that failed.
	// +optional
	Failed int64 `json:"failed,omitempty"`
	// DeadLettered counts the events sent to the dead-letter sink.
	// +optional
	DeadLettered int64 `json:"deadLettered,omitempty"`

	// Transfers counts the Transfers of spec.transfer.
	// +optional
	Transfers WatchTransferCounts `json:"transfers,omitempty"`

	// LastError is the last poll's or delivery's failure, for people.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	LastError string `json:"lastError,omitempty"`
}

// WatchTransferCounts counts the Transfers a watch made.
type WatchTransferCounts struct {
	// Started counts the Transfers made.
	// +optional
	Started int64 `json:"started,omitempty"`
	// Running is how many of them have not finished.
	// +optional
	Running int32 `json:"running,omitempty"`
	// Succeeded counts those that succeeded.
	// +optional
	Succeeded int64 `json:"succeeded,omitempty"`
	// Failed counts those that failed.
	// +optional
	Failed int64 `json:"failed,omitempty"`
	// Last names the Transfer made last.
	// +optional
	Last string `json:"last,omitempty"`
}

// SftpWatch watches a folder of an SftpConnection and sends a CloudEvent
// to its sink for each file that arrives, changes or goes, and makes a
// Transfer of each file that arrives or changes. A worker
// replica polls it; the watches are divided among the replicas through
// Leases.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sftpw,categories=sftpgate
// +kubebuilder:printcolumn:name="Connection",type=string,JSONPath=`.spec.connectionRef.name`
// +kubebuilder:printcolumn:name="Path",type=string,JSONPath=`.spec.path`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Delivered",type=integer,JSONPath=`.status.delivered`
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.pending`
// +kubebuilder:printcolumn:name="Transfers",type=integer,JSONPath=`.status.transfers.started`,priority=1
// +kubebuilder:printcolumn:name="Last poll",type=date,JSONPath=`.status.lastPollTime`,priority=1
// +kubebuilder:printcolumn:name="Sink",type=string,JSONPath=`.status.sinkURI`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SftpWatch struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec SftpWatchSpec `json:"spec"`
	// +kubebuilder:default={"observedGeneration":-1}
	// +optional
	Status SftpWatchStatus `json:"status,omitempty"`
}

// GetConditions gives the shared status code the conditions.
func (w *SftpWatch) GetConditions() *[]metav1.Condition { return &w.Status.Conditions }

// +kubebuilder:object:root=true

// SftpWatchList is a list of SftpWatches.
type SftpWatchList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SftpWatch `json:"items"`
}

// Endpoint is an object the gateway serves at its slug: an
// SftpConnection, an FtpConnection or an ObjectStore.
// +kubebuilder:object:generate=false
type Endpoint interface {
	metav1.Object
	runtime.Object
	ClaimedSlug() string
	ServedSlug() *string
	GetConditions() *[]metav1.Condition
	GetTestStatus() *TestStatus
}

// EndpointKinds are the kinds of Endpoint, as a ConnectionReference
// names them.
var EndpointKinds = []string{KindSftpConnection, KindFtpConnection, KindObjectStore}

// NewEndpoint is an empty object of kind, if it is an Endpoint's.
func NewEndpoint(kind string) (Endpoint, bool) {
	switch kind {
	case KindSftpConnection, "":
		return &SftpConnection{}, true
	case KindFtpConnection:
		return &FtpConnection{}, true
	case KindObjectStore:
		return &ObjectStore{}, true
	}
	return nil, false
}
