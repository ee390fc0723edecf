// Package s3dial makes the clients of ObjectStores, within the dial
// policy SFTP connections follow (package sftpdial), and tests them: the
// one place that reads an ObjectStore's spec and Secret.
package s3dial

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	corev1 "k8s.io/api/core/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/egress"
	"github.com/sftpgate/sftpgate/internal/s3fs"
	"github.com/sftpgate/sftpgate/internal/tenants"
)

// Dialer makes clients whose every connection the policy checks (a
// redirect's too: the check is on the socket).
type Dialer struct {
	Policy egress.Policy
	// Tenants says which namespaces are web UI accounts', whose stores
	// follow Policy.ForAccounts.
	Tenants tenants.Kinds
	// Memory, when set, is what the pooled sessions' uploads in a
	// namespace hold their parts in.
	Memory func(namespace string) s3fs.Memory
}

// Store is a client of one ObjectStore, and what its files need.
type Store struct {
	Core   *minio.Core
	Config s3fs.Config
	// Host is the endpoint's host:port, as messages name it.
	Host string
}

// FS is the store's files until closed.
func (s *Store) FS() s3fs.FS { return s3fs.New(s.Config) }

// Client makes the client of store with the credentials in secret.
// Failures are *egress.Error values with an ObjectStore's reasons.
func (d *Dialer) Client(ctx context.Context, store *v1alpha1.ObjectStore, secret *corev1.Secret) (*Store, error) {
	id, key := string(secret.Data[v1alpha1.SecretKeyAccessKeyID]), string(secret.Data[v1alpha1.SecretKeySecretAccessKey])
	if id == "" || key == "" {
		return nil, &egress.Error{Reason: v1alpha1.ReasonInvalidCredentials, Message: fmt.Sprintf(
			"Secret %q needs the keys %s and %s", secret.Name, v1alpha1.SecretKeyAccessKeyID, v1alpha1.SecretKeySecretAccessKey)}
	}
	u, err := url.Parse(store.Spec.Endpoint)
	if err != nil || u.Host == "" {
		return nil, &egress.Error{Reason: v1alpha1.ReasonInvalidSpec, Err: err, Message: fmt.Sprintf("endpoint %q is no URL", store.Spec.Endpoint)}
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if store.Spec.CABundle != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(store.Spec.CABundle)) {
			return nil, &egress.Error{Reason: v1alpha1.ReasonInvalidCABundle, Message: "spec.caBundle holds no PEM certificate"}
		}
		tlsConfig.RootCAs = pool
	}
	policy := d.Policy
	if d.Tenants.IsAccount(ctx, store.Namespace) {
		policy = policy.ForAccounts()
	}
	limits := store.Spec.Limits
	conns := int(max(limits.MaxConnections, 1))
	dialer := &net.Dialer{Timeout: limits.ConnectTimeoutOrDefault(), ControlContext: policy.Control}
	transport := &http.Transport{
		DialContext: dialer.DialContext, TLSClientConfig: tlsConfig, ForceAttemptHTTP2: true,
		MaxConnsPerHost: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: 90 * time.Second,
		TLSHandshakeTimeout: limits.ConnectTimeoutOrDefault(), ResponseHeaderTimeout: limits.OperationTimeoutOrDefault(),
		// Content is sent as it is, and a part's hash is checked as sent.
		DisableCompression: true,
	}
	lookup := map[v1alpha1.Addressing]minio.BucketLookupType{
		v1alpha1.AddressingPath: minio.BucketLookupPath, v1alpha1.AddressingVirtualHosted: minio.BucketLookupDNS,
	}[store.Spec.Addressing]
	core, err := minio.NewCore(u.Host, &minio.Options{
		Creds:  credentials.NewStaticV4(id, key, string(secret.Data[v1alpha1.SecretKeySessionToken])),
		Secure: u.Scheme == "https", Region: store.Spec.Region, BucketLookup: lookup, Transport: transport,
		// One try: what calls retries (a file's next try, a watch's next
		// poll) knows better when, and a test says at once what failed.
		MaxRetries: 1,
	})
	if err != nil {
		return nil, &egress.Error{Reason: v1alpha1.ReasonInvalidSpec, Err: err, Message: fmt.Sprintf("endpoint %q: %v", store.Spec.Endpoint, err)}
	}
	return &Store{Core: core, Host: u.Host, Config: s3fs.Config{
		Core: core, Bucket: store.Spec.Bucket, Prefix: store.Spec.Prefix,
		PartSize: int64(max(limits.PartSizeMiB, 5)) << 20, PartsInFlight: int(limits.PartsInFlight),
		Timeout: limits.OperationTimeoutOrDefault(),
	}}, nil
}

