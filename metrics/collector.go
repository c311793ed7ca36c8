package metrics

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/nilcheck"
)

// Family describes one metric family: its name, its type ("gauge" or
// "counter") and its help text.
type Family struct {
	Name string
	Type string
	Help string
}

// Label is one label of a sample.
type Label struct {
	Name, Value string
}

// Sample is one value of a family with its labels, the allocator label first.
type Sample struct {
	Labels []Label
	Value  float64
}

// MetricFamily is a family with the samples one read of a registry found:
// what Gather returns, for exporters other than WritePrometheus to read.
type MetricFamily struct {
	Family
	Samples []Sample
}

// Collector is a source of metric samples that a Registry watches under a
// name: AllocatorCollector for anything with per-device MemoryStats, or a
// collector of its own (deferrable's Manager has one). The registry imports
// no allocator package: each brings its collector.
//
// Families is constant over the collector's life. Collect reads the source
// once and calls emit for each sample with the index of its family in
// Families and its labels (the registry adds the allocator label before
// them); it may be called from any goroutine, never with the registry's lock
// held. ExpvarValue is the source's state as one JSON-marshalable value.
type Collector interface {
	Families() []Family
	Collect(emit func(family int, labels []Label, value float64))
	ExpvarValue() any
}

// Gather reads every collector once and returns the families with their
// samples: the families of AllocatorCollector always (in the order of
// Names, with no samples when no allocator is watched), then the other
// collectors' families in the order they first appear, collectors sorted by
// name. A family that two collectors both report (the same name) is one
// family with the samples of both.
func (r *Registry) Gather() []MetricFamily {
	out := make([]MetricFamily, 0, len(allocatorFamilies))
	index := make(map[string]int, len(allocatorFamilies))
	for _, f := range allocatorFamilies {
		index[f.Name] = len(out)
		out = append(out, MetricFamily{Family: f})
	}
	for _, e := range r.snapshot() {
		fams := e.c.Families()
		slot := make([]int, len(fams))
		for i, f := range fams {
			j, ok := index[f.Name]
			if !ok {
				j = len(out)
				index[f.Name] = j
				out = append(out, MetricFamily{Family: f})
			}
			slot[i] = j
		}
		e.c.Collect(func(family int, labels []Label, v float64) {
			if family < 0 || family >= len(slot) {
				return
			}
			ls := make([]Label, 0, len(labels)+1)
			ls = append(ls, Label{Name: "allocator", Value: e.name})
			ls = append(ls, labels...)
			mf := &out[slot[family]]
			mf.Samples = append(mf.Samples, Sample{Labels: ls, Value: v})
		})
	}
	return out
}

// allocatorCollector is AllocatorCollector's collector.
type allocatorCollector struct {
	src     Source
	devices []int
}

// AllocatorCollector returns the collector of an allocator's statistics on
// the given devices: the families listed by Names, labelled device and, for
// pooled statistics, pool and stat (package doc). No devices, a negative
// device or a device listed twice is an error matching
// gpumem.ErrInvalidValue.
func AllocatorCollector(src Source, devices []int) (Collector, error) {
	if nilcheck.Is(src) {
		return nil, fmt.Errorf("metrics: nil source: %w", gpumem.ErrInvalidValue)
	}
	if len(devices) == 0 {
		return nil, fmt.Errorf("metrics: no devices: %w", gpumem.ErrInvalidValue)
	}
	devs := append([]int(nil), devices...)
	sort.Ints(devs)
	for i, d := range devs {
		if d < 0 {
			return nil, fmt.Errorf("metrics: device %d: %w", d, gpumem.ErrInvalidValue)
		}
		if i > 0 && devs[i-1] == d {
			return nil, fmt.Errorf("metrics: device %d listed twice: %w", d, gpumem.ErrInvalidValue)
		}
	}
	return &allocatorCollector{src: src, devices: devs}, nil
}

// Families returns the families of Names.
func (c *allocatorCollector) Families() []Family { return allocatorFamilies }

// Collect reads the source's statistics once per device.
func (c *allocatorCollector) Collect(emit func(int, []Label, float64)) {
	for _, d := range c.devices {
		st := c.src.Stats(d)
		dev := Label{Name: "device", Value: strconv.Itoa(d)}
		for i := range allocatorFamilies {
			allocatorValues[i](&st, func(extra []Label, v float64) {
				ls := make([]Label, 0, 1+len(extra))
				ls = append(ls, dev)
				emit(i, append(ls, extra...), v)
			})
		}
	}
}

// ExpvarValue is {device: MemoryStats} (a fragmentation that is not a
// finite number shown as 0: JSON has neither NaN nor infinity).
func (c *allocatorCollector) ExpvarValue() any {
	m := make(map[string]any, len(c.devices))
	for _, d := range c.devices {
		st := c.src.Stats(d)
		if math.IsNaN(st.Fragmentation) || math.IsInf(st.Fragmentation, 0) {
			st.Fragmentation = 0
		}
		m[strconv.Itoa(d)] = st
	}
	return m
}
