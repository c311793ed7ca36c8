// Package prometheus exposes a gpumem metrics.Registry to Prometheus's Go
// client: NewCollector returns a prometheus.Collector that reads the
// registry (Registry.Gather) on every scrape, so that gpumem's families
// (package metrics documents each) sit beside a program's other metrics in
// a prometheus.Registry. It is a module of its own, so that gpumem itself
// does not depend on client_golang.
package prometheus

import (
	"fmt"
	"strings"

	"github.com/gpumem/gpumem/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// Collector is a prometheus.Collector over a gpumem metrics.Registry.
type Collector struct {
	reg *metrics.Registry
}

// NewCollector returns a collector reading reg on every Collect.
func NewCollector(reg *metrics.Registry) *Collector { return &Collector{reg: reg} }

// Describe sends nothing: the collector is unchecked, since the labels of
// a registry's samples depend on the collectors added to it.
func (c *Collector) Describe(chan<- *prometheus.Desc) {}

// Collect reads the registry once and sends every sample as a constant
// metric; a sample Prometheus refuses is sent as an invalid metric naming
// it.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, mf := range c.reg.Gather() {
		typ := prometheus.GaugeValue
		if mf.Type == "counter" {
			typ = prometheus.CounterValue
		}
		descs := map[string]*prometheus.Desc{}
		for _, s := range mf.Samples {
			names := make([]string, len(s.Labels))
			values := make([]string, len(s.Labels))
			for i, l := range s.Labels {
				names[i], values[i] = l.Name, l.Value
			}
			k := strings.Join(names, ",")
			d, ok := descs[k]
			if !ok {
				d = prometheus.NewDesc(mf.Name, mf.Help, names, nil)
				descs[k] = d
			}
			m, err := prometheus.NewConstMetric(d, typ, s.Value, values...)
			if err != nil {
				m = prometheus.NewInvalidMetric(d, fmt.Errorf("gpumem: %s: %w", mf.Name, err))
			}
			ch <- m
		}
	}
}
