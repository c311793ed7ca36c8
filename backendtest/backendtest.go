// Package backendtest is the conformance suite that every gpumem.Backend
// passes: the simulator always, the CUDA and HIP backends whenever a device
// is present.
//
// The suite uses only what a real GPU can do, with small memory (well under
// 2 GiB, managed memory under 1 GiB, never oversubscribed), and destroys
// every object it creates. Operations the backend lacks must return an error
// matching gpumem.ErrNotSupported; the suite then skips the rest of that
// subtest and says why, so a missing feature never passes silently.
//
// A backend's test runs it with a function that opens a fresh instance:
//
//	func TestConformance(t *testing.T) {
//		backendtest.Run(t, func(t *testing.T) gpumem.Backend {
//			b, err := mybackend.Open("")
//			if err != nil {
//				t.Skipf("no device: %v", err)
//			}
//			t.Cleanup(func() { _ = b.Close() })
//			return b
//		})
//	}
//
// The subtests cover devices and attributes, memory information, device
// and pinned allocation (1 byte to 768 MiB, foreign and double frees, out
// of memory), synchronous and asynchronous copies checked byte for byte,
// memsets, streams and priorities, event waits whose ordering is proven by
// data while the first stream is held by a host function, event timing,
// host functions in order, the default and a created pool (attributes,
// release threshold, high-water marks, trim, access), graph capture (status,
// replay twice, host nodes, user-object destructors, illegal calls, memory
// nodes, the thread a capture ends on), the virtual memory API, managed
// memory (advice, prefetch both ways, range attributes), peer access with
// two devices, and Close.
package backendtest

import (
	"bytes"
	"errors"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gpumem/gpumem"
)

// Run runs the suite. open is called once per subtest and returns a fresh
// backend (or one the caller shares); the suite closes it only in the
// subtest that checks Close, after which open is not called again.
func Run(t *testing.T, open func(t *testing.T) gpumem.Backend) {
	RunDevice(t, 0, open)
}

// RunDevice runs the suite on device dev of the backends that open returns:
// every allocation, stream, event, pool, graph and managed range of the
// suite is on dev, and the peer subtest pairs dev with the next device
// (dev+1 modulo the count). A backend with no device dev fails the suite.
func RunDevice(t *testing.T, dev int, open func(t *testing.T) gpumem.Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b gpumem.Backend, dev int)
	}{
		{"Devices", testDevices},
		{"Malloc", testMalloc},
		{"MallocErrors", testMallocErrors},
		{"Host", testHost},
		{"Copies", testCopies},
		{"CopiesAsync", testCopiesAsync},
		{"Memset", testMemset},
		{"Streams", testStreams},
		{"StreamWaitEvent", testStreamWaitEvent},
		{"Events", testEvents},
		{"HostFuncOrder", testHostFuncOrder},
		{"DefaultPool", testDefaultPool},
		{"CreatedPool", testCreatedPool},
		{"GraphCapture", testGraphCapture},
		{"GraphCaptureIllegal", testGraphCaptureIllegal},
		{"GraphCaptureThread", testGraphCaptureThread},
		{"GraphMemoryNodes", testGraphMemoryNodes},
		{"VMM", testVMM},
		{"Managed", testManaged},
		{"Peer", testPeer},
		{"Kernels", testKernels},
		{"Close", testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := open(t)
			if n, err := b.DeviceCount(); err == nil && (dev < 0 || dev >= n) {
				t.Fatalf("the suite was asked for device %d of a backend with %d", dev, n)
			}
			tc.fn(t, b, dev)
		})
	}
}

// must fails the test on err.
func must(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// skipIfNotSupported skips the test, saying why, when err says the backend
// lacks the operation; it fails the test on any other error.
func skipIfNotSupported(t *testing.T, err error, what string) {
	t.Helper()
	if err == nil {
		return
	}
	if errors.Is(err, gpumem.ErrNotSupported) {
		t.Skipf("%s is not supported by this backend: %v", what, err)
	}
	t.Fatalf("%s: %v", what, err)
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ seed
	}
	return b
}

func readBack(t *testing.T, b gpumem.Backend, p gpumem.Ptr, n int) []byte {
	t.Helper()
	out := make([]byte, n)
	must(t, b.CopyFromDevice(out, p), "CopyFromDevice")
	return out
}

func expectBytes(t *testing.T, got, want []byte, what string) {
	t.Helper()
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: bytes differ at offset %d (of %d)", what, i, len(want))
	}
}

func malloc(t *testing.T, b gpumem.Backend, dev int, size uint64) gpumem.Ptr {
	t.Helper()
	p, err := b.Malloc(dev, size)
	must(t, err, "Malloc")
	if p == 0 {
		t.Fatalf("Malloc(%d) returned a null pointer", size)
	}
	t.Cleanup(func() {
		if err := b.Free(dev, p); err != nil && !errors.Is(err, gpumem.ErrClosed) {
			t.Errorf("Free: %v", err)
		}
	})
	return p
}

func newStream(t *testing.T, b gpumem.Backend, dev int, flags gpumem.StreamFlags) gpumem.Stream {
	t.Helper()
	s, err := b.StreamCreate(dev, flags, 0)
	must(t, err, "StreamCreate")
	t.Cleanup(func() {
		_ = b.StreamSynchronize(s)
		if err := b.StreamDestroy(s); err != nil && !errors.Is(err, gpumem.ErrClosed) {
			t.Errorf("StreamDestroy: %v", err)
		}
	})
	return s
}

