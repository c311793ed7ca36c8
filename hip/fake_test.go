package hip

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/native"
	"github.com/gpumem/gpumem/internal/symtab"
)

// A fake libamdhip64 behind the loader seam, behaving as clr does where the
// backend must work around it: hipMemUnmap releases only the mapping at the
// start address; hipMemAddressReserve answers a size misaligned for device
// 0 with out of memory; hipUserObjectRelease runs the destructor inside the
// call.

type fakeLib struct{ syms map[string]uintptr }

func (f *fakeLib) Path() string { return "fake-libamdhip64.so" }
func (f *fakeLib) Sym(name string) (uintptr, error) {
	if a, ok := f.syms[name]; ok {
		return a, nil
	}
	return 0, fmt.Errorf("fake: undefined symbol %s: %w", name, gpumem.ErrNotSupported)
}
func (f *fakeLib) Close() error { return nil }

func put[T any](addr uintptr, v T) {
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	*(*T)(p) = v
}

func get[T any](addr uintptr) T {
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return *(*T)(p)
}

// fake is the state of the fake runtime (one per process: its functions are
// C callbacks, of which a process may make only so many).
var fake struct {
	once    sync.Once
	fns     map[string]uintptr
	mu      sync.Mutex
	version int32
	gran    [2]uint64          // minimum granularity per device
	attrs   map[[2]int32]int32 // (attribute, device) -> value
	mapped  map[uintptr]uintptr
	current atomic.Int32
	poolSet map[[2]uintptr]uint64 // (pool, attribute) -> value
	inCall  atomic.Bool           // inside hipUserObjectRelease
}

func fakeFunctions() map[string]uintptr {
	fake.once.Do(func() {
		cb := purego.NewCallback
		ok := cb(func(a1, a2, a3, a4, a5, a6 uintptr) uintptr { return 0 })
		var destroy, destroyArg uintptr
		fake.fns = map[string]uintptr{
			"hipInit":              cb(func(uintptr) uintptr { return 0 }),
			"hipGetDeviceCount":    cb(func(p uintptr) uintptr { put[int32](p, 2); return 0 }),
			"hipRuntimeGetVersion": cb(func(p uintptr) uintptr { put(p, fake.version); return 0 }),
			"hipDriverGetVersion":  cb(func(p uintptr) uintptr { put(p, fake.version); return 0 }),
			"hipSetDevice":         cb(func(d uintptr) uintptr { fake.current.Store(int32(d)); return 0 }),
			"hipDeviceGetAttribute": cb(func(p, attr, dev uintptr) uintptr {
				fake.mu.Lock()
				defer fake.mu.Unlock()
				put(p, fake.attrs[[2]int32{int32(attr), int32(dev)}])
				return 0
			}),
			"hipMemGetAllocationGranularity": cb(func(p, prop, opt uintptr) uintptr {
				// the CUDA-like layout: location.id at 12
				put(p, fake.gran[get[int32](prop+12)])
				return 0
			}),
			"hipMemAddressReserve": cb(func(p, size, align, addr, flags uintptr) uintptr {
				if uint64(size)%fake.gran[0] != 0 {
					return 2 // hipErrorOutOfMemory, as clr 6.2 says
				}
				put[uintptr](p, 0x7f0000000000)
				return 0
			}),
			"hipMemMap": cb(func(p, size, off, h, flags uintptr) uintptr {
				fake.mu.Lock()
				defer fake.mu.Unlock()
				fake.mapped[p] = size
				return 0
			}),
			"hipMemUnmap": cb(func(p, size uintptr) uintptr {
				fake.mu.Lock()
				defer fake.mu.Unlock()
				if _, ok := fake.mapped[p]; !ok {
					return 1
				}
				delete(fake.mapped, p) // only the mapping at p, whatever size says
				return 0
			}),
			// clr answers an allocation of 0 bytes with success and NULL.
			"hipMalloc":                  cb(func(p, size uintptr) uintptr { return fakeAlloc(p, size) }),
			"hipHostMalloc":              cb(func(p, size, flags uintptr) uintptr { return fakeAlloc(p, size) }),
			"hipMallocManaged":           cb(func(p, size, flags uintptr) uintptr { return fakeAlloc(p, size) }),
			"hipMallocAsync":             cb(func(p, size, s uintptr) uintptr { return fakeAlloc(p, size) }),
			"hipMallocFromPoolAsync":     cb(func(p, size, pool, s uintptr) uintptr { return fakeAlloc(p, size) }),
			"hipDeviceGetDefaultMemPool": cb(func(p, dev uintptr) uintptr { put(p, 0x900+dev); return 0 }),
			"hipMemPoolSetAttribute": cb(func(pool, attr, v uintptr) uintptr {
				fake.mu.Lock()
				defer fake.mu.Unlock()
				fake.poolSet[[2]uintptr{pool, attr}] = get[uint64](v)
				return 0
			}),
			"hipUserObjectCreate": cb(func(p, arg, fn, count, flags uintptr) uintptr {
				destroy, destroyArg = fn, arg
				put[uintptr](p, 0x500)
				return 0
			}),
			"hipUserObjectRelease": cb(func(o, count uintptr) uintptr {
				fake.inCall.Store(true)
				purego.SyscallN(destroy, destroyArg)
				fake.inCall.Store(false)
				return 0
			}),
		}
		for _, r := range symtab.Driver.Rows {
			if s := r.Symbol[symtab.HIP]; s != "" {
				if _, done := fake.fns[s]; !done {
					fake.fns[s] = ok
				}
			}
		}
	})
	return fake.fns
}

