package caching

import (
	"bytes"
	"context"
	"errors"
	"math/rand"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
	"github.com/gpumem/gpumem/simtest"
)

// sleepAlloc is one allocation of a sleep test and the bytes written to it.
type sleepAlloc struct {
	p    gpumem.Ptr
	s    gpumem.Stream
	keep bool
	data []byte
}

// fillSleepWorkload allocates n blocks of varied sizes (512 bytes to 24
// MiB) on the streams, every other one kept, writes a distinct pattern to
// each and frees a few, so that the segments hold holes.
func fillSleepWorkload(t *testing.T, g *sim.GPU, a *Allocator, ss []gpumem.Stream, n int, seed int64, big bool) []sleepAlloc {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	var out []sleepAlloc
	for i := 0; i < n; i++ {
		size := uint64(512 + rng.Intn(4096))
		switch rng.Intn(4) {
		case 1:
			size = uint64(1<<20 + rng.Intn(3<<20))
		case 2:
			if big {
				size = uint64(8<<20 + rng.Intn(8<<20))
			}
		}
		s := ss[rng.Intn(len(ss))]
		keep := i%2 == 0
		tag := DiscardOnSleep
		if keep {
			tag = KeepOnSleep
		}
		p, err := a.AllocateTagged(size, s, tag)
		if err != nil {
			t.Fatalf("allocation %d of %d bytes: %v", i, size, err)
		}
		data := make([]byte, size)
		x := byte(rng.Intn(251) + 1)
		for j := range data {
			data[j] = x + byte(j%251)
		}
		if err := g.CopyToDevice(p, data); err != nil {
			t.Fatal(err)
		}
		out = append(out, sleepAlloc{p: p, s: s, keep: keep, data: data})
	}
	// Free every fifth: holes between live blocks, cached and released.
	live := out[:0]
	for i, x := range out {
		if i%5 == 4 {
			if err := a.Deallocate(x.p, x.s); err != nil {
				t.Fatal(err)
			}
			continue
		}
		live = append(live, x)
	}
	return live
}

func newSleepSim(t *testing.T, capacity uint64) (*sim.GPU, *Allocator, []gpumem.Stream) {
	t.Helper()
	return newSleepSimWith(t, capacity, expandableOptions())
}

// newSleepSimWith is newSleepSim with the allocator's options o.
func newSleepSimWith(t *testing.T, capacity uint64, o Options) (*sim.GPU, *Allocator, []gpumem.Stream) {
	t.Helper()
	g := simtest.New(t, sim.Config{Devices: []sim.DeviceConfig{{Capacity: capacity}}, NoStacks: !testing.Verbose()})
	var ss []gpumem.Stream
	for i := 0; i < 3; i++ {
		s, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, s)
		t.Cleanup(func() { _ = g.StreamDestroy(s) })
	}
	a, err := New(g, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return g, a, ss
}

// holds reports whether the device memory at p holds data.
func holds(t *testing.T, g *sim.GPU, p gpumem.Ptr, data []byte) bool {
	t.Helper()
	got := make([]byte, len(data))
	if err := g.CopyFromDevice(got, p); err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(got, data)
}

func usedBytes(t *testing.T, g *sim.GPU) uint64 {
	t.Helper()
	free, total, err := g.MemInfo(0)
	if err != nil {
		t.Fatal(err)
	}
	return total - free
}