func newEvent(t *testing.T, b gpumem.Backend, dev int, flags gpumem.EventFlags) gpumem.Event {
	t.Helper()
	e, err := b.EventCreate(dev, flags)
	must(t, err, "EventCreate")
	t.Cleanup(func() {
		if err := b.EventDestroy(e); err != nil && !errors.Is(err, gpumem.ErrClosed) {
			t.Errorf("EventDestroy: %v", err)
		}
	})
	return e
}

func testDevices(t *testing.T, b gpumem.Backend, dev int) {
	if b.Name() == "" {
		t.Error("Name is empty")
	}
	v, err := b.Version()
	must(t, err, "Version")
	if v.Driver <= 0 {
		t.Errorf("Version().Driver = %d", v.Driver)
	}
	n, err := b.DeviceCount()
	must(t, err, "DeviceCount")
	if n < 1 {
		t.Fatalf("DeviceCount = %d", n)
	}
	for dev := 0; dev < n; dev++ {
		name, err := b.DeviceName(dev)
		must(t, err, "DeviceName")
		if name == "" {
			t.Errorf("device %d has an empty name", dev)
		}
		for _, a := range gpumem.Attributes() {
			v, err := b.DeviceAttribute(dev, a)
			if err != nil && !errors.Is(err, gpumem.ErrNotSupported) {
				t.Errorf("DeviceAttribute(%d, %v): %v", dev, a, err)
			}
			if err == nil && v < 0 {
				t.Errorf("DeviceAttribute(%d, %v) = %d", dev, a, v)
			}
		}
		major, err := b.DeviceAttribute(dev, gpumem.AttrComputeCapabilityMajor)
		must(t, err, "compute capability")
		if major < 1 {
			t.Errorf("compute capability major %d", major)
		}
		sms, err := b.DeviceAttribute(dev, gpumem.AttrMultiprocessorCount)
		must(t, err, "multiprocessor count")
		if sms < 1 {
			t.Errorf("multiprocessor count %d", sms)
		}
		free, total, err := b.MemInfo(dev)
		must(t, err, "MemInfo")
		if total == 0 || free > total {
			t.Errorf("MemInfo(%d) = free %d, total %d", dev, free, total)
		}
	}
	if _, err := b.DeviceName(n); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("DeviceName(%d) of %d devices: %v, want ErrInvalidValue", n, n, err)
	}
	if _, _, err := b.MemInfo(-1); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("MemInfo(-1): %v, want ErrInvalidValue", err)
	}
	if b.ErrorName(2) == "" {
		t.Error("ErrorName(2) is empty")
	}
	must(t, b.DeviceSynchronize(dev), "DeviceSynchronize")
}

func testMalloc(t *testing.T, b gpumem.Backend, dev int) {
	for _, size := range []uint64{1, 255, 512, 4097, 1 << 20, 3<<20 + 5, 64 << 20, 768 << 20} {
		p, err := b.Malloc(dev, size)
		must(t, err, "Malloc")
		if p == 0 || uint64(p)%256 != 0 {
			t.Errorf("Malloc(%d) = %#x: want a non-null pointer aligned to 256 bytes", size, uint64(p))
		}
		n := int(min(size, 1<<20))
		want := pattern(n, byte(size))
		must(t, b.CopyToDevice(p, want), "CopyToDevice")
		expectBytes(t, readBack(t, b, p, n), want, "read back")
		if size > 1<<20 {
			// The end of the allocation is usable too.
			tail := pattern(4096, 3)
			must(t, b.CopyToDevice(p.Add(size-4096), tail), "CopyToDevice at the end")
			expectBytes(t, readBack(t, b, p.Add(size-4096), 4096), tail, "end read back")
		}
		must(t, b.Free(dev, p), "Free")
	}
	// Many live allocations get distinct addresses.
	seen := map[gpumem.Ptr]bool{}
	var ptrs []gpumem.Ptr
	for i := 0; i < 64; i++ {
		p, err := b.Malloc(dev, 4096)
		must(t, err, "Malloc")
		if seen[p] {
			t.Errorf("address %#x handed out twice", uint64(p))
		}
		seen[p] = true
		ptrs = append(ptrs, p)
	}
	for _, p := range ptrs {
		must(t, b.Free(dev, p), "Free")
	}
}

func testMallocErrors(t *testing.T, b gpumem.Backend, dev int) {
	p, err := b.Malloc(dev, 1<<20)
	must(t, err, "Malloc")
	if err := b.Free(dev, p.Add(4096)); err == nil {
		t.Error("Free of a pointer inside an allocation succeeded")
	}
	must(t, b.Free(dev, p), "Free")
	if err := b.Free(dev, p); err == nil {
		t.Error("double Free succeeded")
	}
	if _, err := b.Malloc(dev, 1<<50); !errors.Is(err, gpumem.ErrOutOfMemory) {
		t.Errorf("Malloc(1 PiB): %v, want ErrOutOfMemory", err)
	}
	var ge *gpumem.Error
	if _, err := b.Malloc(dev, 1<<50); errors.As(err, &ge) && ge.Name == "" {
		t.Errorf("out-of-memory error without a vendor name: %v", err)
	}
	if _, err := b.Malloc(-1, 512); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("Malloc on device -1: %v, want ErrInvalidValue", err)
	}
}

