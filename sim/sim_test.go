package sim_test

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

func newSim(t *testing.T, cfg sim.Config) *sim.GPU {
	t.Helper()
	g, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func ok(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func code(err error) int {
	var ge *gpumem.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return -1
}

// noLeaks fails the test if g reports leaks or violations.
func noLeaks(t *testing.T, g *sim.GPU) {
	t.Helper()
	for _, l := range g.Leaks() {
		t.Errorf("leak: %s", l)
	}
	for _, v := range g.Violations() {
		t.Errorf("violation: %v", v)
	}
}

func TestOutOfMemoryIsExactlyTheDriversError(t *testing.T) {
	g := newSim(t, sim.Config{Devices: []sim.DeviceConfig{{Capacity: 1 << 30}}})
	p, err := g.Malloc(0, 1<<30)
	ok(t, err)
	_, err = g.Malloc(0, 512)
	want := &gpumem.Error{Backend: "sim", Op: "cuMemAlloc_v2", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Err: gpumem.ErrOutOfMemory}
	ge, isErr := err.(*gpumem.Error)
	if !isErr || *ge != *want {
		t.Fatalf("out of memory: %#v, want %#v", err, want)
	}
	free, total, err := g.MemInfo(0)
	ok(t, err)
	if free != 0 || total != 1<<30 {
		t.Errorf("MemInfo = %d free of %d, want 0 of 1 GiB", free, total)
	}
	ok(t, g.Free(0, p))
	q, err := g.Malloc(0, 1<<30)
	ok(t, err)
	ok(t, g.Free(0, q))
	free, _, _ = g.MemInfo(0)
	if free != 1<<30 {
		t.Errorf("free %d after freeing everything", free)
	}
}

func TestErrorNamesAndSentinels(t *testing.T) {
	g := sim.NewDefault()
	for c, name := range map[int]string{1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY", 100: "CUDA_ERROR_NO_DEVICE",
		400: "CUDA_ERROR_INVALID_HANDLE", 801: "CUDA_ERROR_NOT_SUPPORTED", 900: "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"} {
		if got := g.ErrorName(c); got != name {
			t.Errorf("ErrorName(%d) = %q, want %q", c, got, name)
		}
	}
	if g.ErrorName(123456) != "" {
		t.Error("an unknown code has a name")
	}
	_, err := g.Malloc(0, 0)
	if !errors.Is(err, gpumem.ErrInvalidValue) || code(err) != 1 {
		t.Errorf("Malloc(0): %v", err)
	}
	_, err = g.Malloc(7, 512)
	if !errors.Is(err, gpumem.ErrInvalidValue) || code(err) != 101 {
		t.Errorf("Malloc on a missing device: %v", err)
	}
	if err := g.Free(0, 0x1234); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("Free of a foreign pointer: %v", err)
	}
	var ge *gpumem.Error
	if !errors.As(g.Free(0, 0x1234), &ge) || ge.Backend != "sim" || ge.Op != "cuMemFree_v2" {
		t.Errorf("Free error does not carry the vendor error: %#v", ge)
	}
	v, err := g.Version()
	ok(t, err)
	if v.Driver != 13000 || v.Runtime != 13000 {
		t.Errorf("Version = %+v", v)
	}
}

func TestClose(t *testing.T) {
	g := sim.NewDefault()
	s, err := g.StreamCreate(0, 0, 0)
	ok(t, err)
	ok(t, g.Close())
	if err := g.Close(); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
	checks := map[string]error{}
	_, checks["Malloc"] = g.Malloc(0, 1)
	checks["StreamSynchronize"] = g.StreamSynchronize(s)
	_, checks["MallocAsync"] = g.MallocAsync(1, s)
	_, checks["MemGranularity"] = g.MemGranularity(0, false)
	checks["Drain"] = g.Drain()
	for name, err := range checks {
		if !errors.Is(err, gpumem.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	if len(g.Leaks()) != 1 {
		t.Errorf("Leaks after Close should still report the stream: %q", g.Leaks())
	}
}

func TestInjectFault(t *testing.T) {
	g := sim.NewDefault()
	g.InjectFault("Malloc", 2, nil)
	p1, err := g.Malloc(0, 512)
	ok(t, err)
	_, err = g.Malloc(0, 512)
	if !errors.Is(err, gpumem.ErrOutOfMemory) || code(err) != 2 {
		t.Fatalf("second Malloc: %v, want the injected out-of-memory error", err)
	}
	p3, err := g.Malloc(0, 512)
	ok(t, err)
	if g.Calls("Malloc") != 3 {
		t.Errorf("Calls(Malloc) = %d", g.Calls("Malloc"))
	}
	mine := errors.New("boom")
	s, err := g.StreamCreate(0, 0, 0)
	ok(t, err)
	e, err := g.EventCreate(0, 0)
	ok(t, err)
	g.InjectFault("EventRecord", 1, mine)
	if err := g.EventRecord(e, s); err != mine {
		t.Errorf("EventRecord: %v, want the injected error", err)
	}
	g.InjectFault("StreamSynchronize", 1, nil)
	if err := g.StreamSynchronize(s); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("StreamSynchronize: %v, want an injected invalid-value error", err)
	}
	g.InjectFault("Free", 1, nil)
	g.ClearFaults()
	ok(t, g.Free(0, p1))
	ok(t, g.Free(0, p3))
	ok(t, g.EventDestroy(e))
	ok(t, g.StreamDestroy(s))
	noLeaks(t, g)
	defer func() {
		if recover() == nil {
			t.Error("InjectFault of an unknown method did not panic")
		}
	}()
	g.InjectFault("NoSuchMethod", 1, nil)
}

func TestAddresses(t *testing.T) {
	g := newSim(t, sim.Config{Devices: make([]sim.DeviceConfig, 3)})
	seen := map[gpumem.Ptr]int{}
	for dev := 0; dev < 3; dev++ {
		for i := 0; i < 100; i++ {
			p, err := g.Malloc(dev, uint64(1+i*37))
			ok(t, err)
			if p == 0 || p%512 != 0 {
				t.Fatalf("address %#x is null or not aligned to 512", uint64(p))
			}
			if d, dup := seen[p]; dup {
				t.Fatalf("address %#x handed out on devices %d and %d", uint64(p), d, dev)
			}
			seen[p] = dev
		}
	}
	h, err := g.MallocHost(100)
	ok(t, err)
	m, err := g.MallocManaged(1, 100)
	ok(t, err)
	if _, dup := seen[h]; dup || h == m {
		t.Error("host or managed memory shares an address with device memory")
	}
	for p, dev := range seen {
		ok(t, g.Free(dev, p))
	}
	ok(t, g.FreeHost(h))
	ok(t, g.Free(1, m))
	noLeaks(t, g)
}

func TestLazyMemory(t *testing.T) {
	g := sim.NewDefault()
	p, err := g.Malloc(0, 100<<30)
	ok(t, err)
	at := p.Add(100<<30 - 10)
	ok(t, g.CopyToDevice(at, []byte("0123456789")))
	got := make([]byte, 20)
	ok(t, g.CopyFromDevice(got, p.Add(100<<30-20)))
	if want := append(make([]byte, 10), "0123456789"...); !bytes.Equal(got, want) {
		t.Errorf("read %q, want %q", got, want)
	}
	ok(t, g.Memset(p, 0, 100<<30)) // zero memset of untouched memory costs nothing
	ok(t, g.Free(0, p))
	noLeaks(t, g)
}

func TestManualStepping(t *testing.T) {
	g := newSim(t, sim.Config{Manual: true})
	s, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	ok(t, err)
	p, err := g.Malloc(0, 4096)
	ok(t, err)
	ok(t, g.MemsetAsync(p, 9, 4096, s))
	ok(t, g.MemsetAsync(p, 10, 100, s))
	done, err := g.StreamQuery(s)
	ok(t, err)
	if done {
		t.Fatal("work ran before Step in Manual mode")
	}
	if !g.Step(s) {
		t.Fatal("Step ran nothing")
	}
	h, err := g.MallocHost(4096)
	ok(t, err)
	hb, err := g.HostBytes(h, 4096)
	ok(t, err)
	// Copy through a non-blocking stream so that the copy does not wait for s.
	s2, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	ok(t, err)
	ok(t, g.MemcpyAsync(h, p, 4096, s2))
	ok(t, g.StreamSynchronize(s2))
	if hb[0] != 9 || hb[4095] != 9 {
		t.Errorf("after one step: %d %d, want 9 9", hb[0], hb[4095])
	}
	ok(t, g.Drain())
	if g.Step(s) {
		t.Error("Step ran something on an idle stream")
	}
	ok(t, g.MemcpyAsync(h, p, 4096, s2))
	ok(t, g.StreamSynchronize(s2))
	if hb[0] != 10 || hb[100] != 9 {
		t.Errorf("after draining: %d %d, want 10 9", hb[0], hb[100])
	}
	ok(t, g.StreamDestroy(s))
	ok(t, g.StreamDestroy(s2))
	ok(t, g.Free(0, p))
	ok(t, g.FreeHost(h))
	noLeaks(t, g)
}

// The legacy default stream waits for blocking streams and they wait for it;
// non-blocking streams do not.
func TestLegacyStreamSemantics(t *testing.T) {
	g := newSim(t, sim.Config{Manual: true})
	blocking, err := g.StreamCreate(0, gpumem.StreamDefault, 0)
	ok(t, err)
	nonBlocking, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	ok(t, err)
	legacy := gpumem.Stream{Device: 0}
	p, err := g.Malloc(0, 4096)
	ok(t, err)
	ok(t, g.MemsetAsync(p, 1, 10, blocking))
	ok(t, g.MemsetAsync(p, 2, 10, nonBlocking))
	ok(t, g.MemsetAsync(p, 3, 10, legacy))
	if g.Step(legacy) {
		t.Error("the legacy stream ran before the blocking stream's earlier work")
	}
	ok(t, g.MemsetAsync(p, 4, 10, blocking))
	if !g.Step(nonBlocking) {
		t.Error("the non-blocking stream waited")
	}
	if !g.Step(blocking) {
		t.Error("the blocking stream's first op did not run")
	}
	if g.Step(blocking) {
		t.Error("the blocking stream's op queued after the legacy stream's ran before it")
	}
	if !g.Step(legacy) || !g.Step(blocking) {
		t.Error("the legacy stream and then the blocking stream should run")
	}
	ok(t, g.StreamDestroy(blocking))
	ok(t, g.StreamDestroy(nonBlocking))
	ok(t, g.Free(0, p))
	noLeaks(t, g)
}

func TestPoolAccounting(t *testing.T) {
	g := newSim(t, sim.Config{Devices: []sim.DeviceConfig{{Capacity: 1 << 30}}})
	s, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	pool, err := g.DefaultMemPool(0)
	ok(t, err)
	attr := func(a gpumem.PoolAttribute) uint64 {
		v, err := g.MemPoolGetAttribute(pool, a)
		ok(t, err)
		return v
	}
	if attr(gpumem.PoolReleaseThreshold) != 0 {
		t.Error("default release threshold is not 0")
	}
	var ptrs []gpumem.Ptr
	var sum uint64
	for _, n := range []uint64{1, 600, 5 << 20, 100} {
		p, err := g.MallocAsync(n, s)
		ok(t, err)
		ptrs = append(ptrs, p)
		sum += n // CUDA counts what was asked for
	}
	if u := attr(gpumem.PoolUsedMemCurrent); u != sum {
		t.Errorf("used %d, want %d", u, sum)
	}
	r := attr(gpumem.PoolReservedMemCurrent)
	if r != 32<<20 {
		t.Errorf("reserved %d for %d used: want one 32 MiB chunk, as CUDA", r, sum)
	}
	free, _, _ := g.MemInfo(0)
	if free != 1<<30-r {
		t.Errorf("MemInfo free %d, want capacity minus the pool's %d", free, r)
	}
	for _, p := range ptrs {
		ok(t, g.FreeAsync(p, s))
	}
	if u := attr(gpumem.PoolUsedMemCurrent); u != 0 {
		t.Errorf("used %d after the frees", u)
	}
	if attr(gpumem.PoolReservedMemCurrent) != r {
		t.Error("memory released before a synchronization point")
	}
	ok(t, g.StreamSynchronize(s))
	if got := attr(gpumem.PoolReservedMemCurrent); got != 0 {
		t.Errorf("reserved %d after synchronizing with threshold 0", got)
	}
	if attr(gpumem.PoolReservedMemHigh) != r || attr(gpumem.PoolUsedMemHigh) != sum {
		t.Error("high-water marks lost")
	}
	// A pool with a maximum size.
	small, err := g.MemPoolCreate(gpumem.PoolProps{Device: 0, MaxSize: 4 << 20})
	ok(t, err)
	p, err := g.MallocFromPoolAsync(3<<20, small, s)
	ok(t, err)
	if _, err := g.MallocFromPoolAsync(2<<20, small, s); !errors.Is(err, gpumem.ErrOutOfMemory) {
		t.Errorf("allocation beyond the pool's maximum: %v", err)
	}
	ok(t, g.MemPoolDestroy(small)) // the live allocation keeps its memory
	ok(t, g.CopyToDevice(p, []byte{1}))
	ok(t, g.FreeAsync(p, s))
	ok(t, g.StreamSynchronize(s))
	if free, _, _ := g.MemInfo(0); free != 1<<30 {
		t.Errorf("memory of a destroyed pool not returned: free %d", free)
	}
	ok(t, g.StreamDestroy(s))
	noLeaks(t, g)
}

func TestUnsupportedFeatures(t *testing.T) {
	g := newSim(t, sim.Config{Devices: []sim.DeviceConfig{{NoVMM: true, NoManaged: true, NoPools: true}}})
	s, _ := g.StreamCreate(0, 0, 0)
	checks := map[string]error{}
	_, checks["MemGranularity"] = g.MemGranularity(0, false)
	_, checks["MemCreate"] = g.MemCreate(0, 2<<20)
	_, checks["MemAddressReserve"] = g.MemAddressReserve(2<<20, 0)
	_, checks["MallocManaged"] = g.MallocManaged(0, 1)
	_, checks["DefaultMemPool"] = g.DefaultMemPool(0)
	_, checks["MemPoolCreate"] = g.MemPoolCreate(gpumem.PoolProps{})
	_, checks["MallocAsync"] = g.MallocAsync(1, s)
	for name, err := range checks {
		if !errors.Is(err, gpumem.ErrNotSupported) || code(err) != 801 {
			t.Errorf("%s: %v, want CUDA_ERROR_NOT_SUPPORTED", name, err)
		}
	}
	for _, a := range []gpumem.Attribute{gpumem.AttrVirtualMemoryManagement, gpumem.AttrManagedMemory, gpumem.AttrMemoryPoolsSupported} {
		if v, err := g.DeviceAttribute(0, a); err != nil || v != 0 {
			t.Errorf("%v = %d, %v; want 0", a, v, err)
		}
	}
	ok(t, g.StreamDestroy(s))
	noLeaks(t, g)
}

func TestDeviceAttributes(t *testing.T) {
	g := sim.NewDefault()
	want := map[gpumem.Attribute]int{gpumem.AttrComputeCapabilityMajor: 9, gpumem.AttrComputeCapabilityMinor: 0,
		gpumem.AttrMultiprocessorCount: 132, gpumem.AttrUnifiedAddressing: 1, gpumem.AttrVirtualMemoryManagement: 1,
		gpumem.AttrMemoryPoolsSupported: 1, gpumem.AttrManagedMemory: 1, gpumem.AttrConcurrentManagedAccess: 1}
	for a, v := range want {
		if got, err := g.DeviceAttribute(0, a); err != nil || got != v {
			t.Errorf("%v = %d, %v; want %d", a, got, err, v)
		}
	}
	for _, a := range gpumem.Attributes() {
		if _, err := g.DeviceAttribute(0, a); err != nil {
			t.Errorf("%v: %v", a, err)
		}
	}
	if name, _ := g.DeviceName(0); name != sim.DefaultName {
		t.Errorf("name %q", name)
	}
}

func TestManagedResidency(t *testing.T) {
	g := newSim(t, sim.Config{Devices: []sim.DeviceConfig{{Capacity: 8 << 20}, {Capacity: 64 << 20}}})
	s, _ := g.StreamCreate(1, gpumem.StreamNonBlocking, 0)
	const n = 6 << 20 // three 2 MiB pages
	p, err := g.MallocManaged(0, n)
	ok(t, err)
	if r := g.Residency(p, n); len(r) != 0 {
		t.Errorf("untouched managed memory is resident: %v", r)
	}
	hb, err := g.HostBytes(p, 100)
	ok(t, err)
	hb[0] = 42
	host := gpumem.HostLocation()
	if r := g.Residency(p, n); r[host] != 2<<20 {
		t.Errorf("after a host touch of the first page: %v", r)
	}
	ok(t, g.Prefetch(p, n, gpumem.DeviceLocation(1), s))
	ok(t, g.StreamSynchronize(s))
	if r := g.Residency(p, n); r[gpumem.DeviceLocation(1)] != n {
		t.Errorf("after prefetching to device 1: %v", r)
	}
	if m := g.Migrated(); m.HostToDevice != 2<<20 {
		t.Errorf("migrated %+v, want one page host to device", m)
	}
	loc, err := g.RangeLocation(p, n, gpumem.RangeLastPrefetchLocation)
	ok(t, err)
	if loc != gpumem.DeviceLocation(1) {
		t.Errorf("last prefetch location %v", loc)
	}
	// A kernel on device 0 faults the pages it touches there.
	s0, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	ok(t, g.Launch(s0, p, 10, func(mem []byte) {
		if mem[0] != 42 {
			panic("managed data lost in migration")
		}
		mem[1] = 43
	}))
	ok(t, g.StreamSynchronize(s0))
	r := g.Residency(p, n)
	if r[gpumem.DeviceLocation(0)] != 2<<20 || r[gpumem.DeviceLocation(1)] != 4<<20 {
		t.Errorf("after a kernel on device 0: %v", r)
	}
	if m := g.Migrated(); m.DeviceToDevice != 2<<20 || m.Faults != 1 {
		t.Errorf("migrated %+v, want one faulted page device to device", m)
	}
	// Device 0 (8 MiB) fills up: Malloc evicts the managed page.
	q, err := g.Malloc(0, 8<<20)
	ok(t, err)
	if r := g.Residency(p, n); r[gpumem.DeviceLocation(0)] != 0 {
		t.Errorf("managed page not evicted by Malloc: %v", r)
	}
	ok(t, g.Advise(p, 2<<20, gpumem.AdviseSetPreferredLocation, gpumem.DeviceLocation(1)))
	loc, _ = g.RangeLocation(p, n, gpumem.RangePreferredLocation)
	if loc.Kind != gpumem.LocationInvalid {
		t.Errorf("mixed preferred locations read as %v", loc)
	}
	loc, _ = g.RangeLocation(p, 2<<20, gpumem.RangePreferredLocation)
	if loc != gpumem.DeviceLocation(1) {
		t.Errorf("preferred location %v", loc)
	}
	if err := g.Advise(p, n, gpumem.AdviseSetCoarseGrain, host); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Errorf("coarse-grain advice: %v", err)
	}
	got := make([]byte, 2)
	ok(t, g.CopyFromDevice(got, p))
	if got[0] != 42 || got[1] != 43 {
		t.Errorf("managed data %v", got)
	}
	ok(t, g.Free(0, q))
	ok(t, g.Free(0, p))
	ok(t, g.StreamDestroy(s))
	ok(t, g.StreamDestroy(s0))
	noLeaks(t, g)
}

func TestHostBytes(t *testing.T) {
	g := sim.NewDefault()
	h, err := g.MallocHost(1000)
	ok(t, err)
	b, err := g.HostBytes(h.Add(10), 20)
	ok(t, err)
	copy(b, "pinned host memory!!")
	got := make([]byte, 20)
	ok(t, g.CopyFromDevice(got, h.Add(10)))
	if string(got) != "pinned host memory!!" {
		t.Errorf("read %q", got)
	}
	d, _ := g.Malloc(0, 100)
	if _, err := g.HostBytes(d, 10); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("HostBytes of device memory: %v", err)
	}
	if _, err := g.HostBytes(h, 2000); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("HostBytes past the end: %v", err)
	}
	ok(t, g.Free(0, d))
	ok(t, g.FreeHost(h))
	noLeaks(t, g)
}

