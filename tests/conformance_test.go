package tests

import (
	"errors"
	"fmt"
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

// simProbe is one call whose outcome the simulator must report as CUDA does.
type simProbe struct {
	name string
	mode gpumem.CaptureMode // the capture active during the call; -1: none
	call func(b gpumem.Backend, capturing, other gpumem.Stream, p gpumem.Ptr) error
}

// simOutcome runs the probes on b and describes what each returned: the
// vendor status code and, under capture, whether the capture survived.
func simOutcome(t *testing.T, b gpumem.Backend, probes []simProbe) []string {
	t.Helper()
	s, err := b.StreamCreate(0, gpumem.StreamDefault, 0)
	if err != nil {
		t.Fatal(err)
	}
	other, err := b.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := b.Malloc(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, pr := range probes {
		if pr.mode >= 0 {
			if err := b.StreamBeginCapture(s, pr.mode); err != nil {
				t.Fatalf("%s: StreamBeginCapture: %v", pr.name, err)
			}
		}
		err := pr.call(b, s, other, p)
		res := fmt.Sprintf("%s: code %d", pr.name, simCode(err))
		if pr.mode >= 0 {
			info, _ := b.StreamCaptureInfo(s)
			g, endErr := b.StreamEndCapture(s)
			res += fmt.Sprintf(", capture %v, end code %d", info.Status, simCode(endErr))
			if endErr == nil {
				_ = b.GraphDestroy(g)
			}
		}
		_ = b.DeviceSynchronize(0)
		out = append(out, res)
	}
	_ = b.Free(0, p)
	_ = b.StreamDestroy(s)
	_ = b.StreamDestroy(other)
	return out
}

func simCode(err error) int {
	var ge *gpumem.Error
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ge):
		return ge.Code
	}
	return -1
}

// The simulator follows CUDA's rules: the same calls give the same status
// codes and leave captures in the same state on both. It runs whenever an
// NVIDIA GPU is present.
func TestSimMatchesCUDAGPU(t *testing.T) {
	cuda, err := gpumem.Open(gpumem.Options{Backend: "cuda"})
	if err != nil {
		t.Skipf("no cuda device here: %v", err)
	}
	defer cuda.Close()
	global, relaxed := gpumem.CaptureModeGlobal, gpumem.CaptureModeRelaxed
	var probes []simProbe
	for _, mode := range []gpumem.CaptureMode{global, relaxed} {
		m := fmt.Sprintf(" (capture mode %d)", mode)
		probes = append(probes,
			simProbe{"DeviceSynchronize" + m, mode, func(b gpumem.Backend, s, o gpumem.Stream, p gpumem.Ptr) error { return b.DeviceSynchronize(0) }},
			simProbe{"Malloc+Free" + m, mode, func(b gpumem.Backend, s, o gpumem.Stream, p gpumem.Ptr) error {
				q, err := b.Malloc(0, 512)
				if err != nil {
					return err
				}
				return b.Free(0, q)
			}},
			simProbe{"synchronous Memset" + m, mode, func(b gpumem.Backend, s, o gpumem.Stream, p gpumem.Ptr) error { return b.Memset(p, 0, 16) }},
			simProbe{"legacy-stream MemsetAsync" + m, mode, func(b gpumem.Backend, s, o gpumem.Stream, p gpumem.Ptr) error {
				return b.MemsetAsync(p, 0, 16, gpumem.Stream{Device: 0})
			}},
			simProbe{"StreamSynchronize of another stream" + m, mode, func(b gpumem.Backend, s, o gpumem.Stream, p gpumem.Ptr) error { return b.StreamSynchronize(o) }},
			simProbe{"StreamQuery of the capturing stream" + m, mode, func(b gpumem.Backend, s, o gpumem.Stream, p gpumem.Ptr) error { _, err := b.StreamQuery(s); return err }},
			simProbe{"captured MemsetAsync and host function" + m, mode, func(b gpumem.Backend, s, o gpumem.Stream, p gpumem.Ptr) error {
				if err := b.MemsetAsync(p, 1, 16, s); err != nil {
					return err
				}
				return b.LaunchHostFunc(s, func() {})
			}},
		)
	}
	probes = append(probes,
		simProbe{"Free(0)", -1, func(b gpumem.Backend, s, o gpumem.Stream, p gpumem.Ptr) error { return b.Free(0, 0) }},
		simProbe{"Malloc(0)", -1, func(b gpumem.Backend, s, o gpumem.Stream, p gpumem.Ptr) error { _, err := b.Malloc(0, 0); return err }},
		simProbe{"Free inside an allocation", -1, func(b gpumem.Backend, s, o gpumem.Stream, p gpumem.Ptr) error { return b.Free(0, p.Add(512)) }},
		simProbe{"Malloc of 1 PiB", -1, func(b gpumem.Backend, s, o gpumem.Stream, p gpumem.Ptr) error {
			_, err := b.Malloc(0, 1<<50)
			return err
		}},
		simProbe{"EnablePeerAccess to itself", -1, func(b gpumem.Backend, s, o gpumem.Stream, p gpumem.Ptr) error { return b.EnablePeerAccess(0, 0) }},
		simProbe{"MemAddressFree while mapped", -1, func(b gpumem.Backend, s, o gpumem.Stream, p gpumem.Ptr) error {
			gran, err := b.MemGranularity(0, false)
			if err != nil {
				return err
			}
			va, _ := b.MemAddressReserve(2*gran, 0)
			h, _ := b.MemCreate(0, gran)
			_ = b.MemMap(va, gran, 0, h)
			err = b.MemAddressFree(va, 2*gran)
			_ = b.MemUnmap(va, gran)
			_ = b.MemRelease(h)
			_ = b.MemAddressFree(va, 2*gran)
			return err
		}},
	)
	g, err := sim.New(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	want := simOutcome(t, cuda, probes)
	got := simOutcome(t, g, probes)
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("sim %s\n   cuda %s", got[i], want[i])
		} else {
			t.Logf("both %s", got[i])
		}
	}
	for _, l := range g.Leaks() {
		t.Errorf("sim leaked: %s", l)
	}
}