func testHost(t *testing.T, b gpumem.Backend, dev int) {
	h, err := b.MallocHost(1 << 20)
	must(t, err, "MallocHost")
	want := pattern(1<<20, 9)
	must(t, b.CopyToDevice(h, want), "CopyToDevice into pinned memory")
	d := malloc(t, b, dev, 1<<20)
	must(t, b.Memcpy(d, h, 1<<20), "Memcpy host to device")
	expectBytes(t, readBack(t, b, d, 1<<20), want, "device copy of pinned memory")
	must(t, b.FreeHost(h), "FreeHost")
	if err := b.FreeHost(h); err == nil {
		t.Error("double FreeHost succeeded")
	}
}

func testCopies(t *testing.T, b gpumem.Backend, dev int) {
	const n = 3<<20 + 17
	a := malloc(t, b, dev, n)
	c := malloc(t, b, dev, n)
	want := pattern(n, 1)
	must(t, b.CopyToDevice(a, want), "CopyToDevice")
	must(t, b.Memcpy(c, a, n), "Memcpy device to device")
	expectBytes(t, readBack(t, b, c, n), want, "device to device")
	// Offsets inside allocations.
	must(t, b.Memcpy(c.Add(100), a.Add(1000), 5000), "Memcpy at offsets")
	got := readBack(t, b, c, n)
	copy(want[100:5100], pattern(n, 1)[1000:6000])
	expectBytes(t, got, want, "copy at offsets")
	must(t, b.CopyToDevice(a, nil), "empty CopyToDevice")
}

func testCopiesAsync(t *testing.T, b gpumem.Backend, dev int) {
	const n = 2 << 20
	s := newStream(t, b, dev, gpumem.StreamNonBlocking)
	h1, err := b.MallocHost(n)
	must(t, err, "MallocHost")
	defer func() { must(t, b.FreeHost(h1), "FreeHost") }()
	h2, err := b.MallocHost(n)
	must(t, err, "MallocHost")
	defer func() { must(t, b.FreeHost(h2), "FreeHost") }()
	d1 := malloc(t, b, dev, n)
	d2 := malloc(t, b, dev, n)
	want := pattern(n, 5)
	must(t, b.CopyToDevice(h1, want), "fill pinned")
	must(t, b.MemcpyAsync(d1, h1, n, s), "H2D async")
	must(t, b.MemcpyAsync(d2, d1, n, s), "D2D async")
	must(t, b.MemcpyAsync(h2, d2, n, s), "D2H async")
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	expectBytes(t, readBack(t, b, h2, n), want, "async round trip")
	// The default stream too.
	def := gpumem.Stream{Device: dev}
	must(t, b.MemsetAsync(d2, 0, n, def), "MemsetAsync on the default stream")
	must(t, b.MemcpyAsync(d2, d1, n/2, def), "MemcpyAsync on the default stream")
	must(t, b.StreamSynchronize(def), "StreamSynchronize(default)")
	w := append(append([]byte(nil), want[:n/2]...), make([]byte, n/2)...)
	expectBytes(t, readBack(t, b, d2, n), w, "default stream copies")
}

func testMemset(t *testing.T, b gpumem.Backend, dev int) {
	const n = 1<<20 + 3
	p := malloc(t, b, dev, n)
	must(t, b.Memset(p, 0x5a, n), "Memset")
	want := bytes.Repeat([]byte{0x5a}, n)
	expectBytes(t, readBack(t, b, p, n), want, "Memset")
	s := newStream(t, b, dev, gpumem.StreamDefault)
	must(t, b.MemsetAsync(p.Add(10), 0xc3, 1000, s), "MemsetAsync")
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	for i := 10; i < 1010; i++ {
		want[i] = 0xc3
	}
	expectBytes(t, readBack(t, b, p, n), want, "MemsetAsync of a sub-range")
}

func testStreams(t *testing.T, b gpumem.Backend, dev int) {
	least, greatest, err := b.StreamPriorityRange(dev)
	must(t, err, "StreamPriorityRange")
	if greatest > least {
		t.Errorf("priority range least %d greatest %d: greatest must be numerically lower or equal", least, greatest)
	}
	for _, flags := range []gpumem.StreamFlags{gpumem.StreamDefault, gpumem.StreamNonBlocking} {
		for _, prio := range []int{least, greatest} {
			s, err := b.StreamCreate(dev, flags, prio)
			must(t, err, "StreamCreate")
			if s.Device != dev || s.Handle == 0 {
				t.Errorf("StreamCreate = %v", s)
			}
			p := malloc(t, b, dev, 4096)
			must(t, b.MemsetAsync(p, 1, 4096, s), "MemsetAsync")
			must(t, b.StreamSynchronize(s), "StreamSynchronize")
			done, err := b.StreamQuery(s)
			must(t, err, "StreamQuery")
			if !done {
				t.Error("StreamQuery after StreamSynchronize says work is pending")
			}
			must(t, b.StreamDestroy(s), "StreamDestroy")
		}
	}
}

// block queues a host function on s that waits until release is closed (or
// 10 s pass, so that a broken backend cannot hang the suite).
func block(t *testing.T, b gpumem.Backend, s gpumem.Stream, release <-chan struct{}) {
	t.Helper()
	must(t, b.LaunchHostFunc(s, func() {
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
	}), "LaunchHostFunc")
}

