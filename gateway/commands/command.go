package commands

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// Command is one gateway command.
type Command struct {
	Name v1alpha1.Command
	// Idempotent commands may be retried on a fresh connection when the
	// one they ran on broke.
	Idempotent bool
	// Streams says the command moves a whole file or reads a whole
	// directory, however large: it gets the request's time rather than one
	// operation's, and a session of its own while the pool's limit allows
	// (directory reads on one session take turns).
	Streams bool
	run     func(fs *FS, body []byte) (any, error)
}

// Run decodes body and runs the command. An error is a *BadRequest (the
// request is wrong), a *Failure (the server refused the operation), or
// anything else (the session failed).
func (c Command) Run(fs *FS, body []byte) (any, error) { return c.run(fs, body) }

// command makes a Command of a typed request and its implementation.
func command[Req any](name v1alpha1.Command, idempotent bool, run func(*FS, *Req) (any, error)) Command {
	return Command{Name: name, Idempotent: idempotent, run: func(fs *FS, body []byte) (any, error) {
		var req Req
		if err := decode(body, &req); err != nil {
			return nil, err
		}
		return run(fs, &req)
	}}
}

func streaming(c Command) Command {
	c.Streams = true
	return c
}

var registry = map[v1alpha1.Command]Command{}

func init() {
	for _, c := range []Command{
		// Never retried: their content is unquoted in the request body
		// itself (jsonString), which cannot be decoded again.
		command(v1alpha1.CommandWrite, false, write),
		command(v1alpha1.CommandAppend, false, appendFile),
		command(v1alpha1.CommandRead, true, read),
		streaming(command(v1alpha1.CommandList, true, list)),
		command(v1alpha1.CommandStat, true, stat),
		command(v1alpha1.CommandExists, true, exists),
		// Not retried: a mkdir that succeeded before the session broke
		// would report already_exists the second time.
		command(v1alpha1.CommandMkdir, false, mkdir),
		streaming(command(v1alpha1.CommandRmdir, false, rmdir)),
		command(v1alpha1.CommandUnlink, false, unlink),
		command(v1alpha1.CommandPing, true, ping),
		command(v1alpha1.CommandRename, false, rename),
		streaming(command(v1alpha1.CommandCopy, false, copyFile)),
		command(v1alpha1.CommandChmod, true, chmod),
		command(v1alpha1.CommandChtimes, true, chtimes),
		command(v1alpha1.CommandSymlink, false, symlink),
		command(v1alpha1.CommandReadlink, true, readlink),
		command(v1alpha1.CommandRealpath, true, realpath),
		command(v1alpha1.CommandStatvfs, true, statvfs),
		streaming(command(v1alpha1.CommandHash, true, hashFile)),
	} {
		registry[c.Name] = c
	}
}

// Names lists the commands, sorted.
func Names() []v1alpha1.Command {
	names := make([]v1alpha1.Command, 0, len(registry))
	for name := range registry {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Lookup finds a command by name.
func Lookup(name string) (Command, bool) {
	c, ok := registry[v1alpha1.Command(name)]
	return c, ok
}

// decode reads one JSON object into req, refusing unknown fields, a field
// given twice, and trailing data. An empty body is an empty object. Field
// names are case-sensitive.
func decode(body []byte, req any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	// json v2 checks and decodes in one pass; encoding/json scanned a
	// request twice and was a tenth of the gateway's CPU per small write.
	// Invalid UTF-8 and lone surrogates ("\ud800", which JavaScript's
	// JSON.stringify makes) become U+FFFD, as encoding/json did.
	if err := json.Unmarshal(body, req, json.RejectUnknownMembers(true), jsontext.AllowInvalidUTF8(true)); err != nil {
		return decodeError(body, err)
	}
	return nil
}

// decodeError names the field a JSON error is about.
func decodeError(body []byte, err error) error {
	var (
		semantic  *json.SemanticError
		syntactic *jsontext.SyntacticError
	)
	switch {
	case errors.As(err, &semantic) && errors.Is(semantic.Err, json.ErrUnknownName):
		if semantic.JSONPointer.LastToken() == "" {
			return &BadRequest{Field: fieldName(semantic.JSONPointer.Parent()), Message: "has a field with an empty name"}
		}
		return &BadRequest{Field: fieldName(semantic.JSONPointer), Message: "is not a field of this command"}
	case errors.As(err, &semantic):
		got := kindName(semantic.JSONKind)
		if semantic.JSONKind == '0' && len(semantic.JSONValue) > 0 {
			got = "the number " + string(semantic.JSONValue)
		}
		return &BadRequest{Field: fieldName(semantic.JSONPointer), Message: fmt.Sprintf("must be %s, not %s", goTypeName(semantic.GoType), got)}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &BadRequest{Field: "body", Message: "is cut short"}
	case errors.As(err, &syntactic) && errors.Is(syntactic.Err, jsontext.ErrDuplicateName):
		return &BadRequest{Field: fieldName(syntactic.JSONPointer), Message: "is given more than once"}
	case errors.As(err, &syntactic):
		// An error right after a complete value: something follows it.
		if off := syntactic.ByteOffset; off > 0 && off <= int64(len(body)) && jsontext.Value(bytes.TrimSpace(body[:off])).IsValid() {
			return &BadRequest{Field: "body", Message: "must hold exactly one JSON object"}
		}
		return &BadRequest{Field: "body", Message: fmt.Sprintf("is not valid JSON (at byte %d)", syntactic.ByteOffset)}
	}
	return &BadRequest{Field: "body", Message: "is not a valid request"}
}

// fieldName is a JSON pointer as the dotted field name the API's errors
// use ("file.text"); "body" for the whole request.
func fieldName(p jsontext.Pointer) string {
	if p == "" {
		return "body"
	}
	return strings.Join(slices.Collect(p.Tokens()), ".")
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return "another JSON value"
}

func goTypeName(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "another JSON value"
	}
	if t == reflect.TypeFor[time.Time]() {
		return "an RFC 3339 time"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a whole number in range"
}

type pathRequest struct {
	Path string `json:"path"`
}

// PathResult is the result of commands that act on one path.
type PathResult struct {
	Path string `json:"path"`
}
