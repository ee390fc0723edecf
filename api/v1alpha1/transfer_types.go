package v1alpha1

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TransferMode says whether the source files stay.
// +kubebuilder:validation:Enum=Copy;Move
type TransferMode string

// What becomes of the source files.
const (
	// TransferCopy leaves the source files.
	TransferCopy TransferMode = "Copy"
	// TransferMove removes each source file once its copy is complete and
	// verified at the destination.
	TransferMove TransferMode = "Move"
)

// OverwritePolicy says what a transfer does with a file already at the
// destination.
// +kubebuilder:validation:Enum=Never;IfDifferent;Always
type OverwritePolicy string

// What becomes of a file already at the destination.
const (
	// OverwriteNever leaves it, and skips the source file.
	OverwriteNever OverwritePolicy = "Never"
	// OverwriteIfDifferent replaces it when its size or modification time
	// differs from the source file's; otherwise the file is skipped.
	OverwriteIfDifferent OverwritePolicy = "IfDifferent"
	// OverwriteAlways replaces it.
	OverwriteAlways OverwritePolicy = "Always"
)

// VerifyMethod is how a copy is checked before it takes the target's
// name.
// +kubebuilder:validation:Enum=Size;SHA256
type VerifyMethod string

// How a copy is checked.
const (
	// VerifySize compares the sizes.
	VerifySize VerifyMethod = "Size"
	// VerifySHA256 reads both files and compares their SHA-256 digests.
	VerifySHA256 VerifyMethod = "SHA256"
)

// Reasons of a Transfer's conditions (with ConnectionNotReady,
// InvalidSpec, OverQuota).
const (
	// ReasonQueued: the transfer waits for its namespace's running
	// transfers to finish (the worker's per-namespace cap).
	ReasonQueued = "Queued"
	// ReasonTransferring: files are being copied.
	ReasonTransferring = "Transferring"
	// ReasonRetrying: some files failed and wait for their next try.
	ReasonRetrying = "Retrying"
	// ReasonSucceeded: every file is at the destination, verified (or
	// skipped as the overwrite policy says).
	ReasonSucceeded = "Succeeded"
	// ReasonSourceNotFound: the source path is not on the server.
	ReasonSourceNotFound = "SourceNotFound"
	// ReasonPermissionDenied: a server refused a read or a write.
	ReasonPermissionDenied = "PermissionDenied"
	// ReasonDestinationFull: the destination server ran out of space or
	// quota.
	ReasonDestinationFull = "DestinationFull"
	// ReasonVerificationFailed: a copy did not match its source on every
	// try.
	ReasonVerificationFailed = "VerificationFailed"
	// ReasonFilesFailed: some files failed every try, for other reasons
	// (the status lists them).
	ReasonFilesFailed = "FilesFailed"
	// ReasonTooManyFiles: the source holds more files than a transfer may
	// copy.
	ReasonTooManyFiles = "TooManyFiles"
	// ReasonKeyNotFound: no key given decrypts a file, or a key given
	// cannot encrypt or sign (expired, revoked, of no such use).
	ReasonKeyNotFound = "KeyNotFound"
	// ReasonSignatureInvalid: a file's signature, which verifyWith
	// requires, is missing, does not verify, or is by another key.
	ReasonSignatureInvalid = "SignatureInvalid"
	// ReasonMessageCorrupt: a file to decrypt is cut short, altered, or
	// not an OpenPGP message.
	ReasonMessageCorrupt = "MessageCorrupt"
)

