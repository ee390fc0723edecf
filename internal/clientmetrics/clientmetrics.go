// Package clientmetrics gives a component's metrics endpoint client-go's
// count of the requests it sent the Kubernetes API server
// (rest_client_requests_total, by code, method and host), which
// controller-runtime registers in its own registry: the alert on a
// component writing more than its bound reads it.
package clientmetrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Gatherer gathers the rest_client_* families of controller-runtime's
// registry, and nothing else of it (its Go and process collectors would
// repeat the component's own).
func Gatherer() prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		families, err := metrics.Registry.Gather()
		kept := families[:0]
		for _, f := range families {
			if strings.HasPrefix(f.GetName(), "rest_client_") {
				kept = append(kept, f)
			}
		}
		return kept, err
	})
}
