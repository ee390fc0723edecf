package controllers

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// The readiness of each connection and store, as its status says, for
// the alert on one that has been failing for a while: the manager's
// cache has them all, so reading them at each scrape costs no request.
var (
	readyDesc = prometheus.NewDesc("sftpgate_connection_ready",
		"1 while the SftpConnection, FtpConnection or ObjectStore is Ready, 0 while it is not (its status says why), for its current spec.",
		[]string{"kind", "namespace", "name"}, nil)
	readyChangedDesc = prometheus.NewDesc("sftpgate_connection_ready_changed_timestamp_seconds",
		"When the connection's or store's Ready condition last changed.", []string{"kind", "namespace", "name"}, nil)
)

// readiness collects readyDesc and readyChangedDesc from a cache, of
// every kind of v1alpha1.EndpointKinds.
type readiness struct {
	cache  client.Reader
	scheme *runtime.Scheme
}

func (readiness) Describe(ch chan<- *prometheus.Desc) {
	ch <- readyDesc
	ch <- readyChangedDesc
}

func (r readiness) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, kind := range v1alpha1.EndpointKinds {
		o, err := r.scheme.New(v1alpha1.GroupVersion.WithKind(kind + "List"))
		list, ok := o.(client.ObjectList)
		if err != nil || !ok || r.cache.List(ctx, list, client.UnsafeDisableDeepCopy) != nil {
			continue
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			continue
		}
		for _, item := range items {
			e, ok := item.(v1alpha1.Endpoint)
			if !ok {
				continue
			}
			v := 0.0
			ready := meta.FindStatusCondition(*e.GetConditions(), v1alpha1.ConditionReady)
			if ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == e.GetGeneration() {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, v, kind, e.GetNamespace(), e.GetName())
			if ready != nil {
				ch <- prometheus.MustNewConstMetric(readyChangedDesc, prometheus.GaugeValue, float64(ready.LastTransitionTime.Unix()),
					kind, e.GetNamespace(), e.GetName())
			}
		}
	}
}

// registerMetrics adds the manager's own metrics to controller-runtime's
// registry, which its metrics endpoint serves; a second manager in one
// process (tests) keeps the first one's.
func registerMetrics(cache client.Reader, scheme *runtime.Scheme) error {
	err := metrics.Registry.Register(readiness{cache, scheme})
	if errors.As(err, &prometheus.AlreadyRegisteredError{}) {
		return nil
	}
	return err
}
