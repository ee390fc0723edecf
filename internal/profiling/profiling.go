// Package profiling serves Go's pprof profiles beside a component's
// metrics, when its --profiling flag asks for them: never on the port
// clients reach.
package profiling

import (
	"net/http"
	"net/http/pprof"
)

// Register serves pprof's index and profiles at /debug/pprof/ on mux.
func Register(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}
