package apitoken

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// IndexTokenHash is the cache index of ApiKeys by status.tokenSHA256.
const IndexTokenHash = "sftpgate.dev/token-sha256" //nolint:gosec // an index name, not a credential

// TokenHashes is the index's function: a key's token hash, once it has
// one.
func TokenHashes(key *v1alpha1.ApiKey) []string {
	if h := key.Status.TokenSHA256; h != "" {
		return []string{h}
	}
	return nil
}

// IndexFields registers IndexTokenHash as a field index, for List with
// MatchingFields (the controller's check for a duplicate token).
func IndexFields(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &v1alpha1.ApiKey{}, IndexTokenHash, func(o client.Object) []string {
		return TokenHashes(o.(*v1alpha1.ApiKey)) //nolint:forcetypeassert // the index is of ApiKeys
	})
}