func testStreamWaitEvent(t *testing.T, b gpumem.Backend, dev int) {
	const n = 1 << 20
	a := newStream(t, b, dev, gpumem.StreamNonBlocking)
	c := newStream(t, b, dev, gpumem.StreamNonBlocking)
	e := newEvent(t, b, dev, gpumem.EventDisableTiming)
	x := malloc(t, b, dev, n)
	z := malloc(t, b, dev, n)
	must(t, b.Memset(z, 0, n), "Memset")
	release := make(chan struct{})
	block(t, b, a, release)
	must(t, b.MemsetAsync(x, 0x77, n, a), "MemsetAsync on a")
	must(t, b.EventRecord(e, a), "EventRecord")
	must(t, b.StreamWaitEvent(c, e), "StreamWaitEvent")
	must(t, b.MemcpyAsync(z, x, n, c), "MemcpyAsync on c")
	done, err := b.StreamQuery(c)
	must(t, err, "StreamQuery")
	if done {
		t.Error("the waiting stream finished while the stream it waits for is blocked")
	}
	ready, err := b.EventQuery(e)
	must(t, err, "EventQuery")
	if ready {
		t.Error("the event completed while its stream is blocked")
	}
	close(release)
	must(t, b.StreamSynchronize(c), "StreamSynchronize")
	expectBytes(t, readBack(t, b, z, n), bytes.Repeat([]byte{0x77}, n), "data ordered by the event")
}

func testEvents(t *testing.T, b gpumem.Backend, dev int) {
	s := newStream(t, b, dev, gpumem.StreamDefault)
	start := newEvent(t, b, dev, gpumem.EventDefault)
	end := newEvent(t, b, dev, gpumem.EventDefault)
	ready, err := b.EventQuery(start)
	must(t, err, "EventQuery")
	if !ready {
		t.Error("an event never recorded is not complete")
	}
	p := malloc(t, b, dev, 8<<20)
	must(t, b.EventRecord(start, s), "EventRecord")
	must(t, b.MemsetAsync(p, 1, 8<<20, s), "MemsetAsync")
	must(t, b.EventRecord(end, s), "EventRecord")
	must(t, b.EventSynchronize(end), "EventSynchronize")
	ready, err = b.EventQuery(end)
	must(t, err, "EventQuery")
	if !ready {
		t.Error("EventQuery after EventSynchronize is not complete")
	}
	ms, err := b.EventElapsed(start, end)
	must(t, err, "EventElapsed")
	if ms < 0 || math.IsNaN(float64(ms)) {
		t.Errorf("EventElapsed = %v", ms)
	}
	nt := newEvent(t, b, dev, gpumem.EventDisableTiming)
	must(t, b.EventRecord(nt, s), "EventRecord")
	must(t, b.EventSynchronize(nt), "EventSynchronize")
	if _, err := b.EventElapsed(start, nt); err == nil {
		t.Error("EventElapsed with an event without timing succeeded")
	}
}

func testHostFuncOrder(t *testing.T, b gpumem.Backend, dev int) {
	s := newStream(t, b, dev, gpumem.StreamNonBlocking)
	var mu sync.Mutex
	var order []int
	for i := 0; i < 50; i++ {
		must(t, b.LaunchHostFunc(s, func() {
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		}), "LaunchHostFunc")
	}
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 50 {
		t.Fatalf("%d host functions ran, want 50", len(order))
	}
	for i, v := range order {
		if v != i {
			t.Fatalf("host functions ran out of order: %v", order)
		}
	}
}

func poolAttr(t *testing.T, b gpumem.Backend, p gpumem.MemPool, a gpumem.PoolAttribute) uint64 {
	t.Helper()
	v, err := b.MemPoolGetAttribute(p, a)
	must(t, err, "MemPoolGetAttribute "+a.String())
	return v
}

func testDefaultPool(t *testing.T, b gpumem.Backend, dev int) {
	pool, err := b.DefaultMemPool(dev)
	skipIfNotSupported(t, err, "DefaultMemPool")
	old := poolAttr(t, b, pool, gpumem.PoolReleaseThreshold)
	t.Cleanup(func() { _ = b.MemPoolSetAttribute(pool, gpumem.PoolReleaseThreshold, old) })
	must(t, b.MemPoolSetAttribute(pool, gpumem.PoolReleaseThreshold, math.MaxUint64), "set release threshold")
	if v := poolAttr(t, b, pool, gpumem.PoolReleaseThreshold); v != math.MaxUint64 {
		t.Errorf("release threshold reads %d after setting the maximum", v)
	}
	s := newStream(t, b, dev, gpumem.StreamNonBlocking)
	usedBefore := poolAttr(t, b, pool, gpumem.PoolUsedMemCurrent)
	const n = 3 << 20
	p, err := b.MallocAsync(n, s)
	must(t, err, "MallocAsync")
	want := pattern(n, 2)
	h, err := b.MallocHost(n)
	must(t, err, "MallocHost")
	defer func() { must(t, b.FreeHost(h), "FreeHost") }()
	must(t, b.CopyToDevice(h, want), "fill pinned")
	must(t, b.MemcpyAsync(p, h, n, s), "copy into pool memory")
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	expectBytes(t, readBack(t, b, p, n), want, "pool memory")
	used := poolAttr(t, b, pool, gpumem.PoolUsedMemCurrent)
	reserved := poolAttr(t, b, pool, gpumem.PoolReservedMemCurrent)
	if used < usedBefore+n {
		t.Errorf("used memory %d after allocating %d bytes (was %d)", used, n, usedBefore)
	}
	if reserved < used {
		t.Errorf("reserved %d < used %d", reserved, used)
	}
	if hi := poolAttr(t, b, pool, gpumem.PoolUsedMemHigh); hi < used {
		t.Errorf("used high %d < used %d", hi, used)
	}
	must(t, b.FreeAsync(p, s), "FreeAsync")
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	if u := poolAttr(t, b, pool, gpumem.PoolUsedMemCurrent); u != usedBefore {
		t.Errorf("used memory %d after the free, want %d", u, usedBefore)
	}
	if r := poolAttr(t, b, pool, gpumem.PoolReservedMemCurrent); r < n {
		t.Errorf("reserved %d after the free with a maximal release threshold: the pool should keep its memory", r)
	}
	must(t, b.MemPoolSetAttribute(pool, gpumem.PoolUsedMemHigh, 0), "reset used high")
	if hi, u := poolAttr(t, b, pool, gpumem.PoolUsedMemHigh), poolAttr(t, b, pool, gpumem.PoolUsedMemCurrent); hi != u {
		t.Errorf("used high %d after reset, want current %d", hi, u)
	}
	if err := b.MemPoolSetAttribute(pool, gpumem.PoolReservedMemCurrent, 1); err == nil {
		t.Error("setting reserved_mem_current succeeded")
	}
	acc, err := b.MemPoolGetAccess(pool, dev)
	must(t, err, "MemPoolGetAccess")
	if acc != gpumem.AccessReadWrite {
		t.Errorf("the pool's own device has access %d", acc)
	}
}

