package commands

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/files"
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
	// Upload, for a command that takes a file's bytes as the request body
	// (Content-Type: application/octet-stream), runs it with them.
	Upload *Upload
	// Download, for a command that can answer with a file's bytes (Accept:
	// application/octet-stream), opens the file its JSON body names.
	Download func(fs *FS, body []byte) (files.File, os.FileInfo, error)
	run      runFunc
}

// Upload runs a command with the request body as a file's bytes and its
// other parameters in the query.
type Upload struct {
	// Stream takes a body of size bytes (-1: unknown) as it arrives.
	Stream func(fs *FS, query url.Values, body io.Reader, size int64) (any, error)
	// Bytes takes a small body read whole before.
	Bytes func(fs *FS, query url.Values, body []byte) (any, error)
}

// runFunc decodes a command's JSON body and runs it. ctx is the request's:
// the commands that read or copy whole files or directories stop when its
// client goes away, after undoing what they left half done.
type runFunc func(ctx context.Context, fs *FS, body []byte) (any, error)

// Run decodes body and runs the command. An error is a *BadRequest (the
// request is wrong), a *Failure (the server refused the operation), or
// anything else (the session failed).
func (c Command) Run(ctx context.Context, fs *FS, body []byte) (any, error) {
	return c.run(ctx, fs, body)
}

// typed runs a command of a typed request.
func typed[Req any](run func(*FS, *Req) (any, error)) runFunc {
	return stoppable(func(_ context.Context, fs *FS, req *Req) (any, error) { return run(fs, req) })
}

// stoppable runs a command of a typed request that stops when ctx ends.
func stoppable[Req any](run func(context.Context, *FS, *Req) (any, error)) runFunc {
	return func(ctx context.Context, fs *FS, body []byte) (any, error) {
		var req Req
		if err := decode(body, &req); err != nil {
			return nil, err
		}
		if fs.Named != nil {
			fs.Named(namedIn(&req))
		}
		return run(ctx, fs, &req)
	}
}

// commands is the gateway's command table.
var commands = map[v1alpha1.Command]Command{
	// Never retried: their content is unquoted in the request body itself
	// (jsonString), which cannot be decoded again.
	v1alpha1.CommandWrite:  {run: typed(write), Upload: upload(false)},
	v1alpha1.CommandAppend: {run: typed(appendFile), Upload: upload(true)},
	v1alpha1.CommandRead:   {Idempotent: true, run: typed(read), Download: openRequested},
	v1alpha1.CommandList:   {Idempotent: true, Streams: true, run: stoppable(list)},
	v1alpha1.CommandStat:   {Idempotent: true, run: typed(stat)},
	v1alpha1.CommandExists: {Idempotent: true, run: typed(exists)},
	// Not retried: a mkdir that succeeded before the session broke would
	// report already_exists the second time.
	v1alpha1.CommandMkdir:    {run: typed(mkdir)},
	v1alpha1.CommandRmdir:    {Streams: true, run: typed(rmdir)},
	v1alpha1.CommandUnlink:   {run: typed(unlink)},
	v1alpha1.CommandPing:     {Idempotent: true, run: typed(ping)},
	v1alpha1.CommandRename:   {run: typed(rename)},
	v1alpha1.CommandCopy:     {Streams: true, run: stoppable(copyFile)},
	v1alpha1.CommandChmod:    {Idempotent: true, run: typed(chmod)},
	v1alpha1.CommandChtimes:  {Idempotent: true, run: typed(chtimes)},
	v1alpha1.CommandSymlink:  {run: typed(symlink)},
	v1alpha1.CommandReadlink: {Idempotent: true, run: typed(readlink)},
	v1alpha1.CommandRealpath: {Idempotent: true, run: typed(realpath)},
	v1alpha1.CommandStatvfs:  {Idempotent: true, run: typed(statvfs)},
	v1alpha1.CommandHash:     {Idempotent: true, Streams: true, run: stoppable(hashFile)},
}

// Names lists the commands, sorted.
func Names() []v1alpha1.Command {
	return slices.Sorted(maps.Keys(commands))
}

// Lookup finds a command by name.
func Lookup(name string) (Command, bool) {
	c, ok := commands[v1alpha1.Command(name)]
	c.Name = v1alpha1.Command(name)
	return c, ok
}

// decode reads one JSON object into req, refusing unknown fields, a field
// given twice, and trailing data. An empty body is an empty object. Field
// names are case-sensitive.
func decode(body []byte, req any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	// json v2 checks and decodes in one pass, where encoding/json scans a
	// request twice: it shows in the CPU per small write
	// (docs/benchmarks.md).
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

// namedFields caches, per request type, the indexes of its string fields
// named path, from and to in JSON, in that order.
var namedFields sync.Map

// namedIn is the paths req (a pointer to a request struct) names.
func namedIn(req any) []string {
	v := reflect.ValueOf(req).Elem()
	fields, ok := namedFields.Load(v.Type())
	if !ok {
		var found []int
		for _, name := range []string{"path", "from", "to"} {
			for i := range v.NumField() {
				f := v.Type().Field(i)
				if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == name && f.Type.Kind() == reflect.String {
					found = append(found, i)
				}
			}
		}
		fields, _ = namedFields.LoadOrStore(v.Type(), found)
	}
	var paths []string
	for _, i := range fields.([]int) {
		if p := v.Field(i).String(); p != "" {
			paths = append(paths, p)
		}
	}
	return paths
}
