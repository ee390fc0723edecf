package uploadrecord

import (
	"encoding/base64"
	"testing"

	"github.com/tus/tusd/v2/pkg/handler"
)

// FuzzMetadata: whatever Upload-Metadata a client sends, the path the
// audit records name (RequestedPath) is the one tusd gives the upload's
// store to write.
func FuzzMetadata(f *testing.F) {
	b64 := base64.StdEncoding.EncodeToString
	for _, h := range []string{"", "path " + b64([]byte("a.txt")), "path " + b64([]byte("a")) + ",path " + b64([]byte("b")),
		"path " + b64([]byte("a")) + ",path !!", "path", "path  " + b64([]byte("a")), " path " + b64([]byte("\x00\xff")) + " ,mode " + b64([]byte("0600")),
		"path " + b64([]byte("a")) + " x", ",,,", "filename " + b64([]byte("<b>"))} {
		f.Add(h)
	}
	f.Fuzz(func(t *testing.T, header string) {
		meta := handler.ParseMetadataHeader(header)
		if got, want := MetadataValue(header, "path"), meta["path"]; got != want {
			t.Fatalf("%q: the record names %q, tusd writes %q", header, got, want)
		}
	})
}