func TestPeers(t *testing.T) {
	g := newSim(t, sim.Config{Devices: make([]sim.DeviceConfig, 3), Peer: func(a, b int) bool { return a+b != 3 }})
	if can, _ := g.CanAccessPeer(0, 1); !can {
		t.Error("0 and 1 should be peers")
	}
	if can, _ := g.CanAccessPeer(1, 2); can {
		t.Error("1 and 2 should not be peers")
	}
	if err := g.EnablePeerAccess(1, 2); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Errorf("EnablePeerAccess between non-peers: %v", err)
	}
	s, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	a, _ := g.Malloc(1, 4096)
	b, _ := g.Malloc(2, 4096)
	if err := g.MemcpyPeerAsync(b, 2, a, 1, 4096, s); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Errorf("MemcpyPeerAsync between non-peers: %v", err)
	}
	if err := g.Launch(s, a, 16, func([]byte) {}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("kernel on a peer's memory without peer access: %v", err)
	}
	ok(t, g.EnablePeerAccess(0, 1))
	ok(t, g.EnablePeerAccess(0, 1))
	ok(t, g.Launch(s, a, 16, func(m []byte) { m[0] = 1 }))
	ok(t, g.DisablePeerAccess(0, 1))
	if err := g.DisablePeerAccess(0, 1); !errors.Is(err, gpumem.ErrInvalidValue) || code(err) != 705 {
		t.Errorf("disabling twice: %v", err)
	}
	pool, _ := g.DefaultMemPool(1)
	if err := g.MemPoolSetAccess(pool, 2, gpumem.AccessReadWrite); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Errorf("pool access for a non-peer: %v", err)
	}
	ok(t, g.StreamSynchronize(s))
	ok(t, g.StreamDestroy(s))
	ok(t, g.Free(1, a))
	ok(t, g.Free(2, b))
	noLeaks(t, g)
}

