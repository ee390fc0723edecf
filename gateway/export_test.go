package gateway

import (
	"fmt"
	"net/http"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// WriteLayer is one of the layer benchmark's handlers (WriteLayers).
type WriteLayer struct {
	// Name is the layer this handler adds to the one before.
	Name    string
	Handler http.Handler
}

// WriteLayers are handlers of s that write with the key of token to the
// connection of slug with the gateway's own layers added one at a time,
// in the order of the layer constants: the first with none (the write's
// decoding, its run on a pooled session and its answer), the last with
// all, as s.Handler() serves.
func (s *Server) WriteLayers(slug, token string) ([]WriteLayer, error) {
	f := s.handler.(*front)
	conns, err := f.h.endpoints.bySlug(slug)
	if err != nil || len(conns) != 1 {
		return nil, fmt.Errorf("the connection of %s: %v, %w", slug, conns, err)
	}
	key, err := f.h.authorizer.Authorize(token, conns[0].keyTarget(), v1alpha1.CommandWrite)
	if err != nil {
		return nil, err
	}
	target := benchTarget{slug: slug, command: string(v1alpha1.CommandWrite), conn: conns[0], who: keyCaller(key)}
	names := []string{"bare", "request id", "routing", "key lookup", "limits", "metrics", "audit", "log line"}
	all := layerRequestID | layerRouting | layerKeys | layerLimits | layerMetrics | layerAudit | layerLogLine
	layers := make([]WriteLayer, 0, len(names))
	for i, name := range names {
		h := *f.h
		h.without, h.bench = all&^(layer(1)<<i-1), target
		layers = append(layers, WriteLayer{Name: name, Handler: s.newFront(f.prefix, &h, f.mux)})
	}
	if layers[len(layers)-1].Handler.(*front).h.without != 0 {
		return nil, fmt.Errorf("%d layers named, and not all of them", len(names))
	}
	return layers, nil
}
