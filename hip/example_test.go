package hip_test

import (
	"errors"
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/hip"
)

// Open loads the HIP runtime library. Where it cannot be loaded, or finds no
// GPU, the error says so and matches a sentinel, so a program can tell the
// user what is missing.
func ExampleOpen() {
	b, err := hip.Open("/nonexistent/libamdhip64.so") // "" tries the usual names
	switch {
	case errors.Is(err, gpumem.ErrLibraryNotFound):
		fmt.Println("no HIP runtime library here")
	case errors.Is(err, gpumem.ErrNoDevice):
		fmt.Println("the HIP runtime found no GPU")
	case err != nil:
		fmt.Println(err)
	default:
		defer b.Close()
		n, _ := b.DeviceCount()
		fmt.Println(n, "HIP devices")
	}
	// Output: no HIP runtime library here
}

// FormatVersion writes a HIP runtime version number as major.minor.patch.
func ExampleFormatVersion() {
	fmt.Println(hip.FormatVersion(60241134))
	// Output: 6.2.41134
}
