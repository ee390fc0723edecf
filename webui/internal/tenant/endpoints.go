package tenant

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"reflect"

	"github.com/go-chi/chi/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/webui/internal/gw"
	"github.com/sftpgate/sftpgate/webui/internal/web"
)

// EndpointKind is a kind whose files the file browser and share links
// reach through the gateway, a row each (a new kind is a row): its pages
// are under /<Path>/{name}. SftpConnections also have pages of their own
// (connections.go); the others are made with kubectl or GitOps, and
// listed beside them.
type EndpointKind struct {
	// Kind is as ConnectionReferences name it.
	Kind string
	// Path is its pages' first path segment.
	Path string
	// Label says in a word what it is.
	Label string
	// Resource is its resource, whose files subresource RBAC grants a
	// team's roles (config/rbac/webui/team_roles.yaml).
	Resource string
	list     func() client.ObjectList
}

// EndpointKinds are the kinds the file browser reaches.
var EndpointKinds = []*EndpointKind{
	{Kind: v1alpha1.KindSftpConnection, Path: "connections", Label: "SFTP", Resource: "sftpconnections",
		list: func() client.ObjectList { return &v1alpha1.SftpConnectionList{} }},
	{Kind: v1alpha1.KindFtpConnection, Path: "ftpconnections", Label: "FTP", Resource: "ftpconnections",
		list: func() client.ObjectList { return &v1alpha1.FtpConnectionList{} }},
	{Kind: v1alpha1.KindObjectStore, Path: "objectstores", Label: "S3", Resource: "objectstores",
		list: func() client.ObjectList { return &v1alpha1.ObjectStoreList{} }},
}

// kindOf is e's row.
func kindOf(e v1alpha1.Endpoint) *EndpointKind {
	for _, k := range EndpointKinds {
		if empty, _ := v1alpha1.NewEndpoint(k.Kind); reflect.TypeOf(empty) == reflect.TypeOf(e) {
			return k
		}
	}
	panic(fmt.Sprintf("no row for a %T", e))
}

// base is where e's pages are.
func base(e v1alpha1.Endpoint) string { return "/" + kindOf(e).Path + "/" + e.GetName() }

// filesAt is the folder page of dir on e.
func filesAt(e v1alpha1.Endpoint, dir string) string {
	return base(e) + "/files?path=" + url.QueryEscape(dir)
}

// ref is e as ApiKeys, ShareLinks and audit records name it.
func ref(e v1alpha1.Endpoint) string {
	return v1alpha1.ConnectionReference{Kind: kindOf(e).Kind, Name: e.GetName()}.String()
}

// WithEndpoint runs fn with the object of kind the URL names, of the
// request's account, or answers 404: any other account's is simply not
// found.
func (u *Pages) WithEndpoint(kind string, fn func(http.ResponseWriter, *http.Request, v1alpha1.Endpoint) error) web.PageFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		e, ok := v1alpha1.NewEndpoint(kind)
		if !ok {
			return web.ErrNotFound
		}
		err := u.Client.Get(r.Context(), client.ObjectKey{Namespace: web.AccountFrom(r.Context()).Namespace, Name: chi.URLParam(r, "name")}, e)
		switch {
		case apierrors.IsNotFound(err):
			return web.ErrNotFound
		case err != nil:
			return err
		}
		return fn(w, r, e)
	}
}

// endpoints are the account's objects of every kind, SftpConnections
// first.
func (u *Pages) endpoints(ctx context.Context, namespace string) ([]v1alpha1.Endpoint, error) {
	var all []v1alpha1.Endpoint
	for _, k := range EndpointKinds {
		list := k.list()
		if err := u.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return nil, err
		}
		if err := meta.EachListItem(list, func(o runtime.Object) error {
			all = append(all, o.(v1alpha1.Endpoint)) //nolint:forcetypeassert // the row's list
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return all, nil
}

// endpointView is e as the pages show it; an SftpConnection's own pages
// show more (View).
func (u *Pages) endpointView(e v1alpha1.Endpoint) connView {
	k := kindOf(e)
	v := connView{Name: e.GetName(), Kind: k.Label, Base: base(e), Home: base(e), Slug: gw.Slug(e),
		State: "testing", Headline: "Testing the connection…"}
	switch c := e.(type) {
	case *v1alpha1.SftpConnection:
		v.Server = fmt.Sprintf("%s@%s:%d", c.Spec.Username, c.Spec.Host, c.Spec.Port)
	case *v1alpha1.FtpConnection:
		v.Home = filesAt(e, "/")
		v.Server = fmt.Sprintf("%s@%s:%d", c.Spec.Username, c.Spec.Host, c.Spec.PortOrDefault())
	case *v1alpha1.ObjectStore:
		v.Home = filesAt(e, "/")
		v.Server = fmt.Sprintf("%s/%s at %s", c.Spec.Bucket, c.Spec.Prefix, c.Spec.Endpoint)
	}
	if v.Slug == "" {
		v.State, v.Headline = "failed", "Not served at the gateway"
		v.Message = "Its files can be browsed once its spec names a slug."
		return v
	}
	v.Endpoint = u.GatewayURL + "/" + v.Slug + "/"
	test := e.GetTestStatus()
	if test.LastTestTime != nil {
		v.LastTest = test.LastTestTime.Time
	}
	ready := meta.FindStatusCondition(*e.GetConditions(), v1alpha1.ConditionReady)
	requested := e.GetAnnotations()[v1alpha1.AnnotationTestRequestedAt]
	if ready == nil || ready.ObservedGeneration != e.GetGeneration() || (requested != "" && requested != test.LastHandledTestRequest) {
		return v
	}
	v.Message = ready.Message
	v.Headline = cmp.Or(headlines[ready.Reason], ready.Reason)
	v.State = "failed"
	if ready.Status == metav1.ConditionTrue {
		v.State = "ready"
	}
	return v
}

// EndpointStatus is the live status the connection pages poll.
func (u *Pages) EndpointStatus(w http.ResponseWriter, _ *http.Request, e v1alpha1.Endpoint) error {
	v := u.endpointView(e)
	if c, ok := e.(*v1alpha1.SftpConnection); ok {
		v = u.View(c)
	}
	w.Header().Set("Cache-Control", "no-store")
	web.WriteJSON(w, http.StatusOK, map[string]any{"state": v.State, "headline": v.Headline, "message": v.Message,
		"fingerprint": v.Fingerprint, "serverVersion": v.ServerVersion, "lastTested": web.Ago(v.LastTest)})
	return nil
}
