package sim

import (
	"reflect"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// The simulator's call counters and injected faults are indexed by the
// driver table's operation ids (symtab.Op), the ids the CUDA and HIP
// backends resolve their symbols by: one id space for every backend. The
// simulator's operations are the methods of gpumem.Backend (gpumem.Kernels
// among them) and its own Launch; each has a row of symtab.Driver, those
// with no vendor symbol (Name, Library, Close, CopyToDevice,
// CopyFromDevice, Launch) included.

// opName is the Go method name of m.
func opName(m symtab.Op) string { return symtab.Driver.Rows[m].Op }

// opSymbol is the CUDA driver symbol the simulator names in its errors, so
// that a sim error reads like the driver's; the method name where the
// driver has no function of its own.
func opSymbol(m symtab.Op) string {
	if s := symtab.Driver.Rows[m].Symbol[symtab.CUDA]; s != "" {
		return s
	}
	return symtab.Driver.Rows[m].Op
}

// methodByName maps the names InjectFault and Calls accept (the methods of
// gpumem.Backend, those of gpumem.Kernels among them, "Launch" and
// "FuncParams" of gpumem.ParamReporter) to
// their ids. Other rows of the table (internal operations such as Init) are
// not the simulator's.
var methodByName = func() map[string]symtab.Op {
	bt := reflect.TypeOf((*gpumem.Backend)(nil)).Elem()
	m := make(map[string]symtab.Op, bt.NumMethod()+1)
	for _, name := range append(methodNames(bt), opName(symtab.Launch), opName(symtab.FuncGetParamInfo)) {
		r, ok := symtab.Driver.ByName(name)
		if !ok {
			panic("sim: gpumem.Backend." + name + " has no row in the driver table")
		}
		m[name] = r.ID
	}
	return m
}()

func methodNames(t reflect.Type) []string {
	out := make([]string, t.NumMethod())
	for i := range out {
		out[i] = t.Method(i).Name
	}
	return out
}

// naturalCode is the CUDA status an injected fault with a nil error reports:
// out of memory for the methods that allocate, invalid value for the rest.
func naturalCode(m symtab.Op) int {
	switch m {
	case symtab.Malloc, symtab.MallocHost, symtab.MallocManaged, symtab.MallocAsync, symtab.MallocFromPoolAsync, symtab.MemCreate:
		return symtab.CUDAOutOfMemory
	case symtab.DeviceGetCount:
		return symtab.CUDANoDevice
	}
	return symtab.CUDAInvalidValue
}
