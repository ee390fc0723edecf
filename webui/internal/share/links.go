package share

import (
	"encoding/base64"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// shareTokenPrefix begins every share link's token.
const shareTokenPrefix = v1alpha1.ShareTokenPrefix

// shareLinkOf is where a share link's token names it.
func shareLinkOf(token string) (namespace, name string, ok bool) {
	rest, ok := strings.CutPrefix(token, shareTokenPrefix)
	if !ok {
		return "", "", false
	}
	// base64url has _ too: the secret (base32 or hex) is after the last.
	i := strings.LastIndexByte(rest, '_')
	if i < 0 {
		return "", "", false
	}
	locator := rest[:i]
	raw, err := base64.RawURLEncoding.DecodeString(locator)
	if err != nil {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(string(raw), "/")
	// Only names Kubernetes can hold: any other would reach the API
	// server's URL (a "/", "..", a megabyte) and fail there, not be found.
	return namespace, name, ok && len(validation.IsDNS1123Label(namespace)) == 0 && len(validation.IsDNS1123Subdomain(name)) == 0
}

// LinkView is a link as the pages show it: never its token.
type LinkView struct {
	Name, Connection, Path, Mode, State, Message string
	Uses                                         int64
	MaxUses                                      *int64
	Expires                                      *time.Time
	Password                                     bool
	CIDRs                                        string
}

// ViewShare is a link as the lists show it.
func ViewShare(s *v1alpha1.ShareLink) LinkView {
	state, message := v1alpha1.ShareState(s, time.Now())
	v := LinkView{Name: s.Name, Connection: s.Spec.Connection, Path: s.Spec.Path, Mode: string(s.Spec.Mode), State: state,
		Message: message, Uses: s.Status.Uses, MaxUses: s.Spec.MaxUses, Password: s.Spec.PasswordHash != "",
		CIDRs: strings.Join(s.Spec.AllowedCIDRs, ", ")}
	if s.Spec.ExpiresAt != nil {
		t := s.Spec.ExpiresAt.Time
		v.Expires = &t
	}
	return v
}