func TestOpenRegistered(t *testing.T) {
	t.Setenv("GPUMEM_SIM_DEVICES", "3")
	b, err := gpumem.Open(gpumem.Options{Backend: "sim"})
	ok(t, err)
	if n, _ := b.DeviceCount(); n != 3 || b.Name() != "sim" || b.Library() != "" {
		t.Errorf("opened %s with %d devices", b.Name(), n)
	}
	t.Setenv("GPUMEM_SIM_DEVICES", "zero")
	if _, err := gpumem.Open(gpumem.Options{Backend: "sim"}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("bad GPUMEM_SIM_DEVICES: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, dc := range []sim.DeviceConfig{{Granularity: 3 << 20}, {Granularity: 4096}, {ManagedPageSize: 1000}, {Capacity: 1 << 50}} {
		if _, err := sim.New(sim.Config{Devices: []sim.DeviceConfig{dc}}); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("New(%+v): %v", dc, err)
		}
	}
}

// Many goroutines allocate, copy and free on their own streams at once.
func TestConcurrentUse(t *testing.T) {
	for _, manual := range []bool{false, true} {
		t.Run(fmt.Sprint("manual=", manual), func(t *testing.T) {
			g := newSim(t, sim.Config{Manual: manual, Devices: make([]sim.DeviceConfig, 2)})
			var wg sync.WaitGroup
			for w := 0; w < 8; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					dev := w % 2
					s, err := g.StreamCreate(dev, gpumem.StreamFlags(w%2), 0)
					if err != nil {
						t.Error(err)
						return
					}
					for i := 0; i < 50; i++ {
						p, err := g.MallocAsync(uint64(1+i*100), s)
						if err != nil {
							t.Error(err)
							return
						}
						q, err := g.Malloc(dev, 4096)
						if err != nil {
							t.Error(err)
							return
						}
						want := []byte{byte(w), byte(i)}
						if err := g.CopyToDevice(q, want); err != nil {
							t.Error(err)
						}
						if err := g.MemcpyAsync(p, q, 1, s); err != nil {
							t.Error(err)
						}
						if err := g.LaunchHostFunc(s, func() {}); err != nil {
							t.Error(err)
						}
						if err := g.FreeAsync(p, s); err != nil {
							t.Error(err)
						}
						if err := g.StreamSynchronize(s); err != nil {
							t.Error(err)
						}
						got := make([]byte, 2)
						if err := g.CopyFromDevice(got, q); err != nil || !bytes.Equal(got, want) {
							t.Errorf("read %v, %v; want %v", got, err, want)
						}
						if err := g.Free(dev, q); err != nil {
							t.Error(err)
						}
					}
					if err := g.StreamDestroy(s); err != nil {
						t.Error(err)
					}
				}(w)
			}
			wg.Wait()
			ok(t, g.Drain())
			noLeaks(t, g)
		})
	}
}

