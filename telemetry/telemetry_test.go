package telemetry_test

import (
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
	"github.com/gpumem/gpumem/bind"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/deferrable"
	"github.com/gpumem/gpumem/managed"
	"github.com/gpumem/gpumem/sim"
	"github.com/gpumem/gpumem/telemetry"
)

func newSim(t *testing.T, devs ...sim.DeviceConfig) *sim.GPU {
	t.Helper()
	g, err := sim.New(sim.Config{Devices: devs, NoStacks: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func open(t *testing.T, b gpumem.Backend) *telemetry.Telemetry {
	t.Helper()
	tel, err := telemetry.Open(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Close() })
	return tel
}

// The simulator's telemetry is its accounting: used memory is what
// MemInfo says is taken, this process's is what it allocated, the other
// processes' what SetOtherProcesses set.
func TestSimulatorAccounting(t *testing.T) {
	g := newSim(t, sim.DeviceConfig{Capacity: 1 << 30}, sim.DeviceConfig{Capacity: 2 << 30, Name: "second"})
	tel := open(t, g)
	if tel.Backend() != "sim" || tel.DeviceCount() != 2 {
		t.Fatalf("backend %q with %d devices", tel.Backend(), tel.DeviceCount())
	}
	s, err := tel.Device(1)
	if err != nil {
		t.Fatal(err)
	}
	if s.Device != 1 || s.Name != "second" || s.MemoryTotal != 2<<30 || s.MemoryUsed != 0 || !s.Has(telemetry.FieldMemory) {
		t.Fatalf("fresh device: %+v", s)
	}
	if s.Has(telemetry.FieldPower) || s.Has(telemetry.FieldTemperature) || s.Has(telemetry.FieldUtilizationGPU) {
		t.Errorf("the simulator has no sensors, yet %v were read", s.Supported)
	}
	if !s.Has(telemetry.FieldClockSM|telemetry.FieldClockMem) || s.ClockSMMHz != 1980 || s.ClockMemMHz != 3201 {
		t.Errorf("clocks: %+v", s)
	}
	if s.PCIBusID != "0000:28:00.0" {
		t.Errorf("PCI address %q", s.PCIBusID)
	}
	if self, listed, err := tel.Self(0); err != nil || listed || self != 0 {
		t.Fatalf("Self before any allocation: %d %v %v", self, listed, err)
	}

	p, err := g.Malloc(0, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetOtherProcesses(0, []sim.OtherProcess{{PID: 1 << 30, Bytes: 100 << 20}, {PID: 1<<30 + 1, Bytes: 28 << 20}}); err != nil {
		t.Fatal(err)
	}
	s, _ = tel.Device(0)
	free, total, _ := g.MemInfo(0)
	if s.MemoryUsed != total-free || s.MemoryUsed != 192<<20 || s.MemoryTotal != total {
		t.Fatalf("used %d, MemInfo says %d of %d taken", s.MemoryUsed, total-free, total)
	}
	self, listed, err := tel.Self(0)
	if err != nil || !listed || self != 64<<20 {
		t.Fatalf("Self: %d %v %v, want 64 MiB", self, listed, err)
	}
	others, procs, err := tel.Others(0)
	if err != nil || others != 128<<20 || len(procs) != 2 || procs[0].PID != 1<<30 || procs[0].UsedBytes != 100<<20 {
		t.Fatalf("Others: %d %+v %v", others, procs, err)
	}
	all, _ := tel.Processes(0)
	if len(all) != 3 || all[0].PID != os.Getpid() {
		t.Fatalf("Processes: %+v", all)
	}
	if err := g.Free(0, p); err != nil {
		t.Fatal(err)
	}
	if self, _, _ := tel.Self(0); self != 0 {
		t.Fatalf("Self after Free: %d", self)
	}
	if o, _, _ := tel.Others(1); o != 0 {
		t.Fatalf("device 1 has no other processes, yet %d", o)
	}
}

// Other processes take the device's memory: an allocation that would fit
// beside them fails with them, and SetOtherProcesses refuses what does
// not fit or is malformed.
func TestSimulatorOtherProcesses(t *testing.T) {
	g := newSim(t, sim.DeviceConfig{Capacity: 1 << 30})
	if err := g.SetOtherProcesses(0, []sim.OtherProcess{{PID: 7, Bytes: 900 << 20}}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Malloc(0, 200<<20); !errors.Is(err, gpumem.ErrOutOfMemory) {
		t.Fatalf("Malloc beside 900 MiB of others on 1 GiB: %v", err)
	}
	p, err := g.Malloc(0, 100<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetOtherProcesses(0, []sim.OtherProcess{{PID: 7, Bytes: 950 << 20}}); !errors.Is(err, gpumem.ErrOutOfMemory) {
		t.Fatalf("others that do not fit: %v", err)
	}
	for _, bad := range [][]sim.OtherProcess{{{PID: 0, Bytes: 1}}, {{PID: os.Getpid(), Bytes: 1}}, {{PID: 3}, {PID: 3}}} {
		if err := g.SetOtherProcesses(0, bad); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("SetOtherProcesses(%+v): %v", bad, err)
		}
	}
	if err := g.SetOtherProcesses(1, nil); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("device 1 of 1: %v", err)
	}
	self, others, err := g.ProcessMemory(0)
	if err != nil || self != 100<<20 || len(others) != 1 || others[0].Bytes != 900<<20 {
		t.Fatalf("after refusals: %d %+v %v", self, others, err)
	}
	if err := g.SetOtherProcesses(0, nil); err != nil {
		t.Fatal(err)
	}
	if free, _, _ := g.MemInfo(0); free != 1<<30-100<<20 {
		t.Fatalf("free after the others left: %d", free)
	}
	_ = g.Free(0, p)
}

// Every allocator's out-of-memory error says what other processes hold.
func TestOutOfMemoryNamesOtherProcesses(t *testing.T) {
	type allocator interface {
		Allocate(size uint64, s gpumem.Stream) (gpumem.Ptr, error)
	}
	for _, c := range []struct {
		name string
		open func(gpumem.Backend) (allocator, func(), error)
	}{
		{"caching", func(b gpumem.Backend) (allocator, func(), error) {
			a, err := caching.New(b, caching.Options{})
			if err != nil {
				return nil, nil, err
			}
			return a, func() { a.Close() }, nil
		}},
		{"asyncpool", func(b gpumem.Backend) (allocator, func(), error) {
			a, err := asyncpool.New(b, asyncpool.Options{})
			if err != nil {
				return nil, nil, err
			}
			return a, func() { a.Close() }, nil
		}},
		{"managed", func(b gpumem.Backend) (allocator, func(), error) {
			a, err := managed.New(b, managed.Options{Force: true})
			if err != nil {
				return nil, nil, err
			}
			return a, func() { a.Close() }, nil
		}},
		{"deferrable.DeviceResource", func(b gpumem.Backend) (allocator, func(), error) {
			return deferrable.NewDeviceResource(b), func() {}, nil
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newSim(t, sim.DeviceConfig{Capacity: 1 << 30})
			if err := g.SetOtherProcesses(0, []sim.OtherProcess{{PID: 4242, Bytes: 768 << 20}}); err != nil {
				t.Fatal(err)
			}
			a, done, err := c.open(g)
			if err != nil {
				t.Fatal(err)
			}
			defer done()
			// 512 MiB does not fit beside 768 MiB of another process;
			// managed memory oversubscribes the device, and is refused
			// by its guard past the device's capacity.
			size := uint64(512 << 20)
			if c.name == "managed" {
				size = 2 << 30
			}
			_, err = a.Allocate(size, gpumem.Stream{})
			var oom *gpumem.OutOfMemoryError
			if !errors.As(err, &oom) {
				t.Fatalf("Allocate(%d) beside 768 MiB of another process: %v", size, err)
			}
			if oom.Others == nil || oom.Others.Bytes != 768<<20 || len(oom.Others.Processes) != 1 || oom.Others.Processes[0].PID != 4242 {
				t.Fatalf("Others: %+v", oom.Others)
			}
			if msg := err.Error(); !strings.Contains(msg, "other processes hold 768.00 MiB (process 4242: 768.00 MiB)") {
				t.Errorf("message: %s", msg)
			}
			if s := oom.Summary(); !strings.Contains(s, "Other processes hold 768.00 MiB (process 4242: 768.00 MiB) on device 0.") {
				t.Errorf("summary:\n%s", s)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	if _, err := telemetry.Open(nil); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("Open(nil): %v", err)
	}
	g := newSim(t)
	tel := open(t, g)
	for _, dev := range []int{-1, 1} {
		if _, err := tel.Device(dev); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("Device(%d): %v", dev, err)
		}
		if _, _, err := tel.Others(dev); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("Others(%d): %v", dev, err)
		}
	}
	if err := tel.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tel.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := tel.Device(0); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("Device after Close: %v", err)
	}
	if _, _, err := tel.Self(0); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("Self after Close: %v", err)
	}
	// A closed simulator: an error, not a panic.
	g2 := newSim(t)
	tel2 := open(t, g2)
	g2.Close()
	if _, err := tel2.Device(0); err == nil {
		t.Error("Device of a closed simulator succeeded")
	}
	// No library: ErrLibraryNotFound, naming the file.
	if _, err := telemetry.OpenSystem(bind.CUDA, bind.WithPath("/nonexistent/libnvidia-ml.so.1")); !errors.Is(err, gpumem.ErrLibraryNotFound) {
		t.Errorf("OpenSystem of a missing file: %v", err)
	}
	if _, err := telemetry.OpenSystem(bind.Vendor(7)); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("OpenSystem of vendor 7: %v", err)
	}
}

// Safe from many goroutines, while allocations change the accounting.
func TestConcurrent(t *testing.T) {
	g := newSim(t, sim.DeviceConfig{Capacity: 1 << 30})
	tel := open(t, g)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 100; k++ {
				if i%2 == 0 {
					p, err := g.Malloc(0, 1<<20)
					if err == nil {
						_ = g.Free(0, p)
					}
					continue
				}
				s, err := tel.Device(0)
				if err != nil || s.MemoryUsed > s.MemoryTotal {
					t.Errorf("Device: %+v %v", s, err)
					return
				}
				if _, _, err := tel.Others(0); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestFieldString(t *testing.T) {
	if s := (telemetry.FieldMemory | telemetry.FieldPower).String(); s != "memory|power" {
		t.Errorf("%q", s)
	}
	if s := telemetry.Field(0).String(); s != "none" {
		t.Errorf("%q", s)
	}
}
