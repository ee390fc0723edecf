package deliver

import (
	"context"
	"fmt"
	"net/url"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// SinkError is a sink without an address: the reason a person reads.
type SinkError struct{ msg string }

func (e *SinkError) Error() string { return e.msg }

// Resolve returns d's address, as Knative resolves a Destination: its
// uri as it is, or its ref's address with uri resolved against it. A ref
// is a Service of the namespace (its cluster address, port 80) or an
// object with status.address.url (a Knative Broker, Channel or Service).
// It reads through c, uncached: only the objects asked about.
func Resolve(ctx context.Context, c client.Reader, namespace string, d v1alpha1.Destination) (string, error) {
	var base *url.URL
	if ref := d.Ref; ref != nil {
		addr, err := refAddress(ctx, c, namespace, ref)
		if err != nil {
			return "", err
		}
		if base, err = url.Parse(addr); err != nil {
			return "", &SinkError{fmt.Sprintf("%s %s has the address %q, which is not a URL", ref.Kind, ref.Name, addr)}
		}
	}
	if d.URI == "" {
		return base.String(), nil
	}
	u, err := url.Parse(d.URI)
	if err != nil {
		return "", &SinkError{fmt.Sprintf("the sink's uri %q is not a URL", d.URI)}
	}
	if base != nil {
		u = base.ResolveReference(u)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", &SinkError{fmt.Sprintf("the sink's address %q is not an absolute http or https URL", u)}
	}
	return u.String(), nil
}

func refAddress(ctx context.Context, c client.Reader, namespace string, ref *v1alpha1.KReference) (string, error) {
	key := client.ObjectKey{Namespace: namespace, Name: ref.Name}
	if ref.APIVersion == "v1" && ref.Kind == "Service" {
		var svc corev1.Service
		if err := c.Get(ctx, key, &svc); err != nil {
			return "", refError(ref, err)
		}
		return fmt.Sprintf("http://%s.%s.svc.cluster.local", svc.Name, svc.Namespace), nil
	}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(ref.APIVersion)
	u.SetKind(ref.Kind)
	if err := c.Get(ctx, key, u); err != nil {
		return "", refError(ref, err)
	}
	addr, _, _ := unstructured.NestedString(u.Object, "status", "address", "url")
	if addr == "" {
		return "", &SinkError{fmt.Sprintf("%s %s has no address yet (status.address.url)", ref.Kind, ref.Name)}
	}
	return addr, nil
}

// refError says why a ref cannot be read, in words for its owner; errors
// of the API server's own pass on.
func refError(ref *v1alpha1.KReference, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return &SinkError{fmt.Sprintf("there is no %s %s in this namespace", ref.Kind, ref.Name)}
	case meta.IsNoMatchError(err):
		return &SinkError{fmt.Sprintf("the cluster has no kind %s in %s", ref.Kind, ref.APIVersion)}
	case apierrors.IsForbidden(err):
		return &SinkError{fmt.Sprintf("the worker may not read %s %s: sinks may be Services or Knative Brokers, Channels and Services", ref.Kind, ref.Name)}
	}
	return err
}
