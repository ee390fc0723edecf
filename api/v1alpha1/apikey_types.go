package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Command is the name of a gateway command: POST {base}/<slug>/<command>.
// +kubebuilder:validation:Enum=write;append;read;list;stat;exists;mkdir;rmdir;unlink;ping;rename;copy;chmod;chtimes;symlink;readlink;realpath;statvfs;hash
type Command string

// The gateway's commands.
const (
	CommandWrite  Command = "write"
	CommandAppend Command = "append"
	CommandRead   Command = "read"
	CommandList   Command = "list"
	CommandStat   Command = "stat"
	CommandExists Command = "exists"
	CommandMkdir  Command = "mkdir"
	CommandRmdir  Command = "rmdir"
	CommandUnlink Command = "unlink"
	CommandPing   Command = "ping"

	CommandRename   Command = "rename"
	CommandCopy     Command = "copy"
	CommandChmod    Command = "chmod"
	CommandChtimes  Command = "chtimes"
	CommandSymlink  Command = "symlink"
	CommandReadlink Command = "readlink"
	CommandRealpath Command = "realpath"
	CommandStatvfs  Command = "statvfs"
	CommandHash     Command = "hash"
)

// ReadOnlyCommands are the commands an ApiKey with readOnly may run: none
// changes anything on the server.
var ReadOnlyCommands = []Command{
	CommandRead, CommandList, CommandStat, CommandExists, CommandPing,
	CommandReadlink, CommandRealpath, CommandStatvfs, CommandHash,
}

// Ready reasons of an ApiKey.
const (
	ReasonIssued         = "Issued"
	ReasonExpired        = "Expired"
	ReasonDisabled       = "Disabled"
	ReasonInvalidToken   = "InvalidToken"
	ReasonSecretNotOwned = "SecretNotOwned"
	ReasonDuplicateToken = "DuplicateToken"
	// ReasonSecretNotFound is shared with SftpConnection.
)

// AnnotationRotateRequestedAt asks for a new generated token: whenever its
// value differs from status.lastHandledRotateRequest, the controller issues
// a new token into the same Secret and the old one stops working. Any new
// value works; the current time is the convention.
const AnnotationRotateRequestedAt = "sftpgate.dev/rotate-requested-at"

// SecretKeyToken is the key of the token in a Secret.
const SecretKeyToken = "token"

// LabelApiKeyToken marks a Secret of your own that ApiKeys may read their
// token from (value "true"). Without it an ApiKey cannot read the Secret, so
// that whoever may create ApiKeys cannot have other Secrets hashed.
const LabelApiKeyToken = "sftpgate.dev/api-key-token" //nolint:gosec // a label name, not a credential

// LabelAccount marks the namespace of a web UI account (its value names
// the account): a stranger who signed up, held to the smaller budgets and
// the stricter dial policy that docs/tenancy.md lists.
const LabelAccount = "sftpgate.dev/account"

// Labels on the Secrets the controller generates.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelApiKey    = "sftpgate.dev/apikey" //nolint:gosec // a label name, not a credential
	ManagedBy      = "sftpgate"
)

// ApiKeySpec says what a key may do and where its token lives.
// +kubebuilder:validation:XValidation:rule="!(has(self.readOnly) && self.readOnly && has(self.commands) && size(self.commands) > 0)",message="readOnly and commands are mutually exclusive"
type ApiKeySpec struct {
	// Connections the key may use: names of SftpConnections in the same
	// namespace, or of another kind the gateway serves as Kind/name
	// (FtpConnection/partner, ObjectStore/landing). Empty means all of
	// them. A key never reaches another namespace's connections.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=267
	// +kubebuilder:validation:items:Pattern=`^((FtpConnection|ObjectStore)/)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +listType=set
	// +optional
	Connections []string `json:"connections,omitempty"`

	// Commands the key may run. Empty means all, or the read-only ones with
	// readOnly.
	// +kubebuilder:validation:MaxItems=32
	// +listType=set
	// +optional
	Commands []Command `json:"commands,omitempty"`

	// Paths limit the key to parts of its connections' trees: prefixes
	// below the connection's root, such as /incoming/. Every path a command
	// names (both sides of rename, copy and symlink included) must be one of
	// them or below one, and so must where the server resolves it through
	// symlinks; a list of a directory outside them is refused, not
	// filtered. Empty means the whole tree.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=1024
	// +kubebuilder:validation:items:Pattern=`^/`
	// +kubebuilder:validation:XValidation:rule="self.all(p, !p.matches('(^|/)[.][.]?(/|$)'))",message="paths are absolute below the connection's root, such as /incoming/, without . or .. parts"
	// +listType=set
	// +optional
	Paths []string `json:"paths,omitempty"`

	// ReadOnly limits the key to commands that change nothing: read, list,
	// stat, exists, ping, readlink, realpath, statvfs and hash.
	// +optional
	ReadOnly bool `json:"readOnly,omitempty"`

	// ExpiresAt is when the key stops working.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`

	// Disabled revokes the key without deleting it.
	// +optional
	Disabled bool `json:"disabled,omitempty"`

	// Token says where the token lives. By default the controller generates
	// it into a Secret named like the ApiKey.
	// +optional
	Token TokenSource `json:"token,omitempty"`
}

