// Package plainjson encodes JSON that is never HTML: the gateway's
// answers, the records sftpgate stores. encoding/json escapes <, > and &
// for HTML, making each of those bytes six.
package plainjson

import (
	"bytes"
	"encoding/json"
)

// Marshal is json.Marshal without the escapes for HTML.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
