package otel_test

import (
	"context"
	"fmt"
	"sort"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/metrics"
	gpuotel "github.com/gpumem/gpumem/metrics/otel"
	"github.com/gpumem/gpumem/sim"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Watch a caching allocator through OpenTelemetry: register the registry
// with a meter, and every collection of the meter's provider (here a
// ManualReader's; in a service, a PeriodicReader with an OTLP exporter)
// reads the allocator's statistics.
func Example() {
	g := sim.NewDefault()
	defer g.Close()
	a, err := caching.New(g, caching.DefaultOptions())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	s := gpumem.Stream{Device: 0}
	p, _ := a.Allocate(1000, s)
	defer a.Deallocate(p, s)

	reg := metrics.NewRegistry()
	if err := reg.Add("caching", a, []int{0}); err != nil {
		fmt.Println(err)
		return
	}
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	registration, err := gpuotel.Register(provider.Meter("github.com/gpumem/gpumem"), reg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer registration.Unregister()

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		fmt.Println(err)
		return
	}
	var lines []string
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch m.Name {
		case "gpumem_requested_bytes":
			for _, dp := range m.Data.(metricdata.Gauge[int64]).DataPoints {
				pool, _ := dp.Attributes.Value("pool")
				lines = append(lines, fmt.Sprintf("%s [%s] pool=%s: %d", m.Name, m.Unit, pool.AsString(), dp.Value))
			}
		case "gpumem_num_device_alloc_total":
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				lines = append(lines, fmt.Sprintf("%s: %d", m.Name, dp.Value))
			}
		}
	}
	sort.Strings(lines) // the SDK keeps no order among data points
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// gpumem_num_device_alloc_total: 1
	// gpumem_requested_bytes [By] pool=large: 0
	// gpumem_requested_bytes [By] pool=small: 1000
}
