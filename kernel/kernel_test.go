package kernel_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/kernel"
)

// recorder is a fake gpumem.Kernels whose LaunchKernel reads the argument
// bytes through the parameter array, as the vendor library does, into
// buffers it owns (so that recording allocates nothing).
type recorder struct {
	gpumem.Kernels // the other methods are not called
	sizes          []int

	mu       sync.Mutex
	launches int
	got      [][]byte
	grid     gpumem.Dim3
	params   gpumem.KernelParams
	fail     error
}

func newRecorder(sizes ...int) *recorder {
	r := &recorder{sizes: sizes}
	for _, n := range sizes {
		r.got = append(r.got, make([]byte, n))
	}
	return r
}

// at converts an address that C would see into a pointer (memory outside
// the Go heap).
func at(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

func (r *recorder) LaunchKernel(f gpumem.Function, grid, block gpumem.Dim3, smem uint32, s gpumem.Stream, p gpumem.KernelParams) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	r.launches++
	r.grid, r.params = grid, p
	for i := 0; i < p.Count && i < len(r.got); i++ {
		argp := *(*uintptr)(at(p.Array + uintptr(i)*8))
		copy(r.got[i], unsafe.Slice((*byte)(at(argp)), r.sizes[i]))
	}
	return nil
}

var fn = gpumem.Function{Device: 0, Handle: 0x1234, Name: "k"}

type pair struct {
	A int32
	_ int32
	B float64
}

func TestArgumentBytes(t *testing.T) {
	rec := newRecorder(8, 4, 8, 1, 2, 4, 8, 1, 2, 4, 16, 8)
	l, err := kernel.New(rec, fn, kernel.Ptr, kernel.Float32, kernel.Float64, kernel.Int8, kernel.Int16,
		kernel.Int32, kernel.Int64, kernel.Uint8, kernel.Uint16, kernel.Uint32, kernel.Struct(16, 8), kernel.Uint64)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(l.SetPtr(0, 0xdead0000beef))
	must(l.SetF32(1, 2.5))
	must(l.SetF64(2, -1.25))
	must(l.SetI8(3, -3))
	must(l.SetI16(4, -300))
	must(l.SetI32(5, -70000))
	must(l.SetI64(6, -1<<40))
	must(l.SetU8(7, 200))
	must(l.SetU16(8, 60000))
	must(l.SetU32(9, 4000000000))
	st := pair{A: 7, B: 3.5}
	must(l.SetStruct(10, unsafe.Slice((*byte)(unsafe.Pointer(&st)), unsafe.Sizeof(st))))
	must(l.SetU64(11, 1<<63))
	must(l.Launch(gpumem.Stream{}, gpumem.Dim3{X: 4}, gpumem.Dim3{X: 32}, 0))
	if rec.params.Count != 12 || rec.params.Array == 0 {
		t.Fatalf("params = %+v", rec.params)
	}
	le := binary.LittleEndian
	checks := []struct {
		name string
		got  uint64
		want uint64
	}{
		{"ptr", le.Uint64(rec.got[0]), 0xdead0000beef},
		{"f32", uint64(le.Uint32(rec.got[1])), uint64(math.Float32bits(2.5))},
		{"f64", le.Uint64(rec.got[2]), math.Float64bits(-1.25)},
		{"i8", uint64(rec.got[3][0]), uint64(uint8(0xfd))},
		{"i16", uint64(le.Uint16(rec.got[4])), uint64(uint16(0xfed4))},
		{"i32", uint64(le.Uint32(rec.got[5])), uint64(uint32(0xfffeee90))},
		{"i64", le.Uint64(rec.got[6]), uint64(0xffffff0000000000)},
		{"u8", uint64(rec.got[7][0]), 200},
		{"u16", uint64(le.Uint16(rec.got[8])), 60000},
		{"u32", uint64(le.Uint32(rec.got[9])), 4000000000},
		{"struct.A", uint64(le.Uint32(rec.got[10])), 7},
		{"struct.B", le.Uint64(rec.got[10][8:]), math.Float64bits(3.5)},
		{"u64", le.Uint64(rec.got[11]), 1 << 63},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: kernel sees %#x, want %#x", c.name, c.got, c.want)
		}
	}
	// Each argument's address is aligned to its kind.
	aligns := []uintptr{8, 4, 8, 1, 2, 4, 8, 1, 2, 4, 8, 8}
	for i, al := range aligns {
		if p := *(*uintptr)(at(rec.params.Array + uintptr(i)*8)); p%al != 0 {
			t.Errorf("argument %d at %#x, not %d-aligned", i, p, al)
		}
	}
}