// OpenPGPKeyRef names a Secret of the transfer's namespace whose key
// "key" holds OpenPGP keys, armored or binary, as gpg --export (public)
// or --export-secret-keys (private) writes them; a private key's
// passphrase, if it has one, is the Secret's key "passphrase".
type OpenPGPKeyRef struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// OpenPGPEncrypt encrypts each file to its recipients, and signs it.
type OpenPGPEncrypt struct {
	// Recipients are Secrets of public keys: every key of each is a
	// recipient, and any of them decrypts the file.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Recipients []OpenPGPKeyRef `json:"recipients"`
	// SignWith is a Secret of the private key that signs each file.
	// +optional
	SignWith *OpenPGPKeyRef `json:"signWith,omitempty"`
	// Armor writes ASCII armor (-----BEGIN PGP MESSAGE-----) rather than
	// binary.
	// +optional
	Armor bool `json:"armor,omitempty"`
}

// OpenPGPDecrypt decrypts each file, and verifies its signature.
type OpenPGPDecrypt struct {
	// KeySecretRef is a Secret of the private keys that decrypt the
	// files: any of them that a file is encrypted to.
	KeySecretRef OpenPGPKeyRef `json:"keySecretRef"`
	// VerifyWith are Secrets of public keys: when given, a file must be
	// signed by one of their keys, or it fails with SignatureInvalid and
	// nothing is written.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	VerifyWith []OpenPGPKeyRef `json:"verifyWith,omitempty"`
}

// TransferOpenPGP encrypts or decrypts each file on its way, streamed:
// the result is written under a temporary name and takes the target's
// name only once the whole message is written (encrypting) or decrypted
// and verified (decrypting). A file cut off mid-way starts over.
// +kubebuilder:validation:XValidation:rule="has(self.encrypt) != has(self.decrypt)",message="give either encrypt or decrypt"
type TransferOpenPGP struct {
	// +optional
	Encrypt *OpenPGPEncrypt `json:"encrypt,omitempty"`
	// +optional
	Decrypt *OpenPGPDecrypt `json:"decrypt,omitempty"`
	// Rename is the target's name: {name} is the source file's name,
	// {stem} its name without a last .pgp, .gpg or .asc. Empty: {name}.pgp
	// when encrypting ({name}.asc armored), {stem} when decrypting.
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:XValidation:rule="self.contains('{name}') || self.contains('{stem}')",message="must contain {name} or {stem}: every file would get the same name"
	// +kubebuilder:validation:XValidation:rule="!self.contains('/')",message="a name, not a path: no /"
	// +optional
	Rename string `json:"rename,omitempty"`
}

// TransferSource is the files a transfer copies: one path (a file, or a
// folder whose files are copied), or a list of files.
// +kubebuilder:validation:XValidation:rule="has(self.path) != has(self.paths)",message="give either path or paths"
// +kubebuilder:validation:XValidation:rule="!has(self.paths) || (!has(self.include) && !has(self.exclude) && !self.recursive)",message="include, exclude and recursive apply to a folder path, not to paths"
type TransferSource struct {
	// ConnectionRef names the SftpConnection or ObjectStore, of this
	// namespace, that the files are read from.
	ConnectionRef ConnectionReference `json:"connectionRef"`

	// Path is a file, or a folder whose files (filtered by include and
	// exclude, and below it with recursive) are copied.
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/') && !self.split('/').exists(p, p == '..' || p == '.')",message="must be an absolute path without . or .. parts"
	// +kubebuilder:validation:XValidation:rule="!self.contains('//') && (self == '/' || !self.endsWith('/'))",message="must have no empty parts: no // and no trailing /"
	// +optional
	Path string `json:"path,omitempty"`

	// Paths lists files to copy, each to the destination folder under its
	// own name (two with the same name are refused).
	// +kubebuilder:validation:MinItems=1
	// Each is an absolute path without . or .. parts.
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=1024
	// +kubebuilder:validation:items:Pattern=`^(/([^/.][^/]*|\.[^/.][^/]*|\.\.[^/]+))+$`
	// +optional
	Paths []string `json:"paths,omitempty"`

	// Recursive copies the files of the folders below a folder path too,
	// down to maxDepth, keeping their relative paths.
	// +optional
	Recursive bool `json:"recursive,omitempty"`

	// MaxDepth is how many levels of folders below path a recursive
	// transfer reads.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=32
	// +kubebuilder:default=8
	// +optional
	MaxDepth int32 `json:"maxDepth,omitempty"`

	// Include lists glob patterns (as Go's path.Match: *, ?, [a-z]) of the
	// files of a folder path copied, matched against a file's name and its
	// path below the folder; empty copies every file.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=256
	// +optional
	Include []string `json:"include,omitempty"`

	// Exclude lists glob patterns of files never copied, matched as
	// include's. sftpgate's own temporary files are never copied either
	// way.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=256
	// +optional
	Exclude []string `json:"exclude,omitempty"`
}

