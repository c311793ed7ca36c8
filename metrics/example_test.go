package metrics_test

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/metrics"
	"github.com/gpumem/gpumem/sim"
)

// Watch a caching allocator: its statistics in the Prometheus text format
// (serve them with Handler) and through expvar with Publish.
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

	var reg metrics.Registry
	if err := reg.Add("caching", a, []int{0}); err != nil {
		fmt.Println(err)
		return
	}
	var buf bytes.Buffer
	if err := reg.WritePrometheus(&buf); err != nil {
		fmt.Println(err)
		return
	}
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.Contains(line, "gpumem_requested_bytes ") ||
			strings.HasPrefix(line, `gpumem_requested_bytes{`) {
			fmt.Println(line)
		}
	}
	// Output:
	// # HELP gpumem_requested_bytes Bytes asked for (unrounded): current value, by pool (the pools add up to the total).
	// # TYPE gpumem_requested_bytes gauge
	// gpumem_requested_bytes{allocator="caching",device="0",pool="small"} 1000
	// gpumem_requested_bytes{allocator="caching",device="0",pool="large"} 0
}
