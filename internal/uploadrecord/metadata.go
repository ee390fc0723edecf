package uploadrecord

import (
	"net/http"

	"github.com/tus/tusd/v2/pkg/handler"
)

// RequestedPath is the path a resumable upload's creation names in its
// metadata (tus's Upload-Metadata: "path" and the base64 of it), or "":
// what the gateway's and the web UI's audit records say it wrote.
func RequestedPath(r *http.Request) string {
	return MetadataValue(r.Header.Get("Upload-Metadata"), "path")
}

// MetadataValue is key's value in a tus Upload-Metadata header: "" when
// it has none, or none that decodes. It is read by tusd's own parser, so
// that it is the value tusd hands the upload's store (the last of a key
// given twice), never another.
func MetadataValue(header, key string) string {
	return handler.ParseMetadataHeader(header)[key]
}
