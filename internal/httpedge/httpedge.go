// Package httpedge is what every HTTP server of sftpgate applies to a
// request before any handler sees it: a bound on its headers and a request
// id that is safe to log and record.
package httpedge

import (
	"context"
	"crypto/rand"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/go-chi/chi/v5/middleware"
)

// MaxHeaderBytes bounds a request's line and headers on every server
// (http.Server.MaxHeaderBytes; Go's default is 1 MiB). Past it the server
// answers 431 before any handler runs. A ServiceAccount token, a session
// cookie or a tus Upload-Metadata naming the longest path takes a few KiB.
const MaxHeaderBytes = 64 << 10

// MaxRequestIDBytes is the longest X-Request-Id a client may choose.
const MaxRequestIDBytes = 64

// ValidRequestID is whether a client's X-Request-Id is taken as it is:
// 1 to MaxRequestIDBytes bytes, each an ASCII letter or digit or one of
// . _ : -. It goes into every log line and audit record of the request,
// so anything else (long, not UTF-8, control bytes, quotes) is replaced.
func ValidRequestID(id string) bool {
	if id == "" || len(id) > MaxRequestIDBytes {
		return false
	}
	for i := range len(id) {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// RequestID puts the request's id (TakeRequestID) into its context under
// chi's middleware.RequestIDKey, where middleware.GetReqID finds it.
func RequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.WithValue(r.Context(), middleware.RequestIDKey, TakeRequestID(r))
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// TakeRequestID is the id of r: the client's X-Request-Id when it is one
// value that ValidRequestID takes, else one the server makes as chi's
// middleware.RequestID does ("host/random-000001", which no client's id
// can look like: a client's holds no "/"). The refused header is removed,
// so that no handler reads it either. A server that keeps the id in a
// context of its own (the gateway's, one allocation for a request's
// state) calls it rather than RequestID.
func TakeRequestID(r *http.Request) string {
	ids := r.Header[middleware.RequestIDHeader]
	if len(ids) == 1 && ValidRequestID(ids[0]) {
		return ids[0]
	}
	if ids != nil {
		delete(r.Header, middleware.RequestIDHeader)
	}
	return newRequestID()
}

// idPrefix starts the ids this process makes: its host and ten random
// characters, as chi's middleware.RequestID's do.
var idPrefix = func() string {
	host, err := os.Hostname()
	if host == "" || err != nil {
		host = "localhost"
	}
	return host + "/" + rand.Text()[:10]
}()

// made counts the ids this process made.
var made atomic.Uint64

// newRequestID makes an id, "<idPrefix>-000001": one allocation, where
// fmt.Sprintf took three.
func newRequestID() string {
	var buf [128]byte
	b := append(append(buf[:0], idPrefix...), '-')
	n := made.Add(1)
	for digits := uint64(100000); digits > 1 && n < digits; digits /= 10 {
		b = append(b, '0')
	}
	return string(strconv.AppendUint(b, n, 10))
}
