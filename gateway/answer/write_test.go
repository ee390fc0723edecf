package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sftpgate/sftpgate/gateway/commands"
)

// The envelope is valid JSON in every case, an unencodable result being an
// internal error.
func TestWriteAnswer(t *testing.T) {
	status := uint32(2)
	for _, tc := range []struct {
		name    string
		result  any
		failure *commands.Failure
		status  int
		want    string
	}{
		{"result", map[string]int{"size": 1}, nil, http.StatusOK, `{"stat":{"size":1}}`},
		{"failure", nil, &commands.Failure{Code: "not_found", Message: "/a: no such file", SFTPStatus: &status}, http.StatusOK,
			`{"stat":null,"error":{"code":"not_found","message":"/a: no such file","sftpStatus":2}}`},
		{"unencodable", func() {}, nil, http.StatusInternalServerError, `{"error":{"code":"internal","message":"cannot encode the response"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			writeAnswer(rec, "stat", tc.result, tc.failure)
			body := rec.Body.Bytes()
			if rec.Code != tc.status || string(body) != tc.want+"\n" || !json.Valid(body) {
				t.Errorf("%d %s, want %d %s", rec.Code, body, tc.status, tc.want)
			}
		})
	}
}
