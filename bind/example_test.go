package bind_test

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/bind"
	"github.com/gpumem/gpumem/driver"
)

// A program binds a function gpumem does not ship: the driver's device
// UUID, cuDeviceGetUuid_v2 on CUDA and hipDeviceGetUuid on HIP. It declares
// the library and a one-row table, opens it, and calls the row on the
// device of a backend, whose context the call makes current.
func Example() {
	const opUUID bind.Op = 0
	lib := &bind.Library{
		Name:  "uuid",
		Files: [bind.NumVendors][]string{bind.CUDA: {"libcuda.so.1"}, bind.HIP: {"libamdhip64.so"}},
		Env:   "GPUMEM_CUDA_LIBRARY",
		Table: bind.NewTable("uuid",
			bind.Func{Op: "DeviceUUID", Symbol: bind.Symbols("cuDeviceGetUuid_v2", "hipDeviceGetUuid"), Args: bind.Args(2), Required: bind.Both,
				Notes: "CUuuid / hipUUID: 16 bytes; the device handle is the ordinal on both for device 0"},
		),
	}
	b, err := driver.Open("")
	if err != nil {
		fmt.Println("no CUDA device here:", errors.Is(err, gpumem.ErrNoDevice) || errors.Is(err, gpumem.ErrLibraryNotFound))
		return
	}
	defer b.Close()
	l, err := bind.Open(lib, bind.CUDA)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	ctx, err := bind.ContextOf(b, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	uuid := new([16]byte)
	err = l.CheckOn(ctx, opUUID, uintptr(unsafe.Pointer(uuid)), 0)
	runtime.KeepAlive(uuid)
	fmt.Println(err == nil)
}

// The same mechanism binds any C library; here C's own strlen, so that
// the example runs on every Linux machine.
func ExampleLib_Call() {
	lib := &bind.Library{
		Name:  "libc",
		Files: [bind.NumVendors][]string{bind.CUDA: {"libc.so.6"}, bind.HIP: {"libc.so.6"}},
		Table: bind.NewTable("libc",
			bind.Func{Op: "Strlen", Symbol: bind.Symbols("strlen", "strlen"), Args: bind.Args(1), Required: bind.Both}),
	}
	l, err := bind.Open(lib, bind.CUDA)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	s := []byte("gpumem\x00")
	n, err := l.Call(0, uintptr(unsafe.Pointer(&s[0])))
	runtime.KeepAlive(s)
	fmt.Println(n, err)
	_, err = l.Call(0)
	fmt.Println(err)
	// Output:
	// 6 <nil>
	// gpumem: libc: strlen takes 1 arguments, called with 0: gpumem: invalid value
}
