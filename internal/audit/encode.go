package audit

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// appendJSON appends r as JSON, its keys sorted, no spaces, no HTML
// escaping: byte for byte what encoding/json writes with SetEscapeHTML
// false (TestEncodeIsEncodingJSON), without its reflection, which took
// most of a record's cost on every request.
func (r *Record) appendJSON(b []byte) []byte {
	b = append(b, `{"action":`...)
	b = appendString(b, r.Action)
	b = append(b, `,"actor":{"kind":`...)
	b = appendString(b, r.Actor.Kind)
	b = append(b, `,"name":`...)
	b = appendString(b, r.Actor.Name)
	b = append(b, '}')
	if r.Bytes != 0 {
		b = append(b, `,"bytes":`...)
		b = strconv.AppendInt(b, r.Bytes, 10)
	}
	b = appendOptional(b, `,"client":`, r.Client)
	b = appendOptional(b, `,"connection":`, r.Connection)
	if r.Count != 0 {
		b = append(b, `,"count":`...)
		b = strconv.AppendInt(b, r.Count, 10)
	}
	b = appendOptional(b, `,"hash":`, r.Hash)
	if len(r.Lost) > 0 {
		b = append(b, `,"lost":[`...)
		for i, s := range r.Lost {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"from":`...)
			b = strconv.AppendUint(b, s.From, 10)
			b = append(b, `,"replica":`...)
			b = appendString(b, s.Replica)
			b = append(b, `,"to":`...)
			b = strconv.AppendUint(b, s.To, 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"namespace":`...)
	b = appendString(b, r.Namespace)
	b = appendOptional(b, `,"object":`, r.Object)
	if len(r.Paths) > 0 {
		b = append(b, `,"paths":[`...)
		for i, p := range r.Paths {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, p)
		}
		b = append(b, ']')
	}
	b = append(b, `,"prev":`...)
	b = appendString(b, r.Prev)
	b = append(b, `,"replica":`...)
	b = appendString(b, r.Replica)
	b = appendOptional(b, `,"requestID":`, r.RequestID)
	b = append(b, `,"result":`...)
	b = appendString(b, r.Result)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, r.Seq, 10)
	b = appendOptional(b, `,"sha256":`, r.SHA256)
	b = append(b, `,"time":"`...)
	b = r.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	b = appendOptional(b, `,"traceID":`, r.TraceID)
	return append(b, '}')
}

func appendOptional(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return appendString(append(b, key...), s)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string as encoding/json writes it
// without HTML escaping: \" \\ \b \f \n \r \t, other control characters
// and U+2028, U+2029 as \u00XX and \u202X, invalid UTF-8 as \ufffd.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