func testCreatedPool(t *testing.T, b gpumem.Backend, dev int) {
	pool, err := b.MemPoolCreate(gpumem.PoolProps{Device: dev})
	skipIfNotSupported(t, err, "MemPoolCreate")
	defer func() { must(t, b.MemPoolDestroy(pool), "MemPoolDestroy") }()
	if v := poolAttr(t, b, pool, gpumem.PoolReleaseThreshold); v != 0 {
		t.Errorf("a new pool's release threshold is %d, want 0", v)
	}
	s := newStream(t, b, dev, gpumem.StreamNonBlocking)
	const n = 5 << 20
	must(t, b.MemPoolSetAttribute(pool, gpumem.PoolReleaseThreshold, math.MaxUint64), "set threshold")
	p, err := b.MallocFromPoolAsync(n, pool, s)
	must(t, err, "MallocFromPoolAsync")
	q, err := b.MallocFromPoolAsync(4096, pool, s)
	must(t, err, "MallocFromPoolAsync")
	must(t, b.MemsetAsync(p, 0x42, n, s), "MemsetAsync")
	must(t, b.MemcpyAsync(q, p.Add(n-4096), 4096, s), "MemcpyAsync")
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	expectBytes(t, readBack(t, b, q, 4096), bytes.Repeat([]byte{0x42}, 4096), "created pool memory")
	if u := poolAttr(t, b, pool, gpumem.PoolUsedMemCurrent); u < n+4096 {
		t.Errorf("used %d with %d bytes allocated", u, n+4096)
	}
	must(t, b.FreeAsync(p, s), "FreeAsync")
	must(t, b.FreeAsync(q, s), "FreeAsync")
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	if u := poolAttr(t, b, pool, gpumem.PoolUsedMemCurrent); u != 0 {
		t.Errorf("used %d with nothing allocated", u)
	}
	if r := poolAttr(t, b, pool, gpumem.PoolReservedMemCurrent); r == 0 {
		t.Error("the pool released its memory despite a maximal release threshold")
	}
	must(t, b.MemPoolTrimTo(pool, 0), "MemPoolTrimTo")
	if r := poolAttr(t, b, pool, gpumem.PoolReservedMemCurrent); r != 0 {
		t.Errorf("reserved %d after trimming an unused pool to 0", r)
	}
	if hi := poolAttr(t, b, pool, gpumem.PoolReservedMemHigh); hi < n {
		t.Errorf("reserved high %d after reserving %d", hi, n)
	}
	// A release threshold of 0 returns memory at synchronization.
	must(t, b.MemPoolSetAttribute(pool, gpumem.PoolReleaseThreshold, 0), "set threshold 0")
	p, err = b.MallocFromPoolAsync(n, pool, s)
	must(t, err, "MallocFromPoolAsync")
	must(t, b.FreeAsync(p, s), "FreeAsync")
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	if r := poolAttr(t, b, pool, gpumem.PoolReservedMemCurrent); r != 0 {
		t.Errorf("reserved %d after synchronizing with release threshold 0", r)
	}
}

