package audit

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestBound: a member is made valid UTF-8, cut at a character within its
// bound counted as JSON, and marked when cut; what fits is as it was.
func TestBound(t *testing.T) {
	for _, s := range []string{"", "plain", "caf\xc3\xa9", "\x80\x81", strings.Repeat("a", 2000), strings.Repeat("\x00", 500),
		strings.Repeat("é", 700), strings.Repeat("\u2028", 300), strings.Repeat("\x80", 180<<10), strings.Repeat("😀", 400)} {
		b := bound(s, MaxMember)
		if !utf8.ValidString(b) {
			t.Errorf("%.20q: not valid UTF-8", s)
		}
		if n := len(appendString(nil, b)); n > MaxMember {
			t.Errorf("%.20q: %d bytes as JSON", s, n)
		}
		clean := strings.Map(func(c rune) rune { return c }, s) // each invalid byte U+FFFD
		if fits := len(appendString(nil, clean)) <= MaxMember && utf8.ValidString(s); fits != (b == s) {
			t.Errorf("%.20q: fits %v, kept %v", s, fits, b == s)
		}
		if cut := strings.HasSuffix(b, Cut); cut != (len(appendString(nil, clean)) > MaxMember) {
			t.Errorf("%.20q: cut %v", s, cut)
		}
	}
}

// TestLargestRecord: a record whose every member is as long as a
// stranger can make it, of the characters that take most room in JSON,
// stays within MaxRecordBytes, and the caller's paths are left alone.
func TestLargestRecord(t *testing.T) {
	huge := strings.Repeat("\x01", 1<<20)
	paths := make([]string, 1000)
	for i := range paths {
		paths[i] = huge
	}
	lost := make([]Span, MaxLost)
	for i := range lost {
		lost[i] = Span{Replica: strings.Repeat("r", 300), From: 1 << 62, To: 1<<64 - 1}
	}
	c := &Chains{Replica: "worker/" + strings.Repeat("p", 253) + "/1777885951402117000"}
	r := c.Link(Record{Action: huge, Actor: Actor{Kind: huge, Name: huge}, Bytes: -1 << 63, Client: huge, Connection: huge,
		Count: -1 << 63, Lost: lost, Namespace: huge, Object: huge, Paths: paths, RequestID: huge, Result: huge, SHA256: huge})
	if n := len(r.Line()); n > MaxRecordBytes {
		t.Errorf("the largest record takes %d bytes, over %d", n, MaxRecordBytes)
	} else {
		t.Logf("the largest record: %d bytes", n)
	}
	if len(r.Paths) != MaxPaths || r.Paths[MaxPaths-1] != Cut+" 985 more" || paths[0] != huge || len(paths) != 1000 {
		t.Errorf("paths: %d, last %.30q", len(r.Paths), r.Paths[len(r.Paths)-1])
	}
}
