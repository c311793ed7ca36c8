// Package fakehip runs the HIP backend over testdata/fakehip.c, a fake HIP runtime on
// host memory built against one ROCm version's hip_runtime_api.h
// (.ci/fakehip.sh builds it once per version and runs these tests with
// GPUMEM_TEST_FAKEHIP set to the library). The fake reads every struct the
// backend passes through that header's types and refuses, loudly, any value
// or layout it does not recognise: the tests fail when a subtest made it do
// so, whatever the subtest itself expected.
//
// It is test scaffolding: the simulator (package sim) stays the project's
// fake GPU, and the conformance suite runs over it everywhere.
package fakehip

import (
	"errors"
	"os"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
	"github.com/gpumem/gpumem/backendtest"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/hip"
	"github.com/gpumem/gpumem/internal/ccall"
	"github.com/gpumem/gpumem/internal/dl"
	"github.com/gpumem/gpumem/rtc"
)

// library returns the fake's path and its loud-failure counter, or skips.
func library(t *testing.T) (string, func() int64) {
	t.Helper()
	lib := os.Getenv("GPUMEM_TEST_FAKEHIP")
	if lib == "" {
		t.Skip("GPUMEM_TEST_FAKEHIP is not set: .ci/fakehip.sh builds the fake HIP runtime per ROCm version and sets it")
	}
	l, err := dl.Open(lib)
	if err != nil {
		t.Fatal(err)
	}
	fn, err := l.Sym("fakehipLoudFailures")
	if err != nil {
		t.Fatal(err)
	}
	return lib, func() int64 { return int64(ccall.Call0(fn)) }
}

// opener opens a fresh backend over the fake per subtest and fails the
// subtest if the fake refused a value or layout during it.
func opener(lib string, loud func() int64) func(t *testing.T) gpumem.Backend {
	return func(t *testing.T) gpumem.Backend {
		before := loud()
		b, err := hip.Open(lib)
		if err != nil {
			t.Fatalf("hip.Open(%s): %v", lib, err)
		}
		t.Cleanup(func() {
			_ = b.Close()
			if n := loud() - before; n != 0 {
				t.Errorf("the fake HIP runtime refused %d value(s) or layout(s) it does not recognise (see its stderr lines \"fakehip: LOUD:\")", n)
			}
		})
		return b
	}
}

func TestVersion(t *testing.T) {
	lib, loud := library(t)
	b := opener(lib, loud)(t)
	v, err := b.Version()
	if err != nil {
		t.Fatal(err)
	}
	if want := os.Getenv("GPUMEM_TEST_FAKEHIP_VERSION"); want != "" && hip.FormatVersion(int(v.Runtime)) != want {
		t.Errorf("the fake reports HIP %s, built against %s headers", hip.FormatVersion(int(v.Runtime)), want)
	}
	t.Logf("fake HIP runtime %s (driver %d)", hip.FormatVersion(int(v.Runtime)), v.Driver)
}