func testGraphCapture(t *testing.T, b gpumem.Backend, dev int) {
	const n = 1 << 20
	s := newStream(t, b, dev, gpumem.StreamNonBlocking)
	x := malloc(t, b, dev, n)
	y := malloc(t, b, dev, n)
	must(t, b.Memset(y, 0, n), "Memset")
	err := b.StreamBeginCapture(s, gpumem.CaptureModeGlobal)
	skipIfNotSupported(t, err, "StreamBeginCapture")
	info, err := b.StreamCaptureInfo(s)
	must(t, err, "StreamCaptureInfo")
	if info.Status != gpumem.CaptureActive || info.ID == 0 {
		t.Errorf("capture info during capture = %+v", info)
	}
	var hostRuns int
	var mu sync.Mutex
	must(t, b.MemsetAsync(x, 0xab, n, s), "captured MemsetAsync")
	must(t, b.MemcpyAsync(y, x, n, s), "captured MemcpyAsync")
	must(t, b.LaunchHostFunc(s, func() { mu.Lock(); hostRuns++; mu.Unlock() }), "captured LaunchHostFunc")
	g, err := b.StreamEndCapture(s)
	must(t, err, "StreamEndCapture")
	info, err = b.StreamCaptureInfo(s)
	must(t, err, "StreamCaptureInfo")
	if info.Status != gpumem.CaptureNone {
		t.Errorf("capture info after the capture = %+v", info)
	}
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	expectBytes(t, readBack(t, b, y, n), make([]byte, n), "captured work must not run before launch")
	mu.Lock()
	if hostRuns != 0 {
		t.Error("a captured host function ran during capture")
	}
	mu.Unlock()

	destroyed := make(chan struct{})
	uo, err := b.UserObjectCreate(dev, func() { close(destroyed) })
	must(t, err, "UserObjectCreate")
	must(t, b.GraphRetainUserObject(g, uo, 1, true), "GraphRetainUserObject")

	ge, err := b.GraphInstantiate(g)
	must(t, err, "GraphInstantiate")
	must(t, b.GraphLaunch(ge, s), "GraphLaunch")
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	want := bytes.Repeat([]byte{0xab}, n)
	expectBytes(t, readBack(t, b, y, n), want, "first launch")
	must(t, b.Memset(y, 0, n), "Memset")
	must(t, b.GraphLaunch(ge, s), "second GraphLaunch")
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	expectBytes(t, readBack(t, b, y, n), want, "second launch")
	mu.Lock()
	if hostRuns != 2 {
		t.Errorf("the captured host function ran %d times in two launches", hostRuns)
	}
	mu.Unlock()
	select {
	case <-destroyed:
		t.Error("the user object was destroyed while its graph lives")
	default:
	}
	must(t, b.GraphExecDestroy(ge), "GraphExecDestroy")
	must(t, b.GraphDestroy(g), "GraphDestroy")
	select {
	case <-destroyed:
	case <-time.After(10 * time.Second):
		t.Error("the user object's destructor did not run after its graph was destroyed")
	}
}

func testGraphCaptureIllegal(t *testing.T, b gpumem.Backend, dev int) {
	s := newStream(t, b, dev, gpumem.StreamNonBlocking)
	err := b.StreamBeginCapture(s, gpumem.CaptureModeGlobal)
	skipIfNotSupported(t, err, "StreamBeginCapture")
	if _, err := b.StreamQuery(s); err == nil {
		t.Error("StreamQuery on a capturing stream succeeded")
	}
	info, err := b.StreamCaptureInfo(s)
	must(t, err, "StreamCaptureInfo")
	if info.Status != gpumem.CaptureInvalidated {
		t.Errorf("capture status after an illegal call = %v, want invalidated", info.Status)
	}
	if _, err := b.StreamEndCapture(s); err == nil {
		t.Error("ending an invalidated capture succeeded")
	}
	info, err = b.StreamCaptureInfo(s)
	must(t, err, "StreamCaptureInfo")
	if info.Status != gpumem.CaptureNone {
		t.Errorf("capture status after ending = %v", info.Status)
	}
	// The legacy default stream cannot be captured.
	if err := b.StreamBeginCapture(gpumem.Stream{Device: dev}, gpumem.CaptureModeRelaxed); err == nil {
		t.Error("capturing the legacy default stream succeeded")
		_, _ = b.StreamEndCapture(gpumem.Stream{Device: dev})
	}
}

// churn keeps the scheduler moving goroutines between OS threads until
// the returned function is called: goroutines that block in system calls
// make the scheduler hand their processors to other threads.
func churn() (stop func()) {
	var done atomic.Bool
	var wg sync.WaitGroup
	for i := 0; i < 2*runtime.GOMAXPROCS(0)+2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts := syscall.Timespec{Nsec: 100_000}
			for !done.Load() {
				_ = syscall.Nanosleep(&ts, nil)
				runtime.Gosched()
			}
		}()
	}
	return func() { done.Store(true); wg.Wait() }
}

