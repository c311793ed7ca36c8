package allocatortest_test

import (
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/adaptor"
	"github.com/gpumem/gpumem/allocatortest"
	"github.com/gpumem/gpumem/caching"
)

// An allocator's conformance test: Run gets a function that builds the
// allocator on the backend of each subtest (a small simulated device by
// default). An adaptor passes the same suite over an allocator it wraps.
// Run needs the test's *testing.T, so this example shows the test function
// it belongs in.
func ExampleRun() {
	_ = func(t *testing.T) {
		allocatortest.Run(t, func(t *testing.T, b gpumem.Backend) gpumem.Allocator {
			up, err := caching.New(b, caching.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			a, err := adaptor.NewLimit(up, 128<<20) // at most 128 MiB through a
			if err != nil {
				t.Fatal(err)
			}
			return a
		})
	}
}
