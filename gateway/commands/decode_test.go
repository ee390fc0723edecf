package commands

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// Every way a request body can be wrong is a *BadRequest naming the field
// and saying what is wrong with it.
func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		body, field, message string
		req                  any
	}{
		{`{"path": 5}`, "path", "must be a string, not a number", &writeRequest{}},
		{`{"path": "x", "colour": "red"}`, "colour", "is not a field of this command", &writeRequest{}},
		{`{"Path": "x"}`, "Path", "is not a field of this command", &writeRequest{}},
		{`{"file": {"txt": "a"}}`, "file.txt", "is not a field of this command", &writeRequest{}},
		{`{"file": {"text": true}}`, "file.text", "must be a string, not a boolean", &writeRequest{}},
		{`{"file": "a"}`, "file", "must be an object, not a string", &writeRequest{}},
		{`{"": 1}`, "body", "has a field with an empty name", &writeRequest{}},
		{`{"path": "a", "path": "b"}`, "path", "is given more than once", &writeRequest{}},
		{`{"path": "x"`, "body", "is cut short", &writeRequest{}},
		{`{"path": "x"} {}`, "body", "must hold exactly one JSON object", &writeRequest{}},
		{`{"path" "x"}`, "body", "is not valid JSON (at byte 8)", &writeRequest{}},
		{`{"file": {"": 1}}`, "file", "has a field with an empty name", &writeRequest{}},
		{`[]`, "body", "must be an object, not an array", &writeRequest{}},
		{`{"offset": 1.5}`, "offset", "must be a whole number in range, not the number 1.5", &readRequest{}},
		{`{"length": 1e30}`, "length", "must be a whole number in range, not the number 1e30", &readRequest{}},
		{`{"modified": "yesterday"}`, "modified", "must be an RFC 3339 time, not a string", &chtimesRequest{}},
	} {
		err := decode([]byte(tc.body), tc.req)
		var bad *BadRequest
		if !errors.As(err, &bad) || bad.Field != tc.field || bad.Message != tc.message {
			t.Errorf("%s: %v, want %s: %s", tc.body, err, tc.field, tc.message)
		}
	}
}

func TestDecodeAcceptsEmptyAndExactBodies(t *testing.T) {
	for _, body := range []string{``, "  \n", `{}`, `null`, ` {"path": "x", "file": {"text": "a"}, "overwrite": false} `} {
		if err := decode([]byte(body), &writeRequest{}); err != nil {
			t.Errorf("%q: %v", body, err)
		}
	}
	// As encoding/json did: invalid UTF-8 and lone surrogates become U+FFFD.
	var text writeRequest
	if err := decode([]byte("{\"path\": \"\xff\", \"file\": {\"text\": \"\\ud800\"}}"), &text); err != nil ||
		text.Path != "\ufffd" || content(t, text.File) != "\ufffd" {
		t.Errorf("%+v: %v", text, err)
	}
	var req writeRequest
	if err := decode([]byte(`{"path": "a/b", "file": {"base64": "YQ=="}, "mode": "0600"}`), &req); err != nil ||
		req.Path != "a/b" || content(t, req.File) != "a" || *req.Mode != "0600" {
		t.Errorf("%+v: %v", req, err)
	}
}

func content(t *testing.T, c *FileContent) string {
	t.Helper()
	b, err := c.bytes(&FS{Env: &Env{}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FuzzContent: a file's text, unquoted in the request body itself, is what
// unquoting it into a buffer of its own gives: escapes, surrogate pairs,
// lone surrogates and invalid UTF-8 included.
func FuzzContent(f *testing.F) {
	for _, text := range []string{"", "plain", `\"\\\/\b\f\n\r\t`, `<\u003c>&`, `\ud83d\ude00`, `\ud800x`, `\udc00\ud800`, "\xff\xfe", "é\xffé", "日本語\\n"} {
		f.Add(`"` + text + `"`)
	}
	f.Fuzz(func(t *testing.T, quoted string) {
		body := []byte(`{"file": {"text": ` + quoted + `}}`)
		var req writeRequest
		if decode(body, &req) != nil || req.File == nil || req.File.Text == nil {
			return
		}
		// Its only error is invalid UTF-8, made U+FFFD as the gateway does.
		want, _ := jsontext.AppendUnquote(nil, []byte(*req.File.Text))
		if got := content(t, req.File); got != string(want) {
			t.Fatalf("%s unquoted in place: %q, want %q", quoted, got, want)
		}
	})
}

// A 1 KiB write request, decoded as the gateway does for every write.
func BenchmarkDecodeWrite(b *testing.B) {
	body := []byte(`{"path": "small/1.txt", "file": {"text": "` + strings.Repeat("x", 1024) + `"}}`)
	b.ReportAllocs()
	for b.Loop() {
		var req writeRequest
		if err := decode(body, &req); err != nil {
			b.Fatal(err)
		}
	}
}