// Test lists one key of the store's prefix, which proves the endpoint,
// the credentials, the bucket and the right to list. Failures are
// *egress.Error values whose Reason says which.
func (s *Store) Test(ctx context.Context, store *v1alpha1.ObjectStore) error {
	timeout := min(store.Spec.Limits.OperationTimeoutOrDefault(), store.Spec.Limits.ConnectTimeoutOrDefault())
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The listing's goroutine ends with ctx.
	if o, ok := <-s.Core.Client.ListObjects(ctx, store.Spec.Bucket, minio.ListObjectsOptions{Prefix: store.Spec.Prefix, MaxKeys: 1}); ok && o.Err != nil {
		return s.classify(o.Err, store)
	}
	return nil
}

func (s *Store) classify(err error, store *v1alpha1.ObjectStore) error {
	var (
		unknownAuthority x509.UnknownAuthorityError
		invalid          x509.CertificateInvalidError
		hostname         x509.HostnameError
		record           tls.RecordHeaderError
	)
	resp := minio.ToErrorResponse(err)
	switch {
	case errors.As(err, &unknownAuthority), errors.As(err, &invalid), errors.As(err, &hostname), errors.As(err, &record):
		return &egress.Error{Reason: v1alpha1.ReasonTLSHandshakeFailed, Err: err,
			Message: fmt.Sprintf("TLS with %s failed: %v", s.Host, errors.Unwrap(err))}
	case resp.Code == "NoSuchBucket":
		return &egress.Error{Reason: v1alpha1.ReasonBucketNotFound, Err: err,
			Message: fmt.Sprintf("%s has no bucket %q", s.Host, store.Spec.Bucket)}
	case resp.Code == "InvalidAccessKeyId" || resp.Code == "SignatureDoesNotMatch" || resp.Code == "InvalidToken" ||
		resp.Code == "ExpiredToken" || resp.StatusCode == http.StatusUnauthorized:
		return &egress.Error{Reason: v1alpha1.ReasonAuthenticationFailed, Err: err,
			Message: fmt.Sprintf("%s refused the access key (%s)", s.Host, resp.Code)}
	case resp.Code == "AccessDenied" || resp.StatusCode == http.StatusForbidden:
		return &egress.Error{Reason: v1alpha1.ReasonRootPathInaccessible, Err: err,
			Message: fmt.Sprintf("the access key may not list %q in bucket %q", store.Spec.Prefix, store.Spec.Bucket)}
	case resp.StatusCode != 0:
		return &egress.Error{Reason: v1alpha1.ReasonStoreUnavailable, Err: err,
			Message: fmt.Sprintf("%s answered HTTP %d (%s): %s", s.Host, resp.StatusCode, resp.Code, resp.Message)}
	}
	if msg := err.Error(); strings.Contains(msg, "x509:") || strings.Contains(msg, "tls:") || strings.Contains(msg, "HTTP response to HTTPS client") {
		return &egress.Error{Reason: v1alpha1.ReasonTLSHandshakeFailed, Err: err,
			Message: fmt.Sprintf("TLS with %s failed: %v", s.Host, err)}
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		err = urlErr.Err
	}
	return egress.NetworkError(err, s.Host, store.Spec.Limits.ConnectTimeoutOrDefault(), "an S3 server")
}
