package callback_test

import (
	"fmt"

	"github.com/gpumem/gpumem/internal/callback"
	"github.com/gpumem/gpumem/internal/ccall"
)

func ExampleRegister() {
	id := callback.Register(func() { fmt.Println("host function ran") }, true)
	// A driver would call Pointer() with id as userData, e.g. after
	// cuLaunchHostFunc(stream, callback.Pointer(), id); here C calls it
	// directly.
	ccall.Call1(callback.Pointer(), id)
	fmt.Println(callback.Pending())
	// Output:
	// host function ran
	// 0
}
