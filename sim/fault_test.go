package sim_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

// Every Backend method that returns an error (the Kernels methods among
// them) can be made to fail, and the failing call has no effect.
func TestInjectFaultEveryMethod(t *testing.T) {
	g := newSim(t, sim.Config{Devices: make([]sim.DeviceConfig, 2)})
	s, _ := g.StreamCreate(0, 0, 0)
	e, _ := g.EventCreate(0, 0)
	e2, _ := g.EventCreate(0, 0)
	ok(t, g.EventRecord(e, s))
	ok(t, g.EventRecord(e2, s))
	ok(t, g.StreamSynchronize(s))
	p, _ := g.Malloc(0, 4096)
	q, _ := g.Malloc(1, 4096)
	m, _ := g.MallocManaged(0, 4096)
	pool, _ := g.DefaultMemPool(0)
	uo, _ := g.UserObjectCreate(0, func() {})
	ok(t, g.StreamBeginCapture(s, gpumem.CaptureModeRelaxed))
	ok(t, g.MemsetAsync(p, 1, 1, s))
	gr, err := g.StreamEndCapture(s)
	ok(t, err)
	ge, _ := g.GraphInstantiate(gr)
	gran, _ := g.MemGranularity(0, false)
	va, _ := g.MemAddressReserve(gran, 0)
	h, _ := g.MemCreate(0, gran)
	buf := make([]byte, 16)
	dev := gpumem.DeviceLocation(0)
	ok(t, g.RegisterKernel(sim.Kernel{Name: "nop", Run: func(*sim.KernelCall) {}}))
	img := sim.ModuleImage{Kernels: []string{"nop"}, Globals: []sim.Global{{Name: "counter", Size: 4}}}.Bytes()
	mod, err := g.ModuleLoadData(0, img)
	ok(t, err)
	fn, err := g.ModuleFunction(mod, "nop")
	ok(t, err)
	calls := map[string]func() error{
		"Version":                       func() error { _, err := g.Version(); return err },
		"DeviceCount":                   func() error { _, err := g.DeviceCount(); return err },
		"DeviceName":                    func() error { _, err := g.DeviceName(0); return err },
		"DeviceAttribute":               func() error { _, err := g.DeviceAttribute(0, gpumem.AttrUnifiedAddressing); return err },
		"MemInfo":                       func() error { _, _, err := g.MemInfo(0); return err },
		"DeviceSynchronize":             func() error { return g.DeviceSynchronize(0) },
		"Malloc":                        func() error { _, err := g.Malloc(0, 1); return err },
		"Free":                          func() error { return g.Free(0, 0) },
		"MallocHost":                    func() error { _, err := g.MallocHost(1); return err },
		"FreeHost":                      func() error { return g.FreeHost(0) },
		"MallocManaged":                 func() error { _, err := g.MallocManaged(0, 1); return err },
		"Advise":                        func() error { return g.Advise(m, 4096, gpumem.AdviseSetReadMostly, dev) },
		"Prefetch":                      func() error { return g.Prefetch(m, 4096, dev, s) },
		"RangeLocation":                 func() error { _, err := g.RangeLocation(m, 4096, gpumem.RangePreferredLocation); return err },
		"Memcpy":                        func() error { return g.Memcpy(p, p.Add(16), 16) },
		"MemcpyAsync":                   func() error { return g.MemcpyAsync(p, p.Add(16), 16, s) },
		"MemcpyPeerAsync":               func() error { return g.MemcpyPeerAsync(q, 1, p, 0, 16, s) },
		"Memset":                        func() error { return g.Memset(p, 0, 16) },
		"MemsetAsync":                   func() error { return g.MemsetAsync(p, 0, 16, s) },
		"CopyToDevice":                  func() error { return g.CopyToDevice(p, buf) },
		"CopyFromDevice":                func() error { return g.CopyFromDevice(buf, p) },
		"StreamCreate":                  func() error { _, err := g.StreamCreate(0, 0, 0); return err },
		"StreamDestroy":                 func() error { return g.StreamDestroy(gpumem.Stream{Handle: 1}) },
		"StreamSynchronize":             func() error { return g.StreamSynchronize(s) },
		"StreamQuery":                   func() error { _, err := g.StreamQuery(s); return err },
		"StreamWaitEvent":               func() error { return g.StreamWaitEvent(s, e) },
		"StreamPriorityRange":           func() error { _, _, err := g.StreamPriorityRange(0); return err },
		"EventCreate":                   func() error { _, err := g.EventCreate(0, 0); return err },
		"EventDestroy":                  func() error { return g.EventDestroy(gpumem.Event{Handle: 1}) },
		"EventRecord":                   func() error { return g.EventRecord(e, s) },
		"EventQuery":                    func() error { _, err := g.EventQuery(e); return err },
		"EventSynchronize":              func() error { return g.EventSynchronize(e) },
		"EventElapsed":                  func() error { _, err := g.EventElapsed(e2, e2); return err },
		"LaunchHostFunc":                func() error { return g.LaunchHostFunc(s, func() {}) },
		"DefaultMemPool":                func() error { _, err := g.DefaultMemPool(0); return err },
		"MemPoolCreate":                 func() error { _, err := g.MemPoolCreate(gpumem.PoolProps{MaxSize: 1}); return err },
		"MemPoolDestroy":                func() error { return g.MemPoolDestroy(gpumem.MemPool{Handle: 1}) },
		"MemPoolSetAttribute":           func() error { return g.MemPoolSetAttribute(pool, gpumem.PoolReleaseThreshold, 0) },
		"MemPoolGetAttribute":           func() error { _, err := g.MemPoolGetAttribute(pool, gpumem.PoolReleaseThreshold); return err },
		"MemPoolTrimTo":                 func() error { return g.MemPoolTrimTo(pool, 0) },
		"MemPoolSetAccess":              func() error { return g.MemPoolSetAccess(pool, 0, gpumem.AccessReadWrite) },
		"MemPoolGetAccess":              func() error { _, err := g.MemPoolGetAccess(pool, 0); return err },
		"MallocAsync":                   func() error { _, err := g.MallocAsync(1, s); return err },
		"MallocFromPoolAsync":           func() error { _, err := g.MallocFromPoolAsync(1, pool, s); return err },
		"FreeAsync":                     func() error { return g.FreeAsync(0, s) },
		"StreamBeginCapture":            func() error { return g.StreamBeginCapture(gpumem.Stream{Handle: 1}, 0) },
		"StreamEndCapture":              func() error { _, err := g.StreamEndCapture(gpumem.Stream{Handle: 1}); return err },
		"StreamCaptureInfo":             func() error { _, err := g.StreamCaptureInfo(s); return err },
		"GraphInstantiate":              func() error { _, err := g.GraphInstantiate(gpumem.Graph{Handle: 1}); return err },
		"GraphLaunch":                   func() error { return g.GraphLaunch(ge, s) },
		"GraphExecDestroy":              func() error { return g.GraphExecDestroy(gpumem.GraphExec{Handle: 1}) },
		"GraphDestroy":                  func() error { return g.GraphDestroy(gpumem.Graph{Handle: 1}) },
		"UserObjectCreate":              func() error { _, err := g.UserObjectCreate(0, func() {}); return err },
		"UserObjectRelease":             func() error { return g.UserObjectRelease(gpumem.UserObject{Handle: 1}, 1) },
		"GraphRetainUserObject":         func() error { return g.GraphRetainUserObject(gpumem.Graph{Handle: 1}, uo, 1, false) },
		"MemGranularity":                func() error { _, err := g.MemGranularity(0, false); return err },
		"MemAddressReserve":             func() error { _, err := g.MemAddressReserve(1, 0); return err },
		"MemAddressFree":                func() error { return g.MemAddressFree(1, 1) },
		"MemCreate":                     func() error { _, err := g.MemCreate(0, 1); return err },
		"MemRelease":                    func() error { return g.MemRelease(gpumem.MemHandle{Handle: 1}) },
		"MemMap":                        func() error { return g.MemMap(va, gran, gran, h) },
		"MemUnmap":                      func() error { return g.MemUnmap(va, gran) },
		"MemSetAccess":                  func() error { return g.MemSetAccess(1, 1, 0, gpumem.AccessReadWrite) },
		"CanAccessPeer":                 func() error { _, err := g.CanAccessPeer(0, 1); return err },
		"EnablePeerAccess":              func() error { return g.EnablePeerAccess(0, 0) },
		"DisablePeerAccess":             func() error { return g.DisablePeerAccess(0, 1) },
		"Launch":                        func() error { return g.Launch(s, p, 16, func([]byte) {}) },
		"ModuleLoadData":                func() error { _, err := g.ModuleLoadData(0, img); return err },
		"ModuleUnload":                  func() error { return g.ModuleUnload(mod) },
		"ModuleFunction":                func() error { _, err := g.ModuleFunction(mod, "nop"); return err },
		"ModuleGlobal":                  func() error { _, _, err := g.ModuleGlobal(mod, "counter"); return err },
		"FuncAttribute":                 func() error { _, err := g.FuncAttribute(fn, gpumem.FuncNumRegs); return err },
		"FuncSetMaxDynamicSharedMemory": func() error { return g.FuncSetMaxDynamicSharedMemory(fn, 1024) },
		"LaunchKernel": func() error {
			return g.LaunchKernel(fn, gpumem.Dim3{X: 1}, gpumem.Dim3{X: 32}, 0, s, gpumem.KernelParams{})
		},
		"OccupancyMaxActiveBlocks": func() error { _, err := g.OccupancyMaxActiveBlocks(fn, 128, 0); return err },
		"OccupancyMaxPotentialBlockSize": func() error {
			_, _, err := g.OccupancyMaxPotentialBlockSize(fn, 0, 0)
			return err
		},
		"Close": func() error { return nil },
	}
	errType := reflect.TypeOf((*error)(nil)).Elem()
	bt := reflect.TypeOf((*gpumem.Backend)(nil)).Elem()
	for i := 0; i < bt.NumMethod(); i++ {
		mt := bt.Method(i)
		if n := mt.Type.NumOut(); n > 0 && mt.Type.Out(n-1) == errType {
			if _, listed := calls[mt.Name]; !listed {
				t.Errorf("Backend method %s is not covered", mt.Name)
			}
		}
	}
	injected := errors.New("injected")
	for name, call := range calls {
		if name == "Close" {
			continue
		}
		before := g.Calls(name)
		g.InjectFault(name, 1, injected)
		if err := call(); err != injected {
			t.Errorf("%s with a fault injected: %v", name, err)
		}
		if g.Calls(name) != before+1 {
			t.Errorf("%s: Calls went from %d to %d", name, before, g.Calls(name))
		}
	}
	g.InjectFault("Close", 1, nil)
	if err := g.Close(); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("Close with a fault injected: %v", err)
	}
	// Nothing happened: every object made above is still there and usable.
	ok(t, g.StreamSynchronize(s))
	if _, err := g.ModuleFunction(mod, "nop"); err != nil {
		t.Errorf("the module after its faults: %v", err)
	}
	ok(t, g.ModuleUnload(mod))
	ok(t, g.GraphExecDestroy(ge))
	ok(t, g.GraphDestroy(gr))
	ok(t, g.UserObjectRelease(uo, 1))
	ok(t, g.MemRelease(h))
	ok(t, g.MemAddressFree(va, gran))
	for _, x := range []gpumem.Ptr{p, m} {
		ok(t, g.Free(0, x))
	}
	ok(t, g.Free(1, q))
	ok(t, g.EventDestroy(e))
	ok(t, g.EventDestroy(e2))
	ok(t, g.StreamDestroy(s))
	noLeaks(t, g)
}
