package all_test

import (
	"errors"
	"fmt"

	"github.com/gpumem/gpumem"
	_ "github.com/gpumem/gpumem/all" // the CUDA, HIP and simulator backends
)

// With every backend linked in, Open picks one by name or GPUMEM_BACKEND
// ("auto" tries CUDA, then HIP, and never the simulator). A program with no
// GPU tells the user why and how to run on the simulator.
func Example() {
	b, err := gpumem.Open(gpumem.Options{Backend: "cuda", Library: "/nonexistent/libcuda.so.1"})
	if errors.Is(err, gpumem.ErrLibraryNotFound) || errors.Is(err, gpumem.ErrNoDevice) {
		fmt.Println("no GPU; set GPUMEM_BACKEND=sim to use the simulator")
		b, err = gpumem.Open(gpumem.Options{Backend: "sim"})
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	fmt.Println("backend:", b.Name())
	// Output:
	// no GPU; set GPUMEM_BACKEND=sim to use the simulator
	// backend: sim
}