// What is the source's path, or its paths joined with commas: what a
// person reads of it.
func (s *TransferSource) What() string {
	if len(s.Paths) > 0 {
		return strings.Join(s.Paths, ", ")
	}
	return s.Path
}

// TransferDestination is the folder files are copied into.
type TransferDestination struct {
	// ConnectionRef names the SftpConnection or ObjectStore, of this
	// namespace, that the files are written to. It may be the source's.
	ConnectionRef ConnectionReference `json:"connectionRef"`

	// Path is the folder the files are written to (made if missing).
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/') && !self.split('/').exists(p, p == '..' || p == '.')",message="must be an absolute folder without . or .. parts"
	Path string `json:"path"`
}

// TransferRetry is how often a file that failed is tried again.
type TransferRetry struct {
	// Limit is how many more times a failed file is tried.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=20
	// +kubebuilder:default=3
	// +optional
	Limit *int32 `json:"limit,omitempty"`

	// Backoff is the wait before the first retry; it doubles with each
	// further one, up to ten minutes.
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('1h')",message="must be between 1s and 1h"
	// +optional
	Backoff *metav1.Duration `json:"backoff,omitempty"`
}

// TransferSpec is a batch of files to copy or move between two servers.
type TransferSpec struct {
	// Source is the files copied.
	Source TransferSource `json:"source"`

	TransferOptions `json:",inline"`
}

// TransferOptions are where a transfer writes its files and how: all of
// its spec but the source. An SftpWatch's transfer makes a Transfer of
// them for each file it reports.
type TransferOptions struct {
	// Destination is the folder they are written to.
	Destination TransferDestination `json:"destination"`

	// Mode: Copy leaves the source files; Move removes each once its copy
	// is complete and verified.
	// +kubebuilder:default=Copy
	// +optional
	Mode TransferMode `json:"mode,omitempty"`

	// Overwrite says what becomes of a file already at the destination:
	// Never skips it, IfDifferent replaces it when its size or
	// modification time differs, Always replaces it.
	// +kubebuilder:default=Never
	// +optional
	Overwrite OverwritePolicy `json:"overwrite,omitempty"`

	// Verify is how each copy is checked before it takes its name: Size,
	// or SHA256 (reading both files).
	// +kubebuilder:default=Size
	// +optional
	Verify VerifyMethod `json:"verify,omitempty"`

	// Parallelism is how many streams copy files at once (the worker's
	// per-namespace cap may allow fewer): each copies one file, or up to
	// four small ones (256 KiB or less; never more than parallelism) at
	// once.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=32
	// +kubebuilder:default=4
	// +optional
	Parallelism int32 `json:"parallelism,omitempty"`

	// Retry is how often a file that failed is tried again.
	// +kubebuilder:default={}
	// +optional
	Retry TransferRetry `json:"retry,omitempty"`

	// OpenPGP encrypts or decrypts each file on its way, and renames it.
	// +optional
	OpenPGP *TransferOpenPGP `json:"openPGP,omitempty"`

	// TTLSecondsAfterFinished deletes the Transfer this long after it
	// finished (succeeded or stalled); unset keeps it.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// Sink, when set, gets a CloudEvent when the transfer finishes:
	// dev.sftpgate.transfer.succeeded or dev.sftpgate.transfer.failed.
	// +optional
	Sink *Destination `json:"sink,omitempty"`

	// Delivery is how the finishing event is retried.
	// +kubebuilder:default={}
	// +optional
	Delivery DeliverySpec `json:"delivery,omitempty"`

	// SigningSecretRef names a Secret of this namespace whose key "secret"
	// signs the event as SftpWatch's does.
	// +optional
	SigningSecretRef *LocalSecretReference `json:"signingSecretRef,omitempty"`
}

