package deliver

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// Settings are a delivery spec read and checked, with its signing key.
type Settings struct {
	// Retry is how many tries follow a failed first one.
	Retry int32
	// Policy and Delay make the wait between tries (Backoff).
	Policy  v1alpha1.BackoffPolicy
	Delay   time.Duration
	Timeout time.Duration
	Signing Signing
}

// ReadSettings reads d, and the signing Secret signing names in
// namespace, checking what the API server's validation could not.
func ReadSettings(ctx context.Context, c client.Reader, namespace string, d v1alpha1.DeliverySpec, signing *v1alpha1.LocalSecretReference) (Settings, error) {
	s := Settings{Retry: 5, Policy: d.BackoffPolicy, Delay: time.Second, Timeout: 10 * time.Second}
	if d.Retry != nil {
		s.Retry = *d.Retry
	}
	var err error
	if d.BackoffDelay != "" {
		if s.Delay, err = ParseDuration(d.BackoffDelay); err != nil {
			return s, fmt.Errorf("delivery.backoffDelay: %w", err)
		}
	}
	if d.Timeout != "" {
		if s.Timeout, err = ParseDuration(d.Timeout); err != nil {
			return s, fmt.Errorf("delivery.timeout: %w", err)
		}
		if s.Timeout <= 0 || s.Timeout > MaxTimeout {
			return s, fmt.Errorf("delivery.timeout: %s is not between 0 and %s", d.Timeout, MaxTimeout)
		}
	}
	if signing != nil {
		var secret corev1.Secret
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: signing.Name}, &secret); err != nil {
			return s, fmt.Errorf("the signing Secret %s cannot be read: %w", signing.Name, client.IgnoreNotFound(err))
		}
		if s.Signing, err = ParseSigning(string(secret.Data["secret"])); err != nil {
			return s, fmt.Errorf("the signing Secret %s: %w", signing.Name, err)
		}
	}
	return s, nil
}