func TestNoAllocationsPerLaunch(t *testing.T) {
	rec := newRecorder(8, 8, 4, 4)
	l, err := kernel.New(rec, fn, kernel.Ptr, kernel.Ptr, kernel.Float32, kernel.Int32)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := gpumem.Stream{Handle: 0x77}
	i := int32(0)
	allocs := testing.AllocsPerRun(500, func() {
		i++
		l.SetPtr(0, gpumem.Ptr(0x1000+uintptr(i)))
		l.SetPtr(1, 0x2000)
		l.SetF32(2, float32(i))
		l.SetI32(3, i)
		if err := l.Launch(s, gpumem.Dim3{X: 1024}, gpumem.Dim3{X: 256}, 0); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("a steady launch allocates %v times", allocs)
	}
	if got := int32(binary.LittleEndian.Uint32(rec.got[3])); got != i {
		t.Errorf("last launch saw %d, want %d", got, i)
	}
}

func TestMismatches(t *testing.T) {
	rec := newRecorder(8, 4, 12)
	l, err := kernel.New(rec, fn, kernel.Ptr, kernel.Int32, kernel.Struct(12, 4))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for name, err := range map[string]error{
		"index past the end": l.SetI32(3, 1),
		"negative index":     l.SetPtr(-1, 1),
		"wrong kind":         l.SetF32(1, 1),
		"unsigned for int":   l.SetU32(1, 1),
		"ptr for struct":     l.SetPtr(2, 1),
		"struct size":        l.SetStruct(2, make([]byte, 8)),
		"struct for int":     l.SetStruct(1, make([]byte, 4)),
	} {
		if !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("%s: %v, want ErrInvalidValue", name, err)
		}
	}
	l.SetPtr(0, 1)
	if err := l.Launch(gpumem.Stream{}, gpumem.Dim3{}, gpumem.Dim3{}, 0); !errors.Is(err, gpumem.ErrInvalidValue) || rec.launches != 0 {
		t.Errorf("launch with unset arguments: %v (%d launches)", err, rec.launches)
	}
	l.SetI32(1, 5)
	l.SetStruct(2, bytes.Repeat([]byte{9}, 12))
	if err := l.Launch(gpumem.Stream{}, gpumem.Dim3{}, gpumem.Dim3{}, 0); err != nil || rec.launches != 1 {
		t.Errorf("launch = %v (%d launches)", err, rec.launches)
	}
	rec.fail = errors.New("driver says no")
	if err := l.Launch(gpumem.Stream{}, gpumem.Dim3{}, gpumem.Dim3{}, 0); err != rec.fail {
		t.Errorf("launch error %v, want the backend's", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.SetI32(1, 1); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("set after Close: %v", err)
	}
	if err := l.Launch(gpumem.Stream{}, gpumem.Dim3{}, gpumem.Dim3{}, 0); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("launch after Close: %v", err)
	}
	if c, err := l.Clone(); !errors.Is(err, gpumem.ErrClosed) || c != nil {
		t.Errorf("Clone after Close: %v, %v; want ErrClosed", c, err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestBadSignatures(t *testing.T) {
	rec := newRecorder()
	for name, sig := range map[string][]kernel.Arg{
		"struct align 3":       {kernel.Struct(12, 3)},
		"struct align 32":      {kernel.Struct(32, 32)},
		"struct size 0":        {kernel.Struct(0, 4)},
		"struct size not mult": {kernel.Struct(10, 4)},
		"struct too large":     {kernel.Struct(1<<20, 8)},
		"unknown kind":         {kernel.Arg(0x99)},
		"forged size":          {kernel.Int32 | 1<<20},
	} {
		if l, err := kernel.New(rec, fn, sig...); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("%s: New = %v, want ErrInvalidValue", name, err)
			if l != nil {
				l.Close()
			}
		}
	}
	// All the parameters together, as the kernel lays them out (padding
	// included), may take MaxParamBytes, not more: the recorder reports no
	// parameters, as HIP cannot, so New's own bound is all that stops them.
	okSig := []kernel.Arg{kernel.Struct(kernel.MaxParamBytes-4, 4), kernel.Int32}
	if l, err := kernel.New(rec, fn, okSig...); err != nil {
		t.Errorf("parameters of exactly MaxParamBytes: %v", err)
	} else {
		l.Close()
	}
	for name, sig := range map[string][]kernel.Arg{
		"one over":          {kernel.Struct(kernel.MaxParamBytes-4, 4), kernel.Int64},
		"padding over":      {kernel.Int8, kernel.Struct(kernel.MaxParamBytes-4, 8)},
		"many small ones":   append(make([]kernel.Arg, 0, 4097), slices.Repeat([]kernel.Arg{kernel.Ptr}, 4096)...),
		"two large structs": {kernel.Struct(20000, 8), kernel.Struct(20000, 8)},
	} {
		l, err := kernel.New(rec, fn, sig...)
		if !errors.Is(err, gpumem.ErrInvalidValue) || !strings.Contains(fmt.Sprint(err), "over the 32764 a kernel may take") {
			t.Errorf("%s: New = %v, want the parameter bound", name, err)
		}
		if l != nil {
			l.Close()
		}
	}
	// The message names what is wrong with the size or alignment given.
	for sig, want := range map[kernel.Arg]string{
		kernel.Struct(40000, 8): "Struct size 40000", kernel.Struct(512, 256): "out of range", kernel.Struct(-8, 8): "out of range",
	} {
		if _, err := kernel.New(rec, fn, sig); !strings.Contains(fmt.Sprint(err), want) {
			t.Errorf("%v: New = %v, want a message with %q", sig, err, want)
		}
	}
	if _, err := kernel.New(nil, fn, kernel.Ptr); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("nil Kernels: %v", err)
	}
	if _, err := kernel.New(rec, gpumem.Function{}, kernel.Ptr); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("zero function: %v", err)
	}
	// No parameters: a launch passes no array.
	l, err := kernel.New(rec, fn)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Launch(gpumem.Stream{}, gpumem.Dim3{X: 1}, gpumem.Dim3{X: 1}, 0); err != nil || rec.params != (gpumem.KernelParams{}) {
		t.Errorf("empty launch = %v with %+v", err, rec.params)
	}
	if s := kernel.Struct(24, 8).String(); s != "Struct(24, 8)" || kernel.Float32.String() != "Float32" {
		t.Errorf("names: %s, %s", s, kernel.Float32)
	}
}