// A caching allocator reusing a block on the same stream is safe; another
// stream's work on the old block that runs after the reuse is not.
func TestUntagAsyncStreamOrder(t *testing.T) {
	g := newSim(t, sim.Config{Manual: true})
	s1, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	s2, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	seg, _ := g.Malloc(0, 1<<20)
	ok(t, g.Tag(seg, 4096, 1))
	ok(t, g.Launch(s1, seg, 4096, func(m []byte) { m[0] = 1 }))
	ok(t, g.UntagAsync(seg, s1))
	ok(t, g.Tag(seg, 4096, 2)) // reused on s1 at once
	ok(t, g.Launch(s1, seg, 4096, func(m []byte) { m[0] = 2 }))
	ok(t, g.Drain())
	if v := g.Violations(); len(v) != 0 {
		t.Fatalf("same-stream reuse reported: %v", v)
	}
	ok(t, g.Launch(s2, seg, 4096, func(m []byte) { m[0] = 3 })) // owner 2's block on s2
	ok(t, g.UntagAsync(seg, s1))                                // but freed on s1 without ordering
	if !g.Step(s1) {
		t.Fatal("untag did not run")
	}
	ok(t, g.Drain())
	if v := g.Violations(); len(v) != 1 || v[0].Stream != s2 {
		t.Fatalf("violations %v, want s2's kernel", v)
	}
	ok(t, g.StreamDestroy(s1))
	ok(t, g.StreamDestroy(s2))
	ok(t, g.Free(0, seg))
}

