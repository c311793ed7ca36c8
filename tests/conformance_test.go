package tests

import (
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/backendtest"
	_ "github.com/gpumem/gpumem/driver"
	_ "github.com/gpumem/gpumem/hip"
	"github.com/gpumem/gpumem/sim"
)

// simOpen returns an opener of fresh simulated machines that fails the test
// if anything the suite made is still alive, or was used after being freed,
// when the subtest ends.
func simOpen(cfg sim.Config) func(t *testing.T) gpumem.Backend {
	return func(t *testing.T) gpumem.Backend {
		g, err := sim.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for _, l := range g.Leaks() {
				t.Errorf("leaked: %s", l)
			}
			for _, v := range g.Violations() {
				t.Errorf("violation: %v", v)
			}
		})
		return g
	}
}

func TestConformanceSim(t *testing.T) {
	t.Run("OneDevice", func(t *testing.T) {
		backendtest.Run(t, simOpen(sim.Config{}))
	})
	t.Run("TwoDevices", func(t *testing.T) {
		backendtest.Run(t, simOpen(sim.Config{Devices: make([]sim.DeviceConfig, 2)}))
	})
	t.Run("Manual", func(t *testing.T) {
		backendtest.Run(t, simOpen(sim.Config{Manual: true, Devices: make([]sim.DeviceConfig, 2)}))
	})
	t.Run("NoPeer", func(t *testing.T) {
		backendtest.Run(t, simOpen(sim.Config{Devices: make([]sim.DeviceConfig, 2), Peer: func(a, b int) bool { return false }}))
	})
	t.Run("Unsupported", func(t *testing.T) {
		backendtest.Run(t, simOpen(sim.Config{Devices: []sim.DeviceConfig{{
			Name: "Simulated device without VMM, managed memory or pools", Capacity: 8 << 30,
			NoVMM: true, NoManaged: true, NoPools: true}}}))
	})
}

// simOpenVendor returns an opener of a vendor backend that skips, saying
// why, when no device is present. Each subtest gets its own instance.
func simOpenVendor(name string) func(t *testing.T) gpumem.Backend {
	return func(t *testing.T) gpumem.Backend {
		b, err := gpumem.Open(gpumem.Options{Backend: name})
		if err != nil {
			t.Skipf("no %s device here: %v", name, err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	}
}

// simRunVendor runs the suite on a vendor backend, or skips saying why.
func simRunVendor(t *testing.T, name string) {
	b, err := gpumem.Open(gpumem.Options{Backend: name})
	if err != nil {
		t.Skipf("no %s device here: %v", name, err)
	}
	_ = b.Close()
	backendtest.Run(t, simOpenVendor(name))
}

// The same suite on an NVIDIA GPU, whenever one is present.
func TestConformanceCUDAGPU(t *testing.T) { simRunVendor(t, "cuda") }

// The same suite on an AMD GPU, whenever one is present.
func TestConformanceHIPGPU(t *testing.T) { simRunVendor(t, "hip") }
