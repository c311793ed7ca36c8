package dl_test

import (
	"errors"
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/dl"
)

func ExampleOpen() {
	_, err := dl.Open("libgpumem-example-missing.so")
	fmt.Println(errors.Is(err, gpumem.ErrLibraryNotFound))

	lib, err := dl.Open("libgpumem-example-missing.so", "libc.so.6")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lib.Close()
	fmt.Println(lib.Path)
	_, err = lib.Sym("gpumem_example_missing_symbol")
	fmt.Println(errors.Is(err, gpumem.ErrNotSupported))
	// Output:
	// true
	// libc.so.6
	// true
}
