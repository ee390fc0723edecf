package webui

import (
	"encoding/base64"
	"testing"
)

// TestShareToken: a link's token names its link, whatever the base64url
// of its name holds (_ and - included), and nothing else reads as one.
func TestShareToken(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"q3", "a?>b", "ÿÿÿ"} { // base64url of the last two has - and _
		token := newShareToken("sftpgate-abc", name)
		if ns, n, ok := shareLinkOf(token); !ok || ns != "sftpgate-abc" || n != name {
			t.Errorf("%q: read as %q %q %v", token, ns, n, ok)
		}
	}
	for _, bad := range []string{"", "sgk_abc_def", "sgs_", "sgs_abc", "sgs_" + base64.RawURLEncoding.EncodeToString([]byte("no-slash")) + "_x",
		"sgs_" + base64.RawURLEncoding.EncodeToString([]byte("/name")) + "_x", "sgs_!!!_x"} {
		if _, _, ok := shareLinkOf(bad); ok {
			t.Errorf("%q reads as a link's token", bad)
		}
	}
}
