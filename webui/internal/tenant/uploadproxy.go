package tenant

import (
	"net/http"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/webui/internal/gw"
)

// Uploads from the file browser: the browser speaks tus to the UI's own
// origin, /connections/<name>/uploads/ (or another kind's path), and the
// UI forwards each request,
// streaming, to the gateway's uploads endpoint of that connection as the
// account (its file browser key). The browser never holds a credential
// but its session cookie; the UI never holds a file.

// UploadProxy forwards a tus request for connection c.
func (u *Pages) UploadProxy(w http.ResponseWriter, r *http.Request, c v1alpha1.Endpoint) error {
	token, err := u.FilesKey(r.Context(), c.GetNamespace())
	if err != nil {
		return err
	}
	return u.ProxyUpload(w, r, token, c, base(c)+"/uploads/", gw.UploadRules{})
}