// testGraphCaptureThread: a global or thread-local capture must end on the
// OS thread that began it. The goroutine that began it ends it, however
// the scheduler moves goroutines meanwhile; another goroutine (on another
// thread) is refused with WRONG_THREAD (908), and the driver drops the
// capture. A relaxed capture ends anywhere.
func testGraphCaptureThread(t *testing.T, b gpumem.Backend, dev int) {
	s := newStream(t, b, dev, gpumem.StreamNonBlocking)
	err := b.StreamBeginCapture(s, gpumem.CaptureModeRelaxed)
	skipIfNotSupported(t, err, "StreamBeginCapture")
	g, err := b.StreamEndCapture(s)
	must(t, err, "StreamEndCapture")
	must(t, b.GraphDestroy(g), "GraphDestroy")

	stop := churn()
	for i := 0; i < 100; i++ {
		mode := []gpumem.CaptureMode{gpumem.CaptureModeGlobal, gpumem.CaptureModeThreadLocal}[i%2]
		must(t, b.StreamBeginCapture(s, mode), "StreamBeginCapture")
		for j := 0; j < 3; j++ {
			time.Sleep(50 * time.Microsecond)
		}
		g, err := b.StreamEndCapture(s)
		if err != nil {
			stop()
			t.Fatalf("round %d: ending a capture (mode %d) on the goroutine that began it: %v", i, mode, err)
		}
		must(t, b.GraphDestroy(g), "GraphDestroy")
	}
	stop()

	endElsewhere := func() error {
		ch := make(chan error)
		go func() {
			runtime.LockOSThread() // a thread of its own for the rest of its life
			defer runtime.UnlockOSThread()
			g, err := b.StreamEndCapture(s)
			if err == nil {
				err = b.GraphDestroy(g)
			}
			ch <- err
		}()
		return <-ch
	}
	must(t, b.StreamBeginCapture(s, gpumem.CaptureModeGlobal), "StreamBeginCapture")
	err = endElsewhere()
	var ve *gpumem.Error
	if !errors.As(err, &ve) || ve.Code != 908 || !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("ending a global capture from another goroutine: %v; want the vendor's WRONG_THREAD (908)", err)
	}
	// The driver (CUDA 13) drops the capture: no graph, the stream is
	// free; the beginning goroutine's own end fails and frees its thread.
	info, err := b.StreamCaptureInfo(s)
	must(t, err, "StreamCaptureInfo")
	if info.Status != gpumem.CaptureNone {
		t.Errorf("capture status after an end from another thread = %v, want none (dropped)", info.Status)
	}
	if g, err := b.StreamEndCapture(s); err == nil {
		t.Error("ending a dropped capture succeeded")
		_ = b.GraphDestroy(g)
	}
	must(t, b.StreamBeginCapture(s, gpumem.CaptureModeGlobal), "StreamBeginCapture after a dropped capture")
	g, err = b.StreamEndCapture(s)
	must(t, err, "StreamEndCapture")
	must(t, b.GraphDestroy(g), "GraphDestroy")

	must(t, b.StreamBeginCapture(s, gpumem.CaptureModeRelaxed), "StreamBeginCapture")
	must(t, endElsewhere(), "ending a relaxed capture from another goroutine")
}

func testGraphMemoryNodes(t *testing.T, b gpumem.Backend, dev int) {
	if _, err := b.DefaultMemPool(dev); err != nil {
		skipIfNotSupported(t, err, "stream-ordered allocation")
	}
	const n = 1 << 20
	s := newStream(t, b, dev, gpumem.StreamNonBlocking)
	y := malloc(t, b, dev, n)
	must(t, b.Memset(y, 0, n), "Memset")
	err := b.StreamBeginCapture(s, gpumem.CaptureModeThreadLocal)
	skipIfNotSupported(t, err, "StreamBeginCapture")
	p, err := b.MallocAsync(n, s)
	if err != nil {
		_, _ = b.StreamEndCapture(s)
		t.Fatalf("MallocAsync during capture: %v", err)
	}
	must(t, b.MemsetAsync(p, 0x3c, n, s), "MemsetAsync")
	must(t, b.MemcpyAsync(y, p, n, s), "MemcpyAsync")
	must(t, b.FreeAsync(p, s), "FreeAsync during capture")
	g, err := b.StreamEndCapture(s)
	must(t, err, "StreamEndCapture")
	ge, err := b.GraphInstantiate(g)
	must(t, err, "GraphInstantiate")
	for i := 0; i < 2; i++ {
		must(t, b.GraphLaunch(ge, s), "GraphLaunch")
		must(t, b.StreamSynchronize(s), "StreamSynchronize")
		expectBytes(t, readBack(t, b, y, n), bytes.Repeat([]byte{0x3c}, n), "graph memory node data")
		must(t, b.Memset(y, 0, n), "Memset")
	}
	must(t, b.GraphExecDestroy(ge), "GraphExecDestroy")
	must(t, b.GraphDestroy(g), "GraphDestroy")
	must(t, b.DeviceSynchronize(dev), "DeviceSynchronize")
}

func testVMM(t *testing.T, b gpumem.Backend, dev int) {
	gran, err := b.MemGranularity(dev, false)
	skipIfNotSupported(t, err, "MemGranularity")
	if gran == 0 || gran&(gran-1) != 0 {
		t.Fatalf("granularity %d is not a power of two", gran)
	}
	rec, err := b.MemGranularity(dev, true)
	must(t, err, "recommended granularity")
	if rec < gran || rec%gran != 0 {
		t.Errorf("recommended granularity %d vs minimum %d", rec, gran)
	}
	size := 2 * gran
	va, err := b.MemAddressReserve(size, 0)
	must(t, err, "MemAddressReserve")
	h1, err := b.MemCreate(dev, gran)
	must(t, err, "MemCreate")
	h2, err := b.MemCreate(dev, gran)
	must(t, err, "MemCreate")
	if err := b.MemMap(va.Add(gran/2), gran, 0, h1); err == nil {
		t.Error("MemMap at an address not aligned to the granularity succeeded")
		_ = b.MemUnmap(va.Add(gran/2), gran)
	}
	must(t, b.MemMap(va, gran, 0, h1), "MemMap first half")
	must(t, b.MemMap(va.Add(gran), gran, 0, h2), "MemMap second half")
	must(t, b.MemSetAccess(va, size, dev, gpumem.AccessReadWrite), "MemSetAccess")
	// Data across the boundary of two physical allocations.
	want := pattern(8192, 4)
	at := va.Add(gran - 4096)
	must(t, b.CopyToDevice(at, want), "CopyToDevice across mappings")
	expectBytes(t, readBack(t, b, at, 8192), want, "read back across mappings")
	s := newStream(t, b, dev, gpumem.StreamNonBlocking)
	d := malloc(t, b, dev, 8192)
	must(t, b.MemcpyAsync(d, at, 8192, s), "MemcpyAsync from mapped memory")
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	expectBytes(t, readBack(t, b, d, 8192), want, "async copy from mapped memory")
	must(t, b.MemUnmap(va, gran), "MemUnmap first half")
	must(t, b.MemUnmap(va.Add(gran), gran), "MemUnmap second half")
	must(t, b.MemRelease(h1), "MemRelease")
	must(t, b.MemRelease(h2), "MemRelease")
	must(t, b.MemAddressFree(va, size), "MemAddressFree")
	if _, err := b.MemCreate(dev, gran+1); err == nil {
		t.Error("MemCreate of a size that is not a multiple of the granularity succeeded")
	}
}

