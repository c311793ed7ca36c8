package ccall_test

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/gpumem/gpumem/internal/ccall"
	"github.com/gpumem/gpumem/internal/dl"
)

func ExampleCall1() {
	lib, err := dl.Open("libc.so.6")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lib.Close()
	strlen, err := lib.Sym("strlen")
	if err != nil {
		fmt.Println(err)
		return
	}
	s := []byte("gpumem\x00")
	n := ccall.Call1(strlen, uintptr(unsafe.Pointer(&s[0])))
	runtime.KeepAlive(s)
	fmt.Println(n)
	// Output: 6
}

func ExampleCallPre6() {
	lib, err := dl.Open("libc.so.6")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lib.Close()
	abs, _ := lib.Sym("abs")
	labs, _ := lib.Sym("labs")
	// A pre-call that fails (abs(-3) = 3) stops the call.
	r, failed := ccall.CallPre6(abs, uintptr(0xFFFFFFFD), labs, 42, 0, 0, 0, 0, 0)
	fmt.Println(r, failed)
	// A pre-call that succeeds (abs(0) = 0) lets it run.
	r, failed = ccall.CallPre6(abs, 0, labs, uintptr(^uint64(41)), 0, 0, 0, 0, 0)
	fmt.Println(r, failed)
	// Output:
	// 3 true
	// 42 false
}
