// Package share is what a partner with a share link sees, with no
// account: a file or folder to download, or a drop box to upload into,
// each use counted on the ShareLink and audited; and the links
// themselves (links.go), which the tenant's pages make.
package share

import (
	"github.com/sftpgate/sftpgate/webui/internal/gw"
)

// Pages are the partner's.
type Pages struct{ *gw.Gateway }
