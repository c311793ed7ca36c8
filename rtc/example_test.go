package rtc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/kernels"
	"github.com/gpumem/gpumem/rtc"
)

// Compile the project's saxpy for an H100 with the NVRTC the machine has.
// (Compiled, not run: it needs libnvrtc.)
func ExampleCompile() {
	res, err := rtc.Compile(context.Background(), kernels.Saxpy.Request("sm_90"))
	var ce *rtc.CompileError
	switch {
	case errors.As(err, &ce):
		fmt.Println("compile error:", ce.Log)
	case errors.Is(err, gpumem.ErrNotSupported):
		fmt.Println("no NVRTC, or it does not know sm_90:", err)
	case err == nil:
		fmt.Printf("%d bytes of PTX from %s\n", len(res.Image), res.Compiler)
	}
}

// A compiler library that is not there: the error names the file tried and
// matches gpumem.ErrNotSupported.
func ExampleOpen_missing() {
	_, err := rtc.Open("hip", "/nonexistent/libhiprtc.so.6")
	fmt.Println(errors.Is(err, gpumem.ErrNotSupported), errors.Is(err, gpumem.ErrLibraryNotFound))
	fmt.Println(strings.Contains(err.Error(), "/nonexistent/libhiprtc.so.6"))
	// Output:
	// true true
	// true
}

// The dialect header hipRTC compiles with: the table's HIP column.
func ExampleHeader() {
	for _, line := range strings.Split(rtc.Header("hip"), "\n") {
		if strings.Contains(line, "SHFL_DOWN") || strings.Contains(line, "WARP_SIZE") {
			fmt.Println(line)
		}
	}
	// Output:
	// #define GPUMEM_WARP_SIZE warpSize
	// #define GPUMEM_SHFL_DOWN(mask, v, delta) __shfl_down(v, delta)
}
