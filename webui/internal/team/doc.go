// Package team decides who a request acts as: the team a person acts in
// (theirs, the one they chose, or for someone with none of their own the
// one that added them) and their role there, asked of RBAC; and lets a
// page serve only those RBAC allows its permission (May).
package team

import (
	"github.com/sftpgate/sftpgate/webui/internal/gw"
)

// Teams decides, for the pages.
type Teams struct{ *gw.Gateway }