// TestConcurrent drives one Launcher and its clones from many goroutines
// (run it under -race): each clone's launches see its own arguments.
func TestConcurrent(t *testing.T) {
	rec := newRecorder(4)
	shared, err := kernel.New(rec, fn, kernel.Int32)
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own, err := shared.Clone()
			if err != nil {
				t.Error(err)
				return
			}
			defer own.Close()
			for i := 0; i < 200; i++ {
				shared.SetI32(0, int32(i))
				shared.Launch(gpumem.Stream{}, gpumem.Dim3{X: 1}, gpumem.Dim3{X: 1}, 0)
				own.SetI32(0, int32(g))
				if err := own.Launch(gpumem.Stream{}, gpumem.Dim3{X: 1}, gpumem.Dim3{X: 1}, 0); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if rec.launches != 8*200*2 {
		t.Errorf("%d launches, want %d", rec.launches, 8*200*2)
	}
}

func BenchmarkSetAndLaunch(b *testing.B) {
	rec := newRecorder(8, 4)
	l, err := kernel.New(rec, fn, kernel.Ptr, kernel.Int32)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		l.SetPtr(0, 0x1000)
		l.SetI32(1, int32(i))
		l.Launch(gpumem.Stream{}, gpumem.Dim3{X: 1}, gpumem.Dim3{X: 1}, 0)
	}
}

// A declaration of a scalar kind with another kind's size or alignment is
// refused by New: no setter could ever set it, and its bytes would not be
// the kind's.
func TestForgedScalarSizes(t *testing.T) {
	rec := newRecorder()
	kindOf := func(a kernel.Arg) kernel.Arg { return a & 0xff }
	for name, a := range map[string]kernel.Arg{
		"Int32 of 8 bytes":   kindOf(kernel.Int32) | 8<<8 | 8<<16,
		"Int8 of 4 bytes":    kindOf(kernel.Int8) | 4<<8 | 4<<16,
		"Ptr of 4 bytes":     kindOf(kernel.Ptr) | 4<<8 | 4<<16,
		"Float64 of 2 bytes": kindOf(kernel.Float64) | 2<<8 | 2<<16,
		"Uint16 of 16 bytes": kindOf(kernel.Uint16) | 16<<8 | 16<<16,
	} {
		l, err := kernel.New(rec, fn, a)
		if !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("%s: New = %v, want ErrInvalidValue", name, err)
		}
		if l != nil {
			l.Close()
		}
	}
	for _, a := range []kernel.Arg{kernel.Ptr, kernel.Int8, kernel.Int16, kernel.Int32, kernel.Int64, kernel.Uint8,
		kernel.Uint16, kernel.Uint32, kernel.Uint64, kernel.Float32, kernel.Float64} {
		l, err := kernel.New(rec, fn, a)
		if err != nil {
			t.Errorf("%s: %v", a, err)
			continue
		}
		l.Close()
	}
}

// nilKernels is a Kernels that is a nil pointer.
type nilKernels struct{ gpumem.Kernels }

// A nil pointer given as the Kernels is refused by New, not left to panic
// at the first launch.
func TestNilPointerKernels(t *testing.T) {
	var k *nilKernels
	l, err := kernel.New(k, fn, kernel.Int32)
	if !errors.Is(err, gpumem.ErrInvalidValue) || l != nil {
		t.Errorf("New with a nil *nilKernels: %v (launcher %t); want ErrInvalidValue", err, l != nil)
		if l != nil {
			l.Close()
		}
	}
}
