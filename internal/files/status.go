package files

// SSH_FX status codes (draft-ietf-secsh-filexfer-13) that sftpgate tells
// apart.
const (
	FxNoSuchFile        = 2
	FxPermissionDenied  = 3
	FxFailure           = 4
	FxNoConnection      = 6
	FxConnectionLost    = 7
	FxOpUnsupported     = 8
	FxFileAlreadyExists = 11
	FxNoSpace           = 14
	FxQuotaExceeded     = 15
	FxDirNotEmpty       = 18
	FxNotADirectory     = 19
	FxFileIsADirectory  = 24
)
