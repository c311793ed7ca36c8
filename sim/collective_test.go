package sim_test

import (
	"errors"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

func twoDevices(t *testing.T, manual bool) (*sim.GPU, []gpumem.Stream, []gpumem.Ptr) {
	t.Helper()
	g, err := sim.New(sim.Config{Devices: make([]sim.DeviceConfig, 2), Manual: manual})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	var ss []gpumem.Stream
	var ps []gpumem.Ptr
	for d := range 2 {
		s, err := g.StreamCreate(d, gpumem.StreamNonBlocking, 0)
		if err != nil {
			t.Fatal(err)
		}
		p, err := g.Malloc(d, 64)
		if err != nil {
			t.Fatal(err)
		}
		ss, ps = append(ss, s), append(ps, p)
	}
	return g, ss, ps
}

// TestRendezvousOrder: Run sees the work queued before every part, the
// work queued after a part sees Run's writes, and Run runs once.
func TestRendezvousOrder(t *testing.T) {
	for _, manual := range []bool{false, true} {
		g, ss, ps := twoDevices(t, manual)
		runs := 0
		r, err := g.NewRendezvous("swap", 2, func(k []*sim.KernelCall) {
			runs++
			a, b := make([]byte, 64), make([]byte, 64)
			k[0].Read(ps[0], a)
			k[1].Read(ps[1], b)
			k[0].Write(ps[0], b)
			k[1].Write(ps[1], a)
		})
		if err != nil {
			t.Fatal(err)
		}
		after := make([]gpumem.Ptr, 2)
		for d := range 2 {
			if err := g.MemsetAsync(ps[d], byte(10+d), 64, ss[d]); err != nil {
				t.Fatal(err)
			}
			if err := g.QueueRendezvous(ss[d], sim.RendezvousPart{R: r, Index: d, Mem: []sim.MemRange{{Ptr: ps[d], Size: 64}}}); err != nil {
				t.Fatal(err)
			}
			after[d], _ = g.Malloc(d, 64)
			if err := g.MemcpyAsync(after[d], ps[d], 64, ss[d]); err != nil {
				t.Fatal(err)
			}
		}
		if err := g.StreamSynchronize(ss[1]); err != nil {
			t.Fatal(err)
		}
		if err := g.StreamSynchronize(ss[0]); err != nil {
			t.Fatal(err)
		}
		for d := range 2 {
			b := make([]byte, 64)
			_ = g.CopyFromDevice(b, after[d])
			if b[0] != byte(11-d) || b[63] != byte(11-d) {
				t.Errorf("manual %v: device %d read %d after the rendezvous", manual, d, b[0])
			}
		}
		if runs != 1 || !r.Done() {
			t.Errorf("manual %v: Run ran %d times, done %v", manual, runs, r.Done())
		}
	}
}

// TestRendezvousRefusals: bad parts, Abort, and a capturing stream.
func TestRendezvousRefusals(t *testing.T) {
	g, ss, ps := twoDevices(t, false)
	if _, err := g.NewRendezvous("x", 0, func([]*sim.KernelCall) {}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("0 participants: %v", err)
	}
	r, _ := g.NewRendezvous("x", 2, func([]*sim.KernelCall) { t.Error("an aborted rendezvous ran") })
	if err := g.QueueRendezvous(ss[0], sim.RendezvousPart{R: r, Index: 2}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("index 2 of 2: %v", err)
	}
	if err := g.QueueRendezvous(ss[0], sim.RendezvousPart{R: r, Index: 0, Mem: []sim.MemRange{{Ptr: ps[0], Size: 4096}}}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("a range past the allocation: %v", err)
	}
	if err := g.QueueRendezvous(ss[0], sim.RendezvousPart{R: r, Index: 0, Mem: []sim.MemRange{{Ptr: ps[0], Size: 64}}}); err != nil {
		t.Fatal(err)
	}
	if err := g.QueueRendezvous(ss[1], sim.RendezvousPart{R: r, Index: 0}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("index queued twice: %v", err)
	}
	if done, _ := g.StreamQuery(ss[0]); done {
		t.Error("a part ran before the other arrived")
	}
	if !r.Abort() || r.Abort() {
		t.Error("Abort: want true once, then false")
	}
	if err := g.StreamSynchronize(ss[0]); err != nil {
		t.Fatal(err)
	}
	if err := g.QueueRendezvous(ss[1], sim.RendezvousPart{R: r, Index: 1}); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("part of an aborted rendezvous: %v", err)
	}
	r2, _ := g.NewRendezvous("y", 1, func([]*sim.KernelCall) {})
	if err := g.StreamBeginCapture(ss[0], gpumem.CaptureModeRelaxed); err != nil {
		t.Fatal(err)
	}
	if err := g.QueueRendezvous(ss[0], sim.RendezvousPart{R: r2, Index: 0}); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Errorf("capturing: %v", err)
	}
	if gr, err := g.StreamEndCapture(ss[0]); err == nil {
		_ = g.GraphDestroy(gr)
	}
}

// TestRendezvousFault: an access outside live memory in Run is the sticky
// error of every participant's device.
func TestRendezvousFault(t *testing.T) {
	g, ss, ps := twoDevices(t, false)
	r, _ := g.NewRendezvous("overrun", 2, func(k []*sim.KernelCall) {
		k[1].Read(ps[1], make([]byte, 128)) // 64 bytes past the end
	})
	for d := range 2 {
		if err := g.QueueRendezvous(ss[d], sim.RendezvousPart{R: r, Index: d}); err != nil {
			t.Fatal(err)
		}
	}
	for d := range 2 {
		var ge *gpumem.Error
		if err := g.StreamSynchronize(ss[d]); !errors.As(err, &ge) || ge.Code != 700 {
			t.Errorf("device %d: %v, want CUDA_ERROR_ILLEGAL_ADDRESS", d, err)
		}
	}
	if len(g.Violations()) == 0 {
		t.Error("no violation recorded")
	}
}