func testManaged(t *testing.T, b gpumem.Backend, dev int) {
	const n = 4 << 20
	p, err := b.MallocManaged(dev, n)
	skipIfNotSupported(t, err, "MallocManaged")
	defer func() { must(t, b.Free(dev, p), "Free managed") }()
	want := pattern(n, 6)
	must(t, b.CopyToDevice(p, want), "CopyToDevice into managed memory")
	here := gpumem.DeviceLocation(dev)
	if err := b.Advise(p, n, gpumem.AdviseSetPreferredLocation, here); err != nil {
		skipIfNotSupported(t, err, "Advise")
	}
	loc, err := b.RangeLocation(p, n, gpumem.RangePreferredLocation)
	must(t, err, "RangeLocation preferred")
	if loc != here {
		t.Errorf("preferred location %v, want %v", loc, here)
	}
	must(t, b.Advise(p, n, gpumem.AdviseUnsetPreferredLocation, here), "unset preferred location")
	s := newStream(t, b, dev, gpumem.StreamNonBlocking)
	must(t, b.Prefetch(p, n, here, s), "Prefetch to the device")
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	loc, err = b.RangeLocation(p, n, gpumem.RangeLastPrefetchLocation)
	must(t, err, "RangeLocation last prefetch")
	if loc != here {
		t.Errorf("last prefetch location %v, want %v", loc, here)
	}
	must(t, b.Prefetch(p, n, gpumem.HostLocation(), s), "Prefetch to the host")
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	loc, err = b.RangeLocation(p, n, gpumem.RangeLastPrefetchLocation)
	must(t, err, "RangeLocation last prefetch")
	if loc != gpumem.HostLocation() {
		t.Errorf("last prefetch location %v, want host", loc)
	}
	expectBytes(t, readBack(t, b, p, n), want, "managed data after migrations")
	must(t, b.Advise(p, n, gpumem.AdviseSetReadMostly, here), "read-mostly advice")
	must(t, b.Advise(p, n, gpumem.AdviseUnsetReadMostly, here), "unset read-mostly advice")
}

func testPeer(t *testing.T, b gpumem.Backend, dev int) {
	n, err := b.DeviceCount()
	must(t, err, "DeviceCount")
	if n < 2 {
		t.Skipf("peer access needs two devices; the backend has %d", n)
	}
	peer := (dev + 1) % n
	self, err := b.CanAccessPeer(dev, dev)
	must(t, err, "CanAccessPeer of a device and itself")
	if self {
		t.Error("a device reports peer access to itself")
	}
	ok, err := b.CanAccessPeer(dev, peer)
	must(t, err, "CanAccessPeer")
	if !ok {
		if err := b.EnablePeerAccess(dev, peer); err == nil {
			t.Error("EnablePeerAccess succeeded between devices that cannot access each other")
		}
		t.Skipf("devices %d and %d cannot access each other", dev, peer)
	}
	must(t, b.EnablePeerAccess(dev, peer), "EnablePeerAccess")
	must(t, b.EnablePeerAccess(dev, peer), "EnablePeerAccess twice")
	defer func() { must(t, b.DisablePeerAccess(dev, peer), "DisablePeerAccess") }()
	const size = 1 << 20
	a := malloc(t, b, dev, size)
	c := malloc(t, b, peer, size)
	want := pattern(size, 8)
	must(t, b.CopyToDevice(a, want), "CopyToDevice")
	s := newStream(t, b, dev, gpumem.StreamNonBlocking)
	must(t, b.MemcpyPeerAsync(c, peer, a, dev, size, s), "MemcpyPeerAsync")
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	expectBytes(t, readBack(t, b, c, size), want, "peer copy")
	if pool, err := b.DefaultMemPool(dev); err == nil {
		prev, err := b.MemPoolGetAccess(pool, peer)
		must(t, err, "MemPoolGetAccess")
		must(t, b.MemPoolSetAccess(pool, peer, gpumem.AccessReadWrite), "MemPoolSetAccess for the peer")
		got, err := b.MemPoolGetAccess(pool, peer)
		must(t, err, "MemPoolGetAccess")
		if got != gpumem.AccessReadWrite {
			t.Errorf("peer access to the pool reads %d after granting read-write", got)
		}
		must(t, b.MemPoolSetAccess(pool, peer, prev), "restore pool access")
	}
}

func testClose(t *testing.T, b gpumem.Backend, dev int) {
	must(t, b.Close(), "Close")
	if _, err := b.Malloc(dev, 512); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("Malloc after Close: %v, want ErrClosed", err)
	}
	if _, err := b.DeviceCount(); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("DeviceCount after Close: %v, want ErrClosed", err)
	}
	if _, err := b.StreamCreate(dev, 0, 0); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("StreamCreate after Close: %v, want ErrClosed", err)
	}
}
