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

// createNoted makes obj, of kind, noted for the request's record; the API
// server's refusals become words for the form.
func (u *Pages) createNoted(r *http.Request, kind string, obj client.Object) error {
	err := u.Client.Create(r.Context(), obj)
	web.NoteObject(r, kind, obj.GetName())
	if apierrors.IsInvalid(err) {
		err = &web.PersonError{Msg: "The server refused these settings: " + invalidCauses(err)}
	}
	return u.quotaReached(err)
}
