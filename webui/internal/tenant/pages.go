// Package tenant is the pages of a team's members: connections and their
// files, watches, transfers, API and OpenPGP keys, share links, members
// and teams, and the Activity page. Each acts in the team's namespace,
// once RBAC allowed the person what the route table asks (team.May).
package tenant

import (
	"github.com/sftpgate/sftpgate/webui/internal/team"
)

// Pages are the tenant's.
type Pages struct{ *team.Teams }
