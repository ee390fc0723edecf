package share

import (
	"github.com/sftpgate/sftpgate/api/v1alpha1"

	"encoding/base64"
	"testing"
)

// TestShareToken: a link's token names its link, and nothing else reads
// as one: not a token of a name Kubernetes cannot hold (whose base64url
// may have _ and -, as "a?>b" and "ÿÿÿ" do).
func TestShareToken(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"q3", "share-1", "a.b-c"} {
		token := v1alpha1.NewShareToken("sftpgate-abc", name)
		if ns, n, ok := shareLinkOf(token); !ok || ns != "sftpgate-abc" || n != name {
			t.Errorf("%q: read as %q %q %v", token, ns, n, ok)
		}
	}
	for _, bad := range []string{"", "sgk_abc_def", "sgs_", "sgs_abc", "sgs_" + base64.RawURLEncoding.EncodeToString([]byte("no-slash")) + "_x",
		"sgs_" + base64.RawURLEncoding.EncodeToString([]byte("/name")) + "_x", "sgs_!!!_x",
		v1alpha1.NewShareToken("sftpgate-abc", "a?>b"), v1alpha1.NewShareToken("sftpgate-abc", "ÿÿÿ"), v1alpha1.NewShareToken("sftpgate-abc", "a/b"),
		v1alpha1.NewShareToken("sftpgate-abc", ".."), v1alpha1.NewShareToken("Upper", "x")} {
		if _, _, ok := shareLinkOf(bad); ok {
			t.Errorf("%q reads as a link's token", bad)
		}
	}
}
