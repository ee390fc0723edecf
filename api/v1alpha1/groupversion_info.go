// Package v1alpha1 contains the sftpgate.dev/v1alpha1 API: SftpConnection,
// one remote SFTP server the gateway serves under a slug; ApiKey, a bearer
// token for the gateway; SftpWatch, a watched folder that sends events;
// Transfer and TransferSchedule, files copied between servers; ObjectStore,
// a bucket of an S3-compatible store that transfers and watches reach as
// they do an SFTP server; FtpConnection, an FTP or FTPS server they reach
// the same way; AuditSink, where a namespace's audit records go.
// +kubebuilder:object:generate=true
// +groupName=sftpgate.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "sftpgate.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&SftpConnection{}, &SftpConnectionList{},
		&ApiKey{}, &ApiKeyList{},
		&SftpWatch{}, &SftpWatchList{},
		&Transfer{}, &TransferList{},
		&TransferSchedule{}, &TransferScheduleList{},
		&ObjectStore{}, &ObjectStoreList{},
		&FtpConnection{}, &FtpConnectionList{},
		&AuditSink{}, &AuditSinkList{},
		&ShareLink{}, &ShareLinkList{},
		&FileExpectation{}, &FileExpectationList{},
		&HolidayCalendar{}, &HolidayCalendarList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