// TokenSource is where a key's token lives: at most one of secretName,
// existingSecret and sha256. With none, the controller generates the token
// into a Secret named like the ApiKey.
// +kubebuilder:validation:XValidation:rule="(has(self.secretName) ? 1 : 0) + (has(self.existingSecret) ? 1 : 0) + (has(self.sha256) ? 1 : 0) <= 1",message="set at most one of secretName, existingSecret and sha256"
// +kubebuilder:validation:XValidation:rule="!has(self.keyID) || has(self.sha256)",message="keyID goes with sha256; other tokens carry their key id"
type TokenSource struct {
	// SecretName is the Secret the controller generates the token into (key
	// "token") and owns: it is deleted with the ApiKey. Defaults to the
	// ApiKey's name. The controller never overwrites a Secret it does not own.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +optional
	SecretName string `json:"secretName,omitempty"`

	// ExistingSecret is a Secret you provide (for example with sealed-secrets
	// or external-secrets), labelled sftpgate.dev/api-key-token=true; the
	// controller only reads and hashes it. A change of the token in it takes
	// effect at once. The token must be random: 32 to 1024 printable
	// characters, for example from "openssl rand -base64 32".
	// +optional
	ExistingSecret *SecretKeySelector `json:"existingSecret,omitempty"`

	// SHA256 is the hex SHA-256 of a token generated elsewhere; the token
	// itself never touches the cluster. The web UI makes keys this way.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	// +kubebuilder:validation:XValidation:rule="self != 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'",message="sha256 is the hash of an empty token"
	// +optional
	SHA256 string `json:"sha256,omitempty"`

	// KeyID is the key id of a token given by its sha256, shown in UIs and
	// logs. Defaults to the first characters of the hash.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]{4,16}$`
	// +optional
	KeyID string `json:"keyID,omitempty"`
}

// SecretKeySelector names a key of a Secret in the same namespace.
type SecretKeySelector struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Name string `json:"name"`

	// Key of the token in the Secret.
	// +kubebuilder:default=token
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +optional
	Key string `json:"key,omitempty"`
}

// ApiKeyStatus is what the controller issued. It never holds the token.
type ApiKeyStatus struct {
	// Conditions: Ready, true while the key works; its reason says why not
	// (Expired, Disabled, SecretNotFound, InvalidToken, SecretNotOwned,
	// DuplicateToken).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the generation of the spec the status describes;
	// -1 until the controller has seen the object, so that kstatus (kubectl
	// wait, Flux, Argo CD) reads a new object as in progress, not current.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// KeyID is a short, non-secret name of the token for UIs and logs; a
	// generated token carries it after its "sgk_" prefix.
	// +optional
	KeyID string `json:"keyID,omitempty"`

	// TokenSHA256 is the hex SHA-256 of the token: what the gateway matches a
	// presented token against.
	// +optional
	TokenSHA256 string `json:"tokenSHA256,omitempty"`

	// SecretName is the Secret that holds the token, if it is in the cluster.
	// +optional
	SecretName string `json:"secretName,omitempty"`

	// IssuedAt is when the current token was issued (or first seen).
	// +optional
	IssuedAt *metav1.Time `json:"issuedAt,omitempty"`

	// LastHandledRotateRequest is the value of the
	// sftpgate.dev/rotate-requested-at annotation the current token answers.
	// +optional
	LastHandledRotateRequest string `json:"lastHandledRotateRequest,omitempty"`

	// LastUsedTime is when a gateway last let a request in with the key,
	// to the minute: each replica writes it at most once a minute per key.
	// Unset for a key never used since it was recorded.
	// +optional
	LastUsedTime *metav1.Time `json:"lastUsedTime,omitempty"`
}

// ApiKey is a bearer token for the gateway, scoped to SftpConnections of
// its namespace. The controller keeps only the token's hash in status,
// which is all the gateway reads.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sgkey,categories=sftpgate
// +kubebuilder:printcolumn:name="Key ID",type=string,JSONPath=`.status.keyID`
// +kubebuilder:printcolumn:name="Connections",type=string,JSONPath=`.spec.connections`,description="Connections the key may use; none listed means all of the namespace's"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.spec.expiresAt`
// +kubebuilder:printcolumn:name="Last Used",type=date,JSONPath=`.status.lastUsedTime`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ApiKey struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec ApiKeySpec `json:"spec,omitempty"`
	// +kubebuilder:default={"observedGeneration":-1}
	// +optional
	Status ApiKeyStatus `json:"status,omitempty"`
}

// GetConditions gives the controllers' shared status code the conditions.
func (k *ApiKey) GetConditions() *[]metav1.Condition { return &k.Status.Conditions }

// +kubebuilder:object:root=true

// ApiKeyList is a list of ApiKeys.
type ApiKeyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ApiKey `json:"items"`
}
