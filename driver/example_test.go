package driver_test

import (
	"errors"
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/driver"
)

// Open loads the CUDA driver library. Where it cannot be loaded, or finds no
// GPU, the error says so and matches a sentinel, so a program can tell the
// user what is missing.
func ExampleOpen() {
	b, err := driver.Open("/nonexistent/libcuda.so.1") // "" tries the usual names
	switch {
	case errors.Is(err, gpumem.ErrLibraryNotFound):
		fmt.Println("no CUDA driver library here")
	case errors.Is(err, gpumem.ErrNoDevice):
		fmt.Println("the CUDA driver found no GPU")
	case err != nil:
		fmt.Println(err)
	default:
		defer b.Close()
		n, _ := b.DeviceCount()
		fmt.Println(n, "CUDA devices")
	}
	// Output: no CUDA driver library here
}

// FormatVersion writes a CUDA version number as CUDA's tools do.
func ExampleFormatVersion() {
	fmt.Println(driver.FormatVersion(12080), driver.FormatVersion(13000))
	// Output: 12.8 13.0
}
