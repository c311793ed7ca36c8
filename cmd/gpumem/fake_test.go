package main

import (
	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/fakegpu"
)

// newFakeGPU returns a fake GPU of devices devices of capacity bytes named
// "sim", for tests of info and replay that must not depend on the
// simulator (see withFake).
func newFakeGPU(devices int, capacity uint64) *fakegpu.GPU {
	return fakegpu.New(capacity, fakegpu.WithDevices(devices), fakegpu.WithName("sim"), fakegpu.WithBase(1<<32), fakegpu.WithAlign(512))
}

// The pass-through allocator, registered as "test-pass": it hands each
// request to the device.
func init() {
	gpumem.RegisterAllocator(gpumem.AllocatorInfo{Name: "test-pass", New: func(b gpumem.Backend, conf string) (gpumem.Allocator, error) {
		return fakegpu.NewPass(b, "test-pass"), nil
	}})
}
