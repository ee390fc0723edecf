package tenant

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/webui/internal/web"
)

// teamObject reads into obj the team's object the path names ({name}):
// errNotFound when the team has none of that name.
func (u *Pages) teamObject(r *http.Request, obj client.Object) error {
	err := u.Client.Get(r.Context(), client.ObjectKey{Namespace: web.AccountFrom(r.Context()).Namespace, Name: chi.URLParam(r, "name")}, obj)
	if apierrors.IsNotFound(err) {
		return web.ErrNotFound
	}
	return err
}
