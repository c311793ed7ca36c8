package gpumem_test

import (
	"errors"
	"fmt"

	"github.com/gpumem/gpumem"
	_ "github.com/gpumem/gpumem/asyncpool" // registers the stream-ordered pool allocator as "asyncpool"
	_ "github.com/gpumem/gpumem/caching"   // registers the caching allocator as "caching"
	_ "github.com/gpumem/gpumem/sim"       // registers the simulator as "sim"
)

// Open chooses a backend by name (or GPUMEM_BACKEND); the simulator is
// chosen only by name.
func ExampleOpen() {
	b, err := gpumem.Open(gpumem.Options{Backend: "sim"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	n, _ := b.DeviceCount()
	p, err := b.Malloc(0, 1<<20)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Free(0, p)
	fmt.Println(b.Name(), "with", n, "device; allocated 1 MiB:", p != 0)
	// Output: sim with 1 device; allocated 1 MiB: true
}

// Errors match the package's sentinels with errors.Is, whatever the backend.
func ExampleOpen_errors() {
	_, err := gpumem.Open(gpumem.Options{Backend: "tpu"})
	fmt.Println("unknown backend:", errors.Is(err, gpumem.ErrInvalidValue))
	// Output: unknown backend: true
}

// An allocator's out-of-memory error tells what it held and matches
// ErrOutOfMemory.
func ExampleOutOfMemoryError() {
	var err error = &gpumem.OutOfMemoryError{
		Allocator: "caching", Device: 0, Requested: 3 << 30, Capacity: 80 << 30,
		Free: 1 << 30, Allocated: 70 << 30, Reserved: 78 << 30,
	}
	var oom *gpumem.OutOfMemoryError
	fmt.Println(errors.Is(err, gpumem.ErrOutOfMemory), errors.As(err, &oom), gpumem.FormatBytes(oom.Requested))
	// Output: true true 3.00 GiB
}

func ExampleFormatBytes() {
	fmt.Println(gpumem.FormatBytes(512), gpumem.FormatBytes(3<<19), gpumem.FormatBytes(140<<30))
	// Output: 512 B 1.50 MiB 140.00 GiB
}

// NewAllocator builds the allocator a configuration string asks for, in
// PyTorch's PYTORCH_CUDA_ALLOC_CONF syntax (GPUMEM_ALLOC_CONF): the backend
// key names a registered allocator (the caching allocator when absent) and
// the other keys configure it. Allocator packages register themselves when
// linked in; github.com/gpumem/gpumem/all links them all.
func ExampleNewAllocator() {
	b, err := gpumem.Open(gpumem.Options{Backend: "sim"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()

	a, err := gpumem.NewAllocator(b, "backend:caching,max_split_size_mb:64,garbage_collection_threshold:0.8")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	s := gpumem.Stream{Device: 0} // the legacy default stream of device 0
	p, err := a.Allocate(3<<20, s)
	if err != nil {
		fmt.Println(err)
		return
	}
	st := a.Stats(0)
	fmt.Println("allocated:", gpumem.FormatBytes(uint64(st.AllocatedBytes[gpumem.StatAll].Current)))
	if err := a.Deallocate(p, s); err != nil {
		fmt.Println(err)
	}

	// A key that does not apply to the allocator named is refused, naming it.
	_, err = gpumem.NewAllocator(b, "backend:asyncpool,expandable_segments:True")
	fmt.Println(errors.Is(err, gpumem.ErrInvalidValue), err)
	// Output:
	// allocated: 3.00 MiB
	// true gpumem: allocator configuration: expandable_segments:True: does not apply to the asyncpool allocator (it applies to caching)
}