// fakeAlloc is the fake's allocations: NULL for 0 bytes, as clr answers,
// else an address of its own.
func fakeAlloc(p, size uintptr) uintptr {
	if size == 0 {
		put[uintptr](p, 0)
		return 0
	}
	put[uintptr](p, 0x7e0000000000)
	return 0
}

// openFake opens the backend over the fake runtime of version v, whose two
// devices have the given attributes and minimum granularities.
func openFake(t *testing.T, v int32, attrs map[[2]int32]int32, gran [2]uint64) *native.Backend {
	t.Helper()
	fns := fakeFunctions()
	fake.mu.Lock()
	fake.version, fake.attrs, fake.gran = v, attrs, gran
	fake.mapped, fake.poolSet = map[uintptr]uintptr{}, map[[2]uintptr]uint64{}
	fake.mu.Unlock()
	b, err := open(func(...string) (native.Library, error) { return &fakeLib{syms: fns}, nil }, "")
	if err != nil {
		t.Fatal(err)
	}
	return b.(*native.Backend)
}

// TestUnmapGrownSegment: a range holding several mappings is unmapped
// mapping by mapping, so that none stays mapped (clr's hipMemUnmap releases
// only the one at the start address).
func TestUnmapGrownSegment(t *testing.T) {
	b := openFake(t, 60200000, nil, [2]uint64{2 << 20, 2 << 20})
	base := gpumem.Ptr(0x7f0000000000)
	for i, n := range []uint64{2 << 20, 4 << 20, 2 << 20} {
		off := []uint64{0, 2 << 20, 6 << 20}[i]
		if err := b.MemMap(base+gpumem.Ptr(off), n, 0, gpumem.MemHandle{Handle: uint64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.MemUnmap(base, 8<<20); err != nil {
		t.Fatal(err)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.mapped) != 0 {
		t.Errorf("after unmapping the whole range, %d mappings are left: %v", len(fake.mapped), fake.mapped)
	}
}

// TestUnmapPartOfAMapping: a range that ends inside a mapping, or leaves a
// gap, is refused and unmaps nothing (the last mapping was unmapped whole,
// memory past the range included).
func TestUnmapPartOfAMapping(t *testing.T) {
	b := openFake(t, 60200000, nil, [2]uint64{2 << 20, 2 << 20})
	base := gpumem.Ptr(0x7f0000000000)
	if err := b.MemMap(base, 2<<20, 0, gpumem.MemHandle{Handle: 1}); err != nil {
		t.Fatal(err)
	}
	if err := b.MemMap(base+2<<20, 4<<20, 0, gpumem.MemHandle{Handle: 2}); err != nil {
		t.Fatal(err)
	}
	if err := b.MemUnmap(base, 4<<20); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("unmapping 4 MiB of 2 + 4 MiB of mappings: %v, want ErrInvalidValue", err)
	}
	fake.mu.Lock()
	left := len(fake.mapped)
	fake.mu.Unlock()
	if left != 2 {
		t.Errorf("a refused unmap left %d mappings, want both", left)
	}
	if err := b.MemUnmap(base, 6<<20); err != nil {
		t.Fatal(err)
	}
}

// TestUnmapPartOfOneMapping: a range that holds a single mapping but not
// exactly (the mapping runs past its end, or the range past the mapping's)
// is refused and unmaps nothing: clr's hipMemUnmap would release the whole
// mapping at the address, memory the caller did not name.
func TestUnmapPartOfOneMapping(t *testing.T) {
	b := openFake(t, 60200000, nil, [2]uint64{2 << 20, 2 << 20})
	base := gpumem.Ptr(0x7f0000000000)
	if err := b.MemMap(base, 4<<20, 0, gpumem.MemHandle{Handle: 1}); err != nil {
		t.Fatal(err)
	}
	mapped := func() int {
		fake.mu.Lock()
		defer fake.mu.Unlock()
		return len(fake.mapped)
	}
	if err := b.MemUnmap(base, 2<<20); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("unmapping 2 MiB of a 4 MiB mapping: %v, want ErrInvalidValue", err)
	}
	if mapped() != 1 {
		t.Fatal("a refused partial unmap unmapped the whole mapping")
	}
	if err := b.MemUnmap(base, 8<<20); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("unmapping 8 MiB over a 4 MiB mapping: %v, want ErrInvalidValue", err)
	}
	if mapped() != 1 {
		t.Fatal("a refused unmap past the mapping unmapped it")
	}
	if err := b.MemUnmap(base, 4<<20); err != nil {
		t.Fatal(err)
	}
	if mapped() != 0 {
		t.Error("the exact unmap left the mapping")
	}
}