// TestTarget reads the device's gcnArchName through the version's
// hipDeviceProp_t layout (hip/abi.go) and the version's entry point: the
// fake fills it through the header's own struct.
func TestTarget(t *testing.T) {
	lib, loud := library(t)
	b := opener(lib, loud)(t)
	got, err := rtc.TargetOf(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got != "gfx90a:sramecc+:xnack-" {
		t.Fatalf("target %q, want the fake's gcnArchName gfx90a:sramecc+:xnack-", got)
	}
}

// TestWrongLayoutIsCaught makes the fake report a ROCm version whose
// hipMemAllocationProp layout differs from its headers' (5.2's
// compressionType-first form against the CUDA-like one of 5.3 and later):
// the backend then writes the other layout, and the fake must refuse it
// loudly. It proves that the conformance run would catch a layout bug.
func TestWrongLayoutIsCaught(t *testing.T) {
	lib, loud := library(t)
	l, err := dl.Open(lib)
	if err != nil {
		t.Fatal(err)
	}
	fn, err := l.Sym("fakehipReportVersion")
	if err != nil {
		t.Fatal(err)
	}
	headers := int(ccall.Call1(fn, 0))
	lie := hip.ABI53 - 100000 // 5.2.0: the form before ABI53
	if headers < hip.ABI53 {
		lie = hip.ABI70
	}
	ccall.Call1(fn, uintptr(lie))
	defer ccall.Call1(fn, 0)
	b, err := hip.Open(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	before := loud()
	_, err = b.MemGranularity(0, false)
	if n := loud() - before; n == 0 || !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Fatalf("headers %s, backend told %s: MemGranularity = %v with %d loud refusals; want the layout refused", hip.FormatVersion(headers), hip.FormatVersion(lie), err, n)
	}
	t.Logf("headers %s, backend told %s: refused as expected: %v", hip.FormatVersion(headers), hip.FormatVersion(lie), err)
}

func TestConformance(t *testing.T) {
	lib, loud := library(t)
	backendtest.Run(t, opener(lib, loud))
}

// TestConformanceDevice1 runs the suite on the second device (the peer
// subtest pairs it with device 0).
func TestConformanceDevice1(t *testing.T) {
	lib, loud := library(t)
	backendtest.RunDevice(t, 1, opener(lib, loud))
}

// roundTrip allocates a few sizes through alloc on a stream, writes and
// reads each back, and frees them.
func roundTrip(t *testing.T, b gpumem.Backend, s gpumem.Stream, alloc func(uint64, gpumem.Stream) (gpumem.Ptr, error), free func(gpumem.Ptr, gpumem.Stream) error) {
	t.Helper()
	var ptrs []gpumem.Ptr
	for i, size := range []uint64{1, 512, 4097, 1 << 20, 3<<20 + 5, 25 << 20} {
		p, err := alloc(size, s)
		if err != nil {
			t.Fatalf("allocating %d bytes: %v", size, err)
		}
		n := int(min(size, 4096))
		want := make([]byte, n)
		for j := range want {
			want[j] = byte(i*31 + j)
		}
		if err := b.CopyToDevice(p, want); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, n)
		if err := b.CopyFromDevice(got, p); err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("%d bytes: read back differs", size)
		}
		ptrs = append(ptrs, p)
	}
	for _, p := range ptrs {
		if err := free(p, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.StreamSynchronize(s); err != nil {
		t.Fatal(err)
	}
}

func TestAllocators(t *testing.T) {
	lib, loud := library(t)
	open := opener(lib, loud)
	t.Run("caching", func(t *testing.T) {
		b := open(t)
		s, err := b.StreamCreate(0, gpumem.StreamNonBlocking, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer b.StreamDestroy(s)
		a, err := caching.New(b, caching.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second round reuses cached blocks
			roundTrip(t, b, s, a.Allocate, a.Deallocate)
		}
		if err := a.EmptyCache(); err != nil {
			t.Fatal(err)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("caching/expandable", func(t *testing.T) {
		b := open(t)
		s, err := b.StreamCreate(0, gpumem.StreamNonBlocking, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer b.StreamDestroy(s)
		a, err := caching.New(b, caching.Options{ExpandableSegments: true})
		if err != nil {
			t.Fatal(err)
		}
		on, why := a.ExpandableActive()
		t.Logf("expandable segments active: %v %s", on, why)
		for range 2 {
			roundTrip(t, b, s, a.Allocate, a.Deallocate)
		}
		if err := a.EmptyCache(); err != nil {
			t.Fatal(err)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	})
	for _, own := range []bool{false, true} {
		name := "asyncpool/default-pool"
		if own {
			name = "asyncpool/own-pool"
		}
		t.Run(name, func(t *testing.T) {
			b := open(t)
			s, err := b.StreamCreate(0, gpumem.StreamNonBlocking, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer b.StreamDestroy(s)
			o := asyncpool.DefaultOptions()
			o.OwnPool = own
			a, err := asyncpool.New(b, o)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				roundTrip(t, b, s, a.Allocate, a.Deallocate)
			}
			if err := a.EmptyCache(); err != nil {
				t.Fatal(err)
			}
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestPoolMaxSize creates a pool with a maximum size: from 6.2 the backend
// writes hipMemPoolProps.maxSize, which the fake reads through the header's
// field and enforces; before 6.2 the backend must refuse with
// ErrNotSupported (the headers have reserved bytes there).
func TestPoolMaxSize(t *testing.T) {
	lib, loud := library(t)
	b := opener(lib, loud)(t)
	v, err := b.Version()
	if err != nil {
		t.Fatal(err)
	}
	pool, err := b.MemPoolCreate(gpumem.PoolProps{Device: 0, MaxSize: 4 << 20})
	if v.Runtime < hip.ABI62 {
		if !errors.Is(err, gpumem.ErrNotSupported) {
			t.Fatalf("MemPoolCreate with a maximum size on HIP %s: %v, want ErrNotSupported", hip.FormatVersion(int(v.Runtime)), err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer b.MemPoolDestroy(pool)
	s, err := b.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.StreamDestroy(s)
	p, err := b.MallocFromPoolAsync(3<<20, pool, s)
	if err != nil {
		t.Fatal(err)
	}
	defer b.FreeAsync(p, s)
	if q, err := b.MallocFromPoolAsync(3<<20, pool, s); !errors.Is(err, gpumem.ErrOutOfMemory) {
		t.Errorf("6 MiB from a pool of at most 4 MiB: %v, want ErrOutOfMemory (the maximum size did not reach the runtime)", err)
		if err == nil {
			_ = b.FreeAsync(q, s)
		}
	}
}
