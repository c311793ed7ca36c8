package backendtest_test

import (
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/backendtest"
	"github.com/gpumem/gpumem/sim"
)

// A backend's conformance test: Run gets a function that opens a fresh
// backend for each subtest (here the simulator; a GPU backend's test skips
// when Open fails with ErrLibraryNotFound or ErrNoDevice). Run needs the
// test's *testing.T, so this example shows the test function it belongs in.
func ExampleRun() {
	_ = func(t *testing.T) {
		backendtest.Run(t, func(t *testing.T) gpumem.Backend {
			g, err := sim.New(sim.Config{Devices: []sim.DeviceConfig{{}, {}}}) // two devices: peer access too
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = g.Close() })
			return g
		})
	}
}
