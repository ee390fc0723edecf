package dev

import (
	"context"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/tests3"
)

// bucketName is the demo bucket, and the demo ObjectStore that reaches it.
const bucketName = "bucket"

// startDemoBucket runs the demo S3 server (versitygw, its objects files
// below the data directory's s3/) at addr, with its bucket.
func startDemoBucket(ctx context.Context, dataDir, addr, binary string, st *state) (*tests3.Server, func(), error) {
	s := &tests3.Server{Endpoint: addr, AccessKey: "sftpgate-demo", SecretKey: st.S3SecretKey,
		Dir: filepath.Join(dataDir, "s3"), Region: "us-east-1"}
	stop, err := s.Run(binary, filepath.Join(dataDir, "versitygw.log"))
	if err != nil {
		return nil, nil, err
	}
	if err := s.MakeBucket(ctx, bucketName); err != nil {
		stop()
		return nil, nil, err
	}
	return s, stop, nil
}

// createBucketStore makes the demo ObjectStore of the demo bucket, and
// the Secret of its key pair; a restart points it at the server again.
func createBucketStore(ctx context.Context, k8s client.Client, s *tests3.Server) error {
	secret := &corev1.Secret{}
	secret.Namespace, secret.Name = demoNamespace, bucketName+"-credentials"
	if _, err := controllerutil.CreateOrUpdate(ctx, k8s, secret, func() error {
		secret.StringData = map[string]string{v1alpha1.SecretKeyAccessKeyID: s.AccessKey, v1alpha1.SecretKeySecretAccessKey: s.SecretKey}
		return nil
	}); err != nil {
		return err
	}
	store := &v1alpha1.ObjectStore{}
	store.Namespace, store.Name = demoNamespace, bucketName
	_, err := controllerutil.CreateOrUpdate(ctx, k8s, store, func() error {
		store.Spec.Endpoint, store.Spec.Region, store.Spec.Bucket = "http://"+s.Endpoint, s.Region, bucketName
		store.Spec.Slug = bucketName
		store.Spec.Addressing = v1alpha1.AddressingPath
		store.Spec.Credentials.SecretRef.Name = secret.Name
		return nil
	})
	return err
}