func TestHugeRequests(t *testing.T) {
	g := sim.NewDefault()
	for name, err := range map[string]error{
		"MallocHost":    func() error { _, err := g.MallocHost(1 << 55); return err }(),
		"MallocManaged": func() error { _, err := g.MallocManaged(0, 1<<55); return err }(),
		"Malloc":        func() error { _, err := g.Malloc(0, ^uint64(0)); return err }(),
		"MallocAsync":   func() error { _, err := g.MallocAsync(^uint64(0)-100, gpumem.Stream{}); return err }(),
	} {
		if !errors.Is(err, gpumem.ErrOutOfMemory) {
			t.Errorf("%s of a huge size: %v", name, err)
		}
	}
	p, err := g.MallocManaged(0, 4096)
	ok(t, err)
	if r := g.Residency(p.Add(100), ^uint64(0)); len(r) != 0 {
		t.Errorf("residency %v", r)
	}
	if err := g.Launch(gpumem.Stream{}, p, ^uint64(0), func([]byte) {}); err == nil {
		t.Error("a kernel over the whole address space was accepted")
	}
	if err := g.MemcpyAsync(p, p.Add(8), ^uint64(0)-4, gpumem.Stream{}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("copy of a huge size: %v", err)
	}
	if _, err := sim.New(sim.Config{Devices: make([]sim.DeviceConfig, sim.MaxDevices+1)}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("too many devices: %v", err)
	}
	ok(t, g.Free(0, p))
	noLeaks(t, g)
}
