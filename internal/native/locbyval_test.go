package native

import (
	"os"
	"runtime"
	"testing"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/ccall"
	"github.com/gpumem/gpumem/internal/symtab"
)

// locByValEnv names the shared library built from testdata/locbyval.c for
// the architecture of the test binary (.ci/arm64.sh builds it with the host's
// gcc for amd64 and with aarch64-linux-gnu-gcc for arm64, run under qemu).
const locByValEnv = "GPUMEM_LOCBYVAL_LIB"

// received mirrors struct received in testdata/locbyval.c.
type received struct {
	fn, calls, ctx, dptr, count, advice, locType, locID, flags, stream int64
}

// TestLocationByValueC checks, against C functions with cuMemAdvise_v2's and
// cuMemPrefetchAsync_v2's parameter lists compiled by a C compiler, that the
// CUmemLocation the backend passes by value (CUDA 12.2+, locByVal) arrives
// field by field, with the arguments around it, on this architecture's C ABI:
// the library is opened through internal/dl, its symbols resolved by their
// CUDA names, and the calls made by Backend.Advise and Backend.Prefetch
// through internal/ccall, as with the real driver.
func TestLocationByValueC(t *testing.T) {
	path := os.Getenv(locByValEnv)
	if path == "" {
		t.Skipf("%s is not set: .ci/arm64.sh builds testdata/locbyval.c for amd64 and arm64 and runs this test with it", locByValEnv)
	}
	d := &Dialect{
		Vendor: symtab.CUDA,
		Name:   "cuda",
		Advice: func(a gpumem.Advice) (int32, bool) { return int32(a) + 40, true },
	}
	b, err := Load(d, DL, path)
	if err != nil {
		t.Fatalf("loading %s: %v", path, err)
	}
	if b.Fn(symtab.Advise) == 0 || b.Fn(symtab.Prefetch) == 0 {
		t.Fatalf("%s: cuMemAdvise_v2 or cuMemPrefetchAsync_v2 did not resolve: %v / %v", path, b.missing[symtab.Advise], b.missing[symtab.Prefetch])
	}
	sym := func(name string) uintptr {
		a, err := b.lib.Sym(name)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	setCurrent, receivedFn, layoutFn := sym("locbyval_set_current"), sym("locbyval_received"), sym("locbyval_layout")

	// The C compiler's view of CUmemLocation: {int type; int id;}, 8 bytes.
	var layout [3]int64
	ccall.Call1(layoutFn, uintptr(unsafe.Pointer(&layout)))
	if layout != [3]int64{8, 0, 4} {
		t.Fatalf("CUmemLocation as compiled: size, offsetof(type), offsetof(id) = %v, want [8 0 4]", layout)
	}

	// Contexts and handles with bits set in both halves, so that a field
	// landing in the wrong half or register, or a lost sign, shows.
	ctxs := []uintptr{0x7f00_1234_5678_9a00, 0x7f00_1234_5678_9b00, 0x7f00_1234_5678_9c00}
	handles := []int32{0x11, 0x7eadbeef, -0x2345678}
	b.SetDevices(setCurrent, ctxs, handles)
	b.locByVal = b.fns[symtab.Advise] != 0 && d.Vendor == symtab.CUDA // as Open sets it
	if !b.locByVal {
		t.Fatal("locByVal is false with cuMemAdvise_v2 resolved")
	}

	last := func() received {
		r := new(received)
		ccall.Call1(receivedFn, uintptr(unsafe.Pointer(r)))
		runtime.KeepAlive(r)
		return *r
	}
	const (
		dptr  = 0x7f12_3456_7000
		count = 0x1_0000_0040 // wider than 32 bits
	)
	var calls int64
	check := func(what string, want received) {
		t.Helper()
		calls++
		want.calls = calls
		want.dptr, want.count = dptr, count
		if got := last(); got != want {
			t.Errorf("%s: C received %#x, want %#x", what, got, want)
		}
	}

	advise := func(advice gpumem.Advice, loc gpumem.Location) {
		t.Helper()
		if err := b.Advise(dptr, count, advice, loc); err != nil {
			t.Fatalf("Advise(%v, %v): %v", advice, loc, err)
		}
	}
	advise(gpumem.AdviseSetPreferredLocation, gpumem.DeviceLocation(1))
	check("Advise to device 1", received{fn: 1, ctx: int64(ctxs[1]), advice: int64(gpumem.AdviseSetPreferredLocation) + 40,
		locType: LocationTypeDevice, locID: int64(handles[1])})
	advise(gpumem.AdviseSetAccessedBy, gpumem.DeviceLocation(2))
	check("Advise to device 2 (negative handle)", received{fn: 1, ctx: int64(ctxs[2]), advice: int64(gpumem.AdviseSetAccessedBy) + 40,
		locType: LocationTypeDevice, locID: int64(handles[2])})
	advise(gpumem.AdviseSetPreferredLocation, gpumem.HostLocation())
	check("Advise to the host", received{fn: 1, ctx: int64(ctxs[0]), advice: int64(gpumem.AdviseSetPreferredLocation) + 40,
		locType: LocationTypeHost, locID: 0})
	advise(gpumem.AdviseSetReadMostly, gpumem.Location{})
	check("Advise read-mostly with no location (device 0)", received{fn: 1, ctx: int64(ctxs[0]), advice: int64(gpumem.AdviseSetReadMostly) + 40,
		locType: LocationTypeDevice, locID: int64(handles[0])})

	const stream = 0x5555_6666_7777_8880
	prefetch := func(loc gpumem.Location, s gpumem.Stream) {
		t.Helper()
		if err := b.Prefetch(dptr, count, loc, s); err != nil {
			t.Fatalf("Prefetch(%v, %+v): %v", loc, s, err)
		}
	}
	prefetch(gpumem.DeviceLocation(1), gpumem.Stream{Handle: stream, Device: 1})
	check("Prefetch to device 1", received{fn: 2, ctx: int64(ctxs[1]), locType: LocationTypeDevice, locID: int64(handles[1]), flags: 0, stream: stream})
	prefetch(gpumem.DeviceLocation(2), gpumem.Stream{Handle: stream + 16, Device: 0})
	check("Prefetch to device 2 on device 0's stream", received{fn: 2, ctx: int64(ctxs[0]), locType: LocationTypeDevice, locID: int64(handles[2]), flags: 0, stream: stream + 16})
	prefetch(gpumem.HostLocation(), gpumem.Stream{Handle: 0, Device: 2})
	check("Prefetch to the host on the default stream", received{fn: 2, ctx: int64(ctxs[2]), locType: LocationTypeHost, locID: 0, flags: 0, stream: 0})

	if err := b.Prefetch(dptr, count, gpumem.DeviceLocation(3), gpumem.Stream{}); err == nil {
		t.Error("Prefetch to device 3 of 3: no error")
	}
	if got := last(); got.calls != calls {
		t.Errorf("a refused Prefetch reached C: %+v", got)
	}
}