// TestZeroSizeAllocationsRefused: an allocation of 0 bytes is refused with
// ErrInvalidValue, as on CUDA, not answered with the NULL pointer and no
// error that clr gives (zero is never a valid allocation).
func TestZeroSizeAllocationsRefused(t *testing.T) {
	b := openFake(t, 60200000, nil, [2]uint64{})
	s := gpumem.Stream{Device: 1, Handle: 0x5}
	pool := gpumem.MemPool{Device: 1, Handle: 0x901}
	for name, alloc := range map[string]func(uint64) (gpumem.Ptr, error){
		"Malloc":              func(n uint64) (gpumem.Ptr, error) { return b.Malloc(1, n) },
		"MallocHost":          b.MallocHost,
		"MallocManaged":       func(n uint64) (gpumem.Ptr, error) { return b.MallocManaged(1, n) },
		"MallocAsync":         func(n uint64) (gpumem.Ptr, error) { return b.MallocAsync(n, s) },
		"MallocFromPoolAsync": func(n uint64) (gpumem.Ptr, error) { return b.MallocFromPoolAsync(n, pool, s) },
		"MallocFromPoolAsyncUncaptured": func(n uint64) (gpumem.Ptr, error) {
			p, _, err := b.MallocFromPoolAsyncUncaptured(n, pool, s)
			return p, err
		},
	} {
		p, err := alloc(0)
		if !errors.Is(err, gpumem.ErrInvalidValue) || p != 0 {
			t.Errorf("%s of 0 bytes = %#x, %v; want ErrInvalidValue", name, p, err)
		}
		// The vendor's invalid-value status, as CUDA and the simulator
		// answer it: a caller reading the code sees one answer.
		if ge := (*gpumem.Error)(nil); !errors.As(err, &ge) || ge.Code != 1 || ge.Backend != "hip" {
			t.Errorf("%s of 0 bytes: %v, want a hip status of code 1 (hipErrorInvalidValue)", name, err)
		}
		if p, err := alloc(512); err != nil || p == 0 {
			t.Errorf("%s of 512 bytes = %#x, %v", name, p, err)
		}
	}
	b.Close()
	if _, err := b.Malloc(0, 0); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("Malloc of 0 bytes after Close: %v, want ErrClosed", err)
	}
}

// TestReserveMixedGranularity: a size aligned for device 1 but not for
// device 0 is reserved (rounded up), not refused as out of memory.
func TestReserveMixedGranularity(t *testing.T) {
	b := openFake(t, 60200000, nil, [2]uint64{4 << 20, 2 << 20})
	p, err := b.MemAddressReserve(6<<20, 2<<20)
	if err != nil {
		t.Fatalf("reserving 6 MiB with granularities 4 MiB and 2 MiB: %v", err)
	}
	if err := b.MemAddressFree(p, 6<<20); err != nil {
		t.Fatal(err)
	}
}

