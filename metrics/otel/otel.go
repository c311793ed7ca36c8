// Package otel exposes a gpumem metrics.Registry to OpenTelemetry: Register
// creates one observable instrument per family of the registry (package
// metrics documents each) on an OpenTelemetry metric.Meter, and one callback
// that reads the registry once (Registry.Gather) per collection and observes
// every sample, its labels as attributes. It is a module of its own, so that
// gpumem itself does not depend on OpenTelemetry.
//
// # Instruments
//
// Each family becomes an instrument of the same name (gpumem_allocated_bytes,
// gpumem_num_ooms_total, ...), so that the names read as in the Prometheus
// exposition and in package metrics' documentation, with the family's help as
// the description:
//
//   - a gauge family becomes an observable gauge, a counter family an
//     observable counter (cumulative: the value observed is the total since
//     the source was created);
//   - the families of package metrics and of the gpumem_* collectors count
//     blocks, bytes or events and are Int64 instruments, except those whose
//     name ends in _ratio or holds _seconds (gpumem_fragmentation_ratio,
//     gpumem_deferrable_move_seconds_total), which are Float64, as is every
//     family whose name does not start with gpumem_ (another collector's);
//   - the unit is "By" for a name holding _bytes, "s" for _seconds and "1"
//     for _ratio, none otherwise.
//
// Every sample's labels (allocator first, then device, pool, tier, ...)
// become its attributes, all strings.
//
// # Families known at Register
//
// OpenTelemetry instruments are created before they are observed, so
// Register creates those of the families Gather returns when it is called:
// the allocator families always, and the families of the collectors already
// added (AddCollector). A family that first appears later (a collector of a
// new kind added after Register) is not observed; unregister and register
// again to add it. Allocators and collectors of known families may come and
// go: each collection observes the samples the registry has then.
package otel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/gpumem/gpumem/metrics"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// instrument is the observable instrument of one family: exactly one of i64
// and f64 is set.
type instrument struct {
	i64 metric.Int64Observable
	f64 metric.Float64Observable
}

// Register creates on meter an observable instrument for each family that
// reg.Gather returns now (package doc) and registers one callback that reads
// reg once per collection and observes every sample. Unregister the returned
// registration to stop observing; the instruments stay with the meter. A nil
// meter or registry is an error, as is an error creating an instrument or
// registering the callback.
func Register(meter metric.Meter, reg *metrics.Registry) (metric.Registration, error) {
	if meter == nil {
		return nil, errors.New("gpumem/metrics/otel: nil meter")
	}
	if reg == nil {
		return nil, errors.New("gpumem/metrics/otel: nil registry")
	}
	byName := map[string]instrument{}
	var observables []metric.Observable
	for _, mf := range reg.Gather() {
		if _, ok := byName[mf.Name]; ok {
			continue
		}
		in, err := newInstrument(meter, mf.Family)
		if err != nil {
			return nil, fmt.Errorf("gpumem/metrics/otel: %s: %w", mf.Name, err)
		}
		byName[mf.Name] = in
		if in.i64 != nil {
			observables = append(observables, in.i64)
		} else {
			observables = append(observables, in.f64)
		}
	}
	r, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		observe(o, reg.Gather(), byName)
		return nil
	}, observables...)
	if err != nil {
		return nil, fmt.Errorf("gpumem/metrics/otel: register callback: %w", err)
	}
	return r, nil
}

// observe observes every sample of fams whose family has an instrument.
func observe(o metric.Observer, fams []metrics.MetricFamily, byName map[string]instrument) {
	for _, mf := range fams {
		in, ok := byName[mf.Name]
		if !ok {
			continue
		}
		for _, s := range mf.Samples {
			opt := metric.WithAttributeSet(attributes(s.Labels))
			if in.i64 != nil {
				o.ObserveInt64(in.i64, toInt64(s.Value), opt)
			} else {
				o.ObserveFloat64(in.f64, s.Value, opt)
			}
		}
	}
}

// newInstrument creates the observable instrument of family f.
func newInstrument(meter metric.Meter, f metrics.Family) (instrument, error) {
	desc := metric.WithDescription(f.Help)
	u := metric.WithUnit(unit(f.Name))
	counter := f.Type == "counter"
	var in instrument
	var err error
	switch {
	case isInt64(f.Name) && counter:
		in.i64, err = meter.Int64ObservableCounter(f.Name, desc, u)
	case isInt64(f.Name):
		in.i64, err = meter.Int64ObservableGauge(f.Name, desc, u)
	case counter:
		in.f64, err = meter.Float64ObservableCounter(f.Name, desc, u)
	default:
		in.f64, err = meter.Float64ObservableGauge(f.Name, desc, u)
	}
	return in, err
}

// isInt64 reports whether Register makes the family of this name an Int64
// instrument: a gpumem_* family that neither ends in _ratio nor holds
// _seconds (package doc).
func isInt64(family string) bool {
	return strings.HasPrefix(family, "gpumem_") &&
		!strings.HasSuffix(family, "_ratio") &&
		!strings.Contains(family, "_seconds")
}

// unit returns the unit Register gives the family of this name: "By" for a
// name holding _bytes, "s" for _seconds, "1" for a name ending in _ratio,
// "" otherwise.
func unit(family string) string {
	switch {
	case strings.Contains(family, "_bytes"):
		return "By"
	case strings.Contains(family, "_seconds"):
		return "s"
	case strings.HasSuffix(family, "_ratio"):
		return "1"
	}
	return ""
}

// attributes returns the labels as a set of string attributes.
func attributes(labels []metrics.Label) attribute.Set {
	kvs := make([]attribute.KeyValue, len(labels))
	for i, l := range labels {
		kvs[i] = attribute.String(l.Name, l.Value)
	}
	return attribute.NewSet(kvs...)
}

// toInt64 rounds v to the nearest int64, saturating at the type's bounds; NaN
// is 0. The gpumem families observed as Int64 hold whole numbers.
func toInt64(v float64) int64 {
	switch {
	case math.IsNaN(v):
		return 0
	case v >= math.MaxInt64:
		return math.MaxInt64
	case v <= math.MinInt64:
		return math.MinInt64
	}
	return int64(math.Round(v))
}