// Sleep releases every byte of device memory while the addresses stay;
// a second allocator on the device takes the memory meanwhile; Wake maps it
// back at the same addresses with the kept contents intact byte for byte
// and the discarded ones not restored.
func TestSleepWakeKeepsContents(t *testing.T) {
	const capacity = 4 << 30
	g, a, ss := newSleepSim(t, capacity)
	allocs := fillSleepWorkload(t, g, a, ss, 80, 1, true)
	before := a.Stats(0)
	var kept, discarded uint64
	for _, x := range allocs {
		b := roundSize(&a.table, uint64(len(x.data)))
		if x.keep {
			kept += b
		} else {
			discarded += b
		}
	}
	ctx := context.Background()
	if err := a.Sleep(ctx); err != nil {
		t.Fatal(err)
	}
	if !a.Asleep(0) {
		t.Fatal("not asleep after Sleep")
	}
	checkInvariants(t, a) // the blocks and statistics are as they were
	if u := usedBytes(t, g); u != 0 {
		t.Fatalf("the device still holds %d bytes while asleep", u)
	}
	st := a.Stats(0)
	reserved := st.ReservedBytes[gpumem.StatAll].Current
	if st.AsleepBytes != reserved || reserved == 0 || st.NumSleeps != 1 {
		t.Errorf("asleep %d bytes of %d reserved, %d sleeps", st.AsleepBytes, reserved, st.NumSleeps)
	}
	if st.AsleepSavedBytes != int64(kept) || st.AsleepDiscardedBytes != int64(discarded) {
		t.Errorf("saved %d (want %d), discarded %d (want %d)", st.AsleepSavedBytes, kept, st.AsleepDiscardedBytes, discarded)
	}
	if st.AllocatedBytes != before.AllocatedBytes {
		t.Errorf("allocated bytes changed across Sleep: %v vs %v", st.AllocatedBytes, before.AllocatedBytes)
	}
	if r := a.SleepReport(0); !r.Asleep || r.Saved != kept || r.Released != uint64(reserved) || r.Copied < kept || r.Copied > kept+kept/4 || r.HostBuffer != r.Copied {
		t.Errorf("report %+v", r)
	}
	if _, err := a.Allocate(4096, ss[0]); !errors.Is(err, ErrAsleep) || !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Fatalf("Allocate while asleep: %v", err)
	}
	// Another allocator (another process) takes most of the device.
	other, err := New(g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	take := (capacity - uint64(reserved)/2) &^ (2<<20 - 1) // what is left cannot hold the sleeper
	big, err := other.Allocate(take, ss[0])
	if err != nil {
		t.Fatalf("a second allocator cannot take the released memory: %v", err)
	}
	if err := a.Wake(ctx); !errors.Is(err, gpumem.ErrOutOfMemory) || !strings.Contains(err.Error(), "stays asleep") {
		t.Fatalf("Wake while the memory is held elsewhere: %v", err)
	}
	if !a.Asleep(0) || a.Stats(0).AsleepBytes != reserved || usedBytes(t, g) < take {
		t.Fatalf("a failed Wake did not leave the device asleep as it was: asleep %v, %d asleep bytes, %d used",
			a.Asleep(0), a.Stats(0).AsleepBytes, usedBytes(t, g))
	}
	if err := other.Deallocate(big, ss[0]); err != nil {
		t.Fatal(err)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Wake(ctx); err != nil {
		t.Fatal(err)
	}
	if a.Asleep(0) {
		t.Fatal("asleep after Wake")
	}
	st = a.Stats(0)
	if st.AsleepBytes != 0 || st.AsleepSavedBytes != 0 || st.NumWakes != 1 || st.ReservedBytes[gpumem.StatAll].Current != reserved {
		t.Errorf("after Wake: asleep %d, saved %d, wakes %d, reserved %d (asleep: %d)", st.AsleepBytes, st.AsleepSavedBytes, st.NumWakes, st.ReservedBytes[gpumem.StatAll].Current, reserved)
	}
	if u := usedBytes(t, g); u != uint64(reserved) {
		t.Errorf("the device holds %d bytes after Wake, want %d", u, reserved)
	}
	if r := a.SleepReport(0); r.Restored != r.Copied || r.HostBuffer != 0 {
		t.Errorf("report after Wake %+v", r)
	}
	notRestored := 0
	for i, x := range allocs {
		same := holds(t, g, x.p, x.data)
		if x.keep && !same {
			t.Fatalf("kept allocation %d at %#x (%d bytes) changed across Sleep and Wake", i, uintptr(x.p), len(x.data))
		}
		// A discarded allocation between two kept ones may be copied
		// along (maxSavedGap); a larger one comes back undefined.
		if !x.keep && same && len(x.data) > maxSavedGap {
			t.Fatalf("discarded allocation %d at %#x (%d bytes) was restored", i, uintptr(x.p), len(x.data))
		}
		if !x.keep && !same {
			notRestored++
		}
	}
	if notRestored == 0 {
		t.Error("every discarded allocation came back")
	}
	// Every pointer is still the allocator's, at its address.
	for _, x := range allocs {
		if err := a.Deallocate(x.p, x.s); err != nil {
			t.Fatal(err)
		}
	}
	checkInvariants(t, a)
	if v := g.Violations(); len(v) != 0 {
		t.Errorf("violations: %v", v)
	}
}

// Sleep and Wake repeat; a kept buffer written between cycles keeps the
// newest contents; with KeepSleepBuffer the pinned buffer is made once.
func TestSleepWakeCycles(t *testing.T) {
	g, a, ss := newSleepSim(t, 1<<30)
	a.opts.KeepSleepBuffer = true
	p, err := a.AllocateTagged(3<<20, ss[0], KeepOnSleep)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for cycle := 0; cycle < 4; cycle++ {
		data := bytes.Repeat([]byte{byte(cycle + 1)}, 3<<20)
		if err := g.CopyToDevice(p, data); err != nil {
			t.Fatal(err)
		}
		if err := a.Sleep(ctx); err != nil {
			t.Fatal(err)
		}
		if err := a.Sleep(ctx); err != nil { // asleep already: nothing to do
			t.Fatal(err)
		}
		if err := a.Wake(ctx); err != nil {
			t.Fatal(err)
		}
		if err := a.Wake(ctx); err != nil {
			t.Fatal(err)
		}
		if !holds(t, g, p, data) {
			t.Fatalf("cycle %d: contents changed", cycle)
		}
	}
	if n := g.Calls("MallocHost"); n != 1 {
		t.Errorf("%d pinned buffers for 4 cycles with KeepSleepBuffer", n)
	}
	if r := a.SleepReport(0); r.HostBuffer != 3<<20 {
		t.Errorf("kept buffer %d bytes", r.HostBuffer)
	}
	if st := a.Stats(0); st.NumSleeps != 4 || st.NumWakes != 4 {
		t.Errorf("%d sleeps, %d wakes", st.NumSleeps, st.NumWakes)
	}
	// A tag can change after allocation.
	if err := a.SetSleepTag(p, DiscardOnSleep); err != nil {
		t.Fatal(err)
	}
	if err := a.Sleep(ctx); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(0); st.AsleepSavedBytes != 0 {
		t.Errorf("saved %d bytes of a discarded allocation", st.AsleepSavedBytes)
	}
	if err := a.Wake(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.SetSleepTag(p, 7); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("bad tag: %v", err)
	}
	if err := a.SetSleepTag(12345, KeepOnSleep); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("foreign pointer: %v", err)
	}
	if _, err := a.AllocateTagged(1, ss[0], 9); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("bad tag: %v", err)
	}
	if err := a.Deallocate(p, ss[0]); err != nil {
		t.Fatal(err)
	}
}