// TestManagedMigrationFollowsXNACK: with XNACK off (pageable memory access
// 0) managed pages do not migrate, whatever concurrent managed access says.
func TestManagedMigrationFollowsXNACK(t *testing.T) {
	const cma, pageable = 9, 65
	b := openFake(t, 60200000, map[[2]int32]int32{{cma, 0}: 1, {cma, 1}: 1, {pageable, 1}: 1}, [2]uint64{})
	for dev, want := range []bool{false, true} {
		got, err := b.ManagedPagesMigrate(dev)
		if err != nil || got != want {
			t.Errorf("device %d: ManagedPagesMigrate = %v, %v; want %v", dev, got, err, want)
		}
	}
}

// TestVMMAttributeFrom53: the virtual-memory-management attribute (89) is
// asked of 5.3 and later, and not supported on 5.2.
func TestVMMAttributeFrom53(t *testing.T) {
	b := openFake(t, 50300000, map[[2]int32]int32{{89, 0}: 1}, [2]uint64{})
	if v, err := b.DeviceAttribute(0, gpumem.AttrVirtualMemoryManagement); err != nil || v != 1 {
		t.Errorf("HIP 5.3: VMM attribute = %d, %v; want 1", v, err)
	}
	b = openFake(t, 50200000, nil, [2]uint64{})
	if _, err := b.DeviceAttribute(0, gpumem.AttrVirtualMemoryManagement); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Errorf("HIP 5.2: VMM attribute error %v, want not supported", err)
	}
}

// TestPoolReleaseThresholdOnGfx11: the default pool of a gfx11 device gets
// the maximum release threshold; a gfx9 device's is left alone.
func TestPoolReleaseThresholdOnGfx11(t *testing.T) {
	b := openFake(t, 60200000, map[[2]int32]int32{{23, 0}: 11, {23, 1}: 9}, [2]uint64{})
	for dev := 0; dev < 2; dev++ {
		if _, err := b.DefaultMemPool(dev); err != nil {
			t.Fatal(err)
		}
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if v, ok := fake.poolSet[[2]uintptr{0x900, 4}]; !ok || v != ^uint64(0) {
		t.Errorf("gfx11 default pool's release threshold = %d (set %v), want the maximum", v, ok)
	}
	if _, ok := fake.poolSet[[2]uintptr{0x901, 4}]; ok {
		t.Error("gfx9 default pool's release threshold was set")
	}
}

// TestDestructorOutsideRelease: a user object's destructor runs after the
// releasing HIP call returned, so that it may call HIP itself.
func TestDestructorOutsideRelease(t *testing.T) {
	b := openFake(t, 60200000, nil, [2]uint64{})
	inside := make(chan bool, 1)
	// The destructor's goroutine may start before hipUserObjectRelease has
	// returned on the releasing thread (it did under qemu on arm64): it waits
	// for the call to end, which never happens if it runs inside it.
	o, err := b.UserObjectCreate(0, func() {
		for end := time.Now().Add(5 * time.Second); fake.inCall.Load() && time.Now().Before(end); {
			time.Sleep(time.Millisecond)
		}
		inside <- fake.inCall.Load()
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.UserObjectRelease(o, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case in := <-inside:
		if in {
			t.Error("the destructor ran inside hipUserObjectRelease")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the destructor never ran")
	}
}

// TestVirtualMemoryDefault: off before 7.0, on from it.
func TestVirtualMemoryDefault(t *testing.T) {
	for v, want := range map[int32]bool{60443484: false, 70253211: true} {
		b := openFake(t, v, nil, [2]uint64{})
		if got, why := b.VirtualMemoryDefault(); got != want || (!got && why == "") {
			t.Errorf("HIP %d: VirtualMemoryDefault = %v, %q; want %v", v, got, why, want)
		}
	}
}

// TestMapsHandleTwice: HIP maps a physical allocation at one address at a
// time, and says why, so that expandable segments' moves unmap.
func TestMapsHandleTwice(t *testing.T) {
	b := openFake(t, 70253211, nil, [2]uint64{})
	if ok, why := b.MapsHandleTwice(); ok || why == "" {
		t.Errorf("MapsHandleTwice = %v, %q; want false and a reason", ok, why)
	}
}

// TestBackendShortCallsHIP: no HIP row is a short call (none measured).
func TestBackendShortCallsHIP(t *testing.T) {
	b := openFake(t, 60200000, nil, [2]uint64{2 << 20, 2 << 20})
	defer b.Close()
	if on, has := b.ShortCalls(); has || on {
		t.Errorf("ShortCalls = (on %v, has %v), want (false, false)", on, has)
	}
}