// TransferFileCounts counts a transfer's files.
type TransferFileCounts struct {
	// Total is how many files the transfer copies.
	// +optional
	Total int32 `json:"total,omitempty"`
	// Done is how many are at the destination, verified.
	// +optional
	Done int32 `json:"done,omitempty"`
	// Skipped is how many were left as the overwrite policy says.
	// +optional
	Skipped int32 `json:"skipped,omitempty"`
	// Failed is how many failed every try.
	// +optional
	Failed int32 `json:"failed,omitempty"`
}

// TransferByteCounts counts a transfer's bytes.
type TransferByteCounts struct {
	// Total is the size of the files to copy.
	// +optional
	Total int64 `json:"total,omitempty"`
	// Done is the bytes of the files done, and of the parts of files under
	// way that are at the destination.
	// +optional
	Done int64 `json:"done,omitempty"`
}

// TransferFailure is a file that failed every try.
type TransferFailure struct {
	// Path is the source file, below the source path.
	Path string `json:"path"`
	// Reason is the failure's kind, such as PermissionDenied.
	Reason string `json:"reason"`
	// Message says what happened.
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message"`
}

// TriggeredBy names the watch that made a transfer, and the event.
type TriggeredBy struct {
	// Watch is the SftpWatch's name.
	Watch string `json:"watch"`
	// EventID is the id of the CloudEvent of the file's change (sent or
	// not): the transfer's name ends with it.
	EventID string `json:"eventID"`
}

// Labels and annotations of a Transfer an SftpWatch made.
const (
	// LabelWatch is the SftpWatch's name.
	LabelWatch = "sftpgate.dev/watch"
	// AnnotationEventID is the id of the event of the file's change.
	AnnotationEventID = "sftpgate.dev/event-id"
	// AnnotationTraceParent is the W3C traceparent of the span that made
	// the Transfer (the watch's trigger of it), with tracing on: the
	// spans of its files' copies link to it.
	AnnotationTraceParent = "sftpgate.dev/traceparent"
)

// MaxTransferFailures is how many failed files a Transfer's status lists;
// moreFailures counts the rest.
const MaxTransferFailures = 20

// TransferStatus is what the worker did with the transfer so far.
type TransferStatus struct {
	// Conditions: Ready, Reconciling and Stalled, as kstatus reads them.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the generation of the spec the status
	// describes; -1 until a worker has seen the transfer.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Worker names the worker replica that runs the transfer.
	// +optional
	Worker string `json:"worker,omitempty"`

	// StartTime is when a worker started the transfer.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime is when it finished: succeeded or stalled.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// Files counts the files.
	// +optional
	Files TransferFileCounts `json:"files,omitempty"`

	// Bytes counts the bytes.
	// +optional
	Bytes TransferByteCounts `json:"bytes,omitempty"`

	// Progress is files done of the total and the share of bytes, for
	// kubectl get.
	// +optional
	Progress string `json:"progress,omitempty"`

	// BytesPerSecond is the current rate.
	// +optional
	BytesPerSecond int64 `json:"bytesPerSecond,omitempty"`

	// Failures lists the files that failed every try, the first
	// MaxTransferFailures of them.
	// +kubebuilder:validation:MaxItems=20
	// +optional
	Failures []TransferFailure `json:"failures,omitempty"`

	// MoreFailures counts the failed files beyond those listed.
	// +optional
	MoreFailures int32 `json:"moreFailures,omitempty"`

	// SinkURI is where the finishing event goes: spec.sink resolved.
	// +optional
	SinkURI string `json:"sinkURI,omitempty"`

	// EventDelivered says that the sink took the finishing event.
	// +optional
	EventDelivered bool `json:"eventDelivered,omitempty"`

	// LastError is the last failure, for people.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	LastError string `json:"lastError,omitempty"`

	// TriggeredBy names the SftpWatch that made the transfer for a file
	// it reported (the owner reference that is a watch's, and the event
	// annotation).
	// +optional
	TriggeredBy *TriggeredBy `json:"triggeredBy,omitempty"`
}

