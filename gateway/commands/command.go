package commands

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

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

// decode reads one JSON object into req, refusing unknown fields and
// trailing data. An empty body is an empty object.
func decode(body []byte, req any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(req); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &BadRequest{Field: "body", Message: "must hold exactly one JSON object"}
	}
	return nil
}

// decodeError names the field a JSON error is about.
func decodeError(err error) error {
	var (
		typeErr   *json.UnmarshalTypeError
		syntaxErr *json.SyntaxError
	)
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "body"
		}
		return &BadRequest{Field: field, Message: fmt.Sprintf("must be %s, not %s", jsonType(typeErr.Type.Kind().String()), typeErr.Value)}
	case errors.As(err, &syntaxErr):
		return &BadRequest{Field: "body", Message: fmt.Sprintf("is not valid JSON (at byte %d)", syntaxErr.Offset)}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		if name == "" {
			return &BadRequest{Field: "body", Message: "has a field with an empty name"}
		}
		return &BadRequest{Field: name, Message: "is not a field of this command"}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &BadRequest{Field: "body", Message: "is cut short"}
	}
	return &BadRequest{Field: "body", Message: err.Error()}
}

func jsonType(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "struct", "map", "ptr":
		return "an object"
	case "slice":
		return "an array"
	}
	return "a number"
}