// Without expandable segments, or without the virtual memory API, Sleep
// refuses with ErrNotSupported and a message naming what is needed.
func TestSleepRefusals(t *testing.T) {
	ctx := context.Background()
	g := simtest.New(t, sim.Config{Devices: []sim.DeviceConfig{{Capacity: 1 << 30}, {Capacity: 1 << 30, NoVMM: true}}})
	a, err := New(g, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	p, _ := a.Allocate(4096, gpumem.Stream{Device: 0})
	if err := a.Sleep(ctx); !errors.Is(err, gpumem.ErrNotSupported) || !strings.Contains(err.Error(), "expandable_segments:True") {
		t.Fatalf("Sleep without expandable segments: %v", err)
	}
	if a.Asleep(0) {
		t.Fatal("asleep after a refusal")
	}
	if err := a.Deallocate(p, gpumem.Stream{Device: 0}); err != nil {
		t.Fatal(err)
	}
	b, err := New(g, expandableOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.SleepDevice(ctx, 1); !errors.Is(err, gpumem.ErrNotSupported) || !strings.Contains(err.Error(), "virtual memory") {
		t.Fatalf("Sleep on a device without VMM: %v", err)
	}
	// Sleeping every device fails on device 1 and wakes device 0 again.
	q, _ := b.AllocateTagged(4096, gpumem.Stream{Device: 0}, KeepOnSleep)
	if err := b.Sleep(ctx); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Fatalf("Sleep of both devices: %v", err)
	}
	if b.Asleep(0) || b.Asleep(1) {
		t.Fatal("a failed Sleep left a device asleep")
	}
	if err := b.SleepDevice(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := b.SleepDevice(ctx, 5); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("unknown device: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.WakeDevice(cctx, 0); !errors.Is(err, context.Canceled) || !b.Asleep(0) {
		t.Errorf("Wake with a cancelled context: %v, asleep %v", err, b.Asleep(0))
	}
	if err := b.WakeDevice(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := b.SleepDevice(cctx, 0); !errors.Is(err, context.Canceled) || b.Asleep(0) {
		t.Errorf("Sleep with a cancelled context: %v, asleep %v", err, b.Asleep(0))
	}
	// A nil context is refused, and leaves the devices usable.
	var none context.Context
	for name, f := range map[string]func() error{
		"Sleep": func() error { return b.Sleep(none) }, "SleepDevice": func() error { return b.SleepDevice(none, 0) },
		"Wake": func() error { return b.Wake(none) }, "WakeDevice": func() error { return b.WakeDevice(none, 0) },
	} {
		if err := f(); !errors.Is(err, gpumem.ErrInvalidValue) || !strings.Contains(err.Error(), "nil context") {
			t.Errorf("%s(nil): %v, want ErrInvalidValue naming the nil context", name, err)
		}
	}
	if b.Asleep(0) {
		t.Error("a refused Sleep left device 0 asleep")
	}
	if err := b.Deallocate(q, gpumem.Stream{Device: 0}); err != nil {
		t.Fatal(err)
	}
}

// Using memory while asleep is reported by the simulator: an enqueue fails
// naming the unmapped reservation, and a kernel that reaches the memory
// through an address it computed is stopped and reported as a Violation.
func TestSleepUseWhileAsleepReported(t *testing.T) {
	g, a, ss := newSleepSim(t, 1<<30)
	p, err := a.AllocateTagged(1<<20, ss[0], KeepOnSleep)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.RegisterKernel(sim.Kernel{
		Name:   "peek",
		Params: []sim.Param{sim.ScalarParam(8)},
		Run:    func(k *sim.KernelCall) { _ = sim.Load[byte](k, gpumem.Ptr(k.Arg.Uint64(0)), 0) },
	}); err != nil {
		t.Fatal(err)
	}
	mod, err := g.ModuleLoadData(0, sim.ModuleImage{Kernels: []string{"peek"}}.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	defer g.ModuleUnload(mod)
	f, err := g.ModuleFunction(mod, "peek")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Sleep(context.Background()); err != nil {
		t.Fatal(err)
	}
	err = g.MemsetAsync(p, 1, 16, ss[0])
	if !errors.Is(err, gpumem.ErrInvalidValue) || !strings.Contains(err.Error(), "no physical memory is mapped") {
		t.Fatalf("memset while asleep: %v", err)
	}
	addr := uint64(p)
	if err := launchWords(g, f, ss[1], &addr); err != nil {
		t.Fatal(err)
	}
	_ = g.StreamSynchronize(ss[1]) // the kernel's fault is sticky
	v := g.Violations()
	if len(v) != 1 || !strings.Contains(v[0].What, "no physical memory is mapped") {
		t.Fatalf("violations: %v", v)
	}
	g.ClearViolations()
	// The fault is sticky, as an illegal address is on a GPU: the device
	// is unusable; Close (a cleanup) still returns every object.
}

// Frees while asleep are allowed (the block is free after Wake); Close
// while asleep returns everything, the pinned buffer included.
func TestSleepFreeAndCloseWhileAsleep(t *testing.T) {
	g := simtest.New(t, sim.Config{Devices: []sim.DeviceConfig{{Capacity: 1 << 30}}})
	a, err := New(g, expandableOptions())
	if err != nil {
		t.Fatal(err)
	}
	s := gpumem.Stream{Device: 0}
	p, _ := a.AllocateTagged(5<<20, s, KeepOnSleep)
	q, _ := a.AllocateTagged(5<<20, s, KeepOnSleep)
	if err := a.Sleep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := a.Deallocate(p, s); err != nil {
		t.Fatalf("free while asleep: %v", err)
	}
	if st := a.Stats(0); st.AllocatedBytes[gpumem.StatAll].Current != 5<<20 {
		t.Errorf("allocated %d after a free while asleep", st.AllocatedBytes[gpumem.StatAll].Current)
	}
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if a.Asleep(0) {
		t.Error("asleep after Close")
	}
	if err := a.Sleep(context.Background()); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("Sleep after Close: %v", err)
	}
	if err := a.Wake(context.Background()); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("Wake after Close: %v", err)
	}
	_ = q
	// simtest checks that nothing leaked: the pinned buffer, the stream,
	// the reservations.
}

// launchWords launches f with one 8-byte argument.
func launchWords(g *sim.GPU, f gpumem.Function, s gpumem.Stream, w *uint64) error {
	args := []unsafe.Pointer{unsafe.Pointer(w)}
	params := gpumem.KernelParams{Array: uintptr(unsafe.Pointer(&args[0])), Count: len(args)}
	err := g.LaunchKernel(f, gpumem.Dim3{X: 1}, gpumem.Dim3{X: 1}, 0, s, params)
	runtime.KeepAlive(args)
	return err
}

// Kept allocations are saved in runs: adjacent ones, and ones apart by a
// small discarded allocation, in one copy; a large discarded allocation or
// free memory between them splits the run.
func TestSleepRuns(t *testing.T) {
	_, a, ss := newSleepSim(t, 1<<30)
	s := ss[0]
	var ps []gpumem.Ptr
	for _, x := range []struct {
		size uint64
		tag  SleepTag
	}{{512 << 10, KeepOnSleep}, {4 << 10, DiscardOnSleep}, {512 << 10, KeepOnSleep}, {256 << 10, DiscardOnSleep}, {512 << 10, KeepOnSleep},
		{64 << 10, DiscardOnSleep}, {64 << 10, KeepOnSleep}} {
		p, err := a.AllocateTagged(x.size, s, x.tag)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	if err := a.Deallocate(ps[5], s); err != nil { // free memory between two kept
		t.Fatal(err)
	}
	d := a.devs[0]
	d.mu.Lock()
	var segs []*segment
	for seg := range d.segments {
		segs = append(segs, seg)
	}
	runs, saved, copied, discarded := keptRuns(segs)
	d.mu.Unlock()
	want := []savedRun{{ps[0], 1028 << 10, 0}, {ps[4], 512 << 10, 1028 << 10}, {ps[6], 64 << 10, 1540 << 10}}
	if len(runs) != len(want) {
		t.Fatalf("runs %+v, want %+v", runs, want)
	}
	for i := range want {
		if runs[i] != want[i] {
			t.Errorf("run %d: %+v, want %+v", i, runs[i], want[i])
		}
	}
	if saved != 1600<<10 || copied != 1604<<10 || discarded != 260<<10 {
		t.Errorf("saved %d, copied %d, discarded %d", saved, copied, discarded)
	}
	for i, p := range ps {
		if i != 5 {
			_ = a.Deallocate(p, s)
		}
	}
}