// Transfer copies or moves files from one SftpConnection's server to
// another's (or within one), as a worker replica runs it: each file is
// written under a temporary name, verified, then renamed into place, and a
// transfer cut off resumes where it stopped.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sftpt,categories=sftpgate
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.spec.source.connectionRef.name`
// +kubebuilder:printcolumn:name="Destination",type=string,JSONPath=`.spec.destination.connectionRef.name`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.progress`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.files.failed`,priority=1
// +kubebuilder:printcolumn:name="Rate",type=integer,JSONPath=`.status.bytesPerSecond`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Transfer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec cannot change once made: a new batch is a new Transfer.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a Transfer's spec cannot change; create another Transfer"
	// +required
	Spec TransferSpec `json:"spec"`
	// +kubebuilder:default={"observedGeneration":-1}
	// +optional
	Status TransferStatus `json:"status,omitempty"`
}

// GetConditions gives the shared status code the conditions.
func (t *Transfer) GetConditions() *[]metav1.Condition { return &t.Status.Conditions }

// TargetName is the name a file called name gets at the destination: its
// own, or as spec.openPGP.rename says.
func (s *TransferOptions) TargetName(name string) string {
	p := s.OpenPGP
	if p == nil {
		return name
	}
	rule := p.Rename
	switch {
	case rule != "":
	case p.Encrypt != nil && p.Encrypt.Armor:
		rule = "{name}.asc"
	case p.Encrypt != nil:
		rule = "{name}.pgp"
	default:
		rule = "{stem}"
	}
	stem := name
	for _, ext := range []string{".pgp", ".gpg", ".asc"} {
		if s, ok := strings.CutSuffix(name, ext); ok && s != "" {
			stem = s
			break
		}
	}
	return strings.NewReplacer("{name}", name, "{stem}", stem).Replace(rule)
}

// MadeBy is the owner reference of the SftpWatch that made t (its
// spec.transfer), or nil.
func (t *Transfer) MadeBy() *metav1.OwnerReference {
	for i, o := range t.OwnerReferences {
		if o.Kind == "SftpWatch" && o.APIVersion == GroupVersion.String() {
			return &t.OwnerReferences[i]
		}
	}
	return nil
}

// The keys of a Secret named by an OpenPGPKeyRef: the keys, and a private
// key's passphrase.
const (
	OpenPGPSecretKey        = "key"
	OpenPGPSecretPassphrase = "passphrase"
)

// KeyRefs are the Secrets p names, by the kind of key each must hold.
func (p *TransferOpenPGP) KeyRefs() (private, public []string) {
	if d := p.Decrypt; d != nil {
		private = append(private, d.KeySecretRef.Name)
		for _, k := range d.VerifyWith {
			public = append(public, k.Name)
		}
	}
	if e := p.Encrypt; e != nil {
		for _, k := range e.Recipients {
			public = append(public, k.Name)
		}
		if e.SignWith != nil {
			private = append(private, e.SignWith.Name)
		}
	}
	return private, public
}

// Finished reports whether the transfer succeeded or stalled for good.
func (t *Transfer) Finished() bool { return t.Status.CompletionTime != nil }

// +kubebuilder:object:root=true

// TransferList is a list of Transfers.
type TransferList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Transfer `json:"items"`
}
