package uploadrecord

import (
	"encoding/base64"
	"net/http"
	"strings"
)

// RequestedPath is the path a resumable upload's creation names in its
// metadata (tus's Upload-Metadata: "path" and the base64 of it), or "":
// what the gateway's and the web UI's audit records say it wrote.
func RequestedPath(r *http.Request) string {
	return MetadataValue(r.Header.Get("Upload-Metadata"), "path")
}

// MetadataValue is key's value in a tus Upload-Metadata header: "" when
// it has none, or none that decodes.
func MetadataValue(header, key string) string {
	for pair := range strings.SplitSeq(header, ",") {
		k, value, _ := strings.Cut(strings.TrimSpace(pair), " ")
		if v, err := base64.StdEncoding.DecodeString(value); k == key && err == nil {
			return string(v)
		}
	}
	return ""
}
