package kernel_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/kernel"
	"github.com/gpumem/gpumem/sim"
)

// A signature that differs from the kernel's parameters in count or in a
// size is refused by New where the backend reports the parameters (here
// the simulator), before any launch could read bytes that are not there.
func TestSignatureCheckedAgainstTheKernel(t *testing.T) {
	g, err := sim.New(sim.Config{Devices: []sim.DeviceConfig{{Capacity: 1 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	k := sim.Kernel{Name: "axpy", Params: []sim.Param{sim.ScalarParam(4), sim.PtrParam, sim.PtrParam, sim.ScalarParam(8)},
		Run: func(*sim.KernelCall) {}}
	if err := g.RegisterKernel(k); err != nil {
		t.Fatal(err)
	}
	m, err := g.ModuleLoadData(0, sim.ModuleImage{Kernels: []string{"axpy"}}.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	defer g.ModuleUnload(m)
	f, err := g.ModuleFunction(m, "axpy")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		sig  []kernel.Arg
		ok   bool
	}{
		{"the kernel's", []kernel.Arg{kernel.Float32, kernel.Ptr, kernel.Ptr, kernel.Uint64}, true},
		{"same sizes, other kinds", []kernel.Arg{kernel.Int32, kernel.Ptr, kernel.Ptr, kernel.Int64}, true},
		{"one short", []kernel.Arg{kernel.Float32, kernel.Ptr, kernel.Ptr}, false},
		{"none", nil, false},
		{"one more", []kernel.Arg{kernel.Float32, kernel.Ptr, kernel.Ptr, kernel.Uint64, kernel.Int32}, false},
		{"a narrower count", []kernel.Arg{kernel.Float32, kernel.Ptr, kernel.Ptr, kernel.Uint32}, false},
		{"a struct of the wrong size", []kernel.Arg{kernel.Struct(8, 4), kernel.Ptr, kernel.Ptr, kernel.Uint64}, false},
	} {
		l, err := kernel.New(g, f, c.sig...)
		if c.ok {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
				continue
			}
			l.Close()
			continue
		}
		if !errors.Is(err, gpumem.ErrInvalidValue) || l != nil {
			t.Errorf("%s: New = %v, want ErrInvalidValue", c.name, err)
		}
	}
	// A function of an unloaded module: the parameters cannot be read.
	if err := g.ModuleUnload(m); err != nil {
		t.Fatal(err)
	}
	if l, err := kernel.New(g, f, kernel.Float32, kernel.Ptr, kernel.Ptr, kernel.Uint64); err == nil {
		l.Close()
		t.Error("New on a function of an unloaded module succeeded")
	}
}

// reporter is a recorder that reports parameters, or fails to.
type reporter struct {
	*recorder
	params []gpumem.ParamInfo
	err    error
}

func (r reporter) FuncParams(gpumem.Function) ([]gpumem.ParamInfo, error) { return r.params, r.err }

// A backend that cannot report parameters (HIP, CUDA before 12.4) leaves
// the signature unchecked; any other failure to read them is New's error.
func TestSignatureUncheckedWhereNotReported(t *testing.T) {
	notSupported := &gpumem.NotSupportedError{Backend: "hip", Op: "FuncParams", Reason: "no such function"}
	l, err := kernel.New(reporter{recorder: newRecorder(), err: notSupported}, fn, kernel.Int32)
	if err != nil {
		t.Fatalf("not supported: %v", err)
	}
	l.Close()
	boom := fmt.Errorf("boom: %w", gpumem.ErrClosed)
	if l, err := kernel.New(reporter{recorder: newRecorder(), err: boom}, fn, kernel.Int32); !errors.Is(err, gpumem.ErrClosed) {
		if l != nil {
			l.Close()
		}
		t.Errorf("failed read: New = %v, want the cause", err)
	}
	// Reported: one Int32 of 4 bytes.
	rep := reporter{recorder: newRecorder(), params: []gpumem.ParamInfo{{Offset: 0, Size: 4}}}
	if l, err := kernel.New(rep, fn, kernel.Int64); !errors.Is(err, gpumem.ErrInvalidValue) {
		if l != nil {
			l.Close()
		}
		t.Errorf("Int64 for a 4-byte parameter: %v", err)
	}
}
