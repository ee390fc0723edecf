package audit

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
	"unicode/utf8"
)

// viaEncodingJSON is what encoding/json writes of r without HTML
// escaping: the form the docs define a record's hash over.
func viaEncodingJSON(t *testing.T, r Record) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	type plain Record // without MarshalJSON: encoding/json's own reflection
	if err := enc.Encode(plain(r)); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// TestEncodeIsEncodingJSON: the records' own encoder writes what
// encoding/json writes, byte for byte, for every member and for strings
// of every kind: quotes, backslashes, control characters, HTML's
// characters, U+2028 and U+2029, invalid UTF-8, and random bytes.
func TestEncodeIsEncodingJSON(t *testing.T) {
	tricky := []string{"", "plain", `"quoted" \back\`, "<b>&amp;</b>", "\x00\x01\b\f\n\r\t\x1f\x7f", "line\u2028para\u2029",
		"caf\xc3\xa9", "bad\xff\xfebytes", "\xc3", "emoji 😀", "\ufffd", "/in/=cmd|' /C calc'!A0.csv"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b := make([]byte, rng.IntN(24))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		tricky = append(tricky, string(b))
	}
	for i, s := range tricky {
		r := Record{Action: s, Actor: Actor{Kind: ActorKey, Name: s}, Bytes: int64(i) - 5, Client: s, Connection: s, Count: int64(i % 3),
			Hash: s, Namespace: s, Object: s, Paths: []string{s, "x"}, Prev: s, Replica: s, RequestID: s, Result: s, Seq: uint64(i),
			SHA256: s, Time: time.Date(2026, 1, 2, 3, 4, 5, i, time.UTC)}
		if i%2 == 0 {
			r.Lost = []Span{{Replica: s, From: 1, To: uint64(i)}}
		}
		if got, want := r.encode(), viaEncodingJSON(t, r); !bytes.Equal(got, want) {
			t.Fatalf("%q (valid UTF-8: %v):\n got %s\nwant %s", s, utf8.ValidString(s), got, want)
		}
		// Link writes the line with the hash put in, not encoded again.
		linked := (&Chains{Replica: s}).Link(r)
		if got, want := linked.Line(), viaEncodingJSON(t, linked); !bytes.Equal(got, want) || linked.Sum() != linked.Hash {
			t.Fatalf("%q linked:\n got %s\nwant %s", s, got, want)
		}
	}
	if got, want := (Record{}).encode(), viaEncodingJSON(t, Record{}); !bytes.Equal(got, want) {
		t.Fatalf("the empty record:\n got %s\nwant %s", got, want)
	}
}
