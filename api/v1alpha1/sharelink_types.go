package v1alpha1

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ShareMode is what a share link lets its holder do.
// +kubebuilder:validation:Enum=Download;Upload
type ShareMode string

// Share modes.
const (
	// ShareDownload: list the folder (or see the file) and download.
	ShareDownload ShareMode = "Download"
	// ShareUpload: upload files into the folder, a drop box, and nothing
	// else: no listing, no download, no overwrite.
	ShareUpload ShareMode = "Upload"
)

// Reasons of a ShareLink's Ready condition, with ReasonExpired (past
// spec.expiresAt) as an ApiKey's.
const (
	// ReasonActive: the link works.
	ReasonActive = "Active"
	// ReasonUsedUp: status.uses reached spec.maxUses.
	ReasonUsedUp = "UsedUp"
	// ReasonConnectionNotFound: spec.connection names nothing of the
	// namespace.
	ReasonConnectionNotFound = "ConnectionNotFound"
)

// ShareState says whether link works at now by its own terms: Active,
// or Expired or UsedUp with why. The web UI refuses a use, and the
// manager writes Ready, by this one rule.
func ShareState(link *ShareLink, now time.Time) (reason, message string) {
	switch {
	case link.Spec.ExpiresAt != nil && !now.Before(link.Spec.ExpiresAt.Time):
		return ReasonExpired, "the link expired at " + link.Spec.ExpiresAt.UTC().Format(time.RFC3339)
	case link.Spec.MaxUses != nil && link.Status.Uses >= *link.Spec.MaxUses:
		return ReasonUsedUp, fmt.Sprintf("the link was used %d times, the most it may be", link.Status.Uses)
	}
	return ReasonActive, ""
}

// ShareLinkSpec is what a link shares, with whom, until when.
// +kubebuilder:validation:XValidation:rule="self.mode == 'Upload' || !has(self.upload)",message="upload limits apply to Upload links only"
type ShareLinkSpec struct {
	// Connection names what of this namespace the link shares the files
	// of: an SftpConnection by its name, or another kind the gateway
	// serves as Kind/name (FtpConnection/partner, ObjectStore/landing),
	// as an ApiKey's connections do. It must have a slug.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=267
	// +kubebuilder:validation:Pattern=`^((FtpConnection|ObjectStore)/)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Connection string `json:"connection"`

	// Path is a file or a folder (Download), or a folder (Upload), below
	// the connection's root; the link never reaches outside it, through
	// symlinks neither (the scope rules of an ApiKey's paths).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/`
	// +kubebuilder:validation:XValidation:rule="!self.matches('(^|/)[.][.]?(/|$)')",message="path is absolute below the connection's root, without . or .. parts"
	Path string `json:"path"`

	// Mode: Download (the default) or Upload.
	// +kubebuilder:default=Download
	// +optional
	Mode ShareMode `json:"mode,omitempty"`

	// TokenSHA256 is the hex SHA-256 of the link's token, which is
	// sgs_, base64url (unpadded) of "<namespace>/<name>", _, and at least
	// 32 random characters; the token itself is never stored. The web UI
	// makes it, and shows the link once.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	TokenSHA256 string `json:"tokenSHA256"`

	// ExpiresAt ends the link.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`

	// MaxUses ends the link after so many uses: each file downloaded, each
	// upload started. No limit when unset.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	MaxUses *int64 `json:"maxUses,omitempty"`

	// PasswordHash is a bcrypt hash of a password the holder must also
	// give (a form, or HTTP Basic with any user name for curl).
	// +kubebuilder:validation:MaxLength=72
	// +kubebuilder:validation:Pattern=`^\$2[aby]\$[0-9]{2}\$[./A-Za-z0-9]{53}$`
	// +optional
	PasswordHash string `json:"passwordHash,omitempty"`

	// AllowedCIDRs limit the client addresses the link works from.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.all(c, isCIDR(c))",message="allowedCIDRs are CIDRs such as 203.0.113.0/24"
	// +listType=set
	// +optional
	AllowedCIDRs []string `json:"allowedCIDRs,omitempty"`

	// Upload limits what an Upload link takes.
	// +optional
	Upload *ShareUploadLimits `json:"upload,omitempty"`
}

// ShareUploadLimits bound what a drop box takes.
type ShareUploadLimits struct {
	// MaxFileBytes is the largest file taken.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxFileBytes *int64 `json:"maxFileBytes,omitempty"`

	// AllowedNames are globs (path.Match) a file's name must match, such
	// as *.csv; any name when empty.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=128
	// +listType=set
	// +optional
	AllowedNames []string `json:"allowedNames,omitempty"`
}

// ShareLinkStatus is the link's state and use.
type ShareLinkStatus struct {
	// Conditions: Ready (Active, Expired, UsedUp), as kstatus reads them.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the generation of the spec the conditions
	// describe; -1 until the manager has seen the link.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Uses counts the files downloaded and the uploads started through the
	// link, each counted before it is served.
	// +optional
	Uses int64 `json:"uses,omitempty"`

	// LastUsedTime is when the link was last used.
	// +optional
	LastUsedTime *metav1.Time `json:"lastUsedTime,omitempty"`
}

// ShareLink shares a file or a folder of a connection with someone who
// has no account, such as a partner: a link to download from, or to
// upload into (a drop box), until it expires, is used up, or is deleted.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=sftpgate
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 48",message="a ShareLink's name is at most 48 characters"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Path",type=string,JSONPath=`.spec.path`
// +kubebuilder:printcolumn:name="Uses",type=integer,JSONPath=`.status.uses`
// +kubebuilder:printcolumn:name="Max",type=integer,JSONPath=`.spec.maxUses`
// +kubebuilder:printcolumn:name="Expires",type=date,JSONPath=`.spec.expiresAt`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ShareLink struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ShareLinkSpec `json:"spec"`
	// +kubebuilder:default={"observedGeneration":-1}
	// +optional
	Status ShareLinkStatus `json:"status,omitempty"`
}

// GetConditions gives the shared status code the conditions.
func (s *ShareLink) GetConditions() *[]metav1.Condition { return &s.Status.Conditions }

// +kubebuilder:object:root=true

// ShareLinkList is a list of ShareLinks.
type ShareLinkList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ShareLink `json:"items"`
}

// ShareTokenPrefix begins every share link's token.
const ShareTokenPrefix = "sgs_"

// NewShareToken is a token for the link namespace/name: it names the
// link, so that the web UI finds it without reading every namespace's,
// and holds 260 random bits. The link keeps its SHA-256 (tokenSHA256).
func NewShareToken(namespace, name string) string {
	return ShareTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(namespace+"/"+name)) + "_" + rand.Text() + rand.Text()
}
