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

// A program that hands the driver a Go function through a binding of its
// own holds short calls off while the driver may call it.
func ExampleHoldShortCalls() {
	release := driver.HoldShortCalls()
	defer release()
	// ... register the callback with the driver, run the work that calls
	// it, and wait until the driver can no longer call it ...
	fmt.Println("short calls on:", driver.ShortCalls())
	// Output: short calls on: false
}
