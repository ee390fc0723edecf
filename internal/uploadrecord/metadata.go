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
	for pair := range strings.SplitSeq(r.Header.Get("Upload-Metadata"), ",") {
		key, value, _ := strings.Cut(strings.TrimSpace(pair), " ")
		if p, err := base64.StdEncoding.DecodeString(value); key == "path" && err == nil {
			return string(p)
		}
	}
	return ""
}
