// Package telemetry reads a GPU's telemetry: per device the memory used and
// total, the memory of each process (this one and the others), the
// utilization, temperature, power and clocks.
//
// On NVIDIA it calls NVML (libnvidia-ml.so.1), on AMD ROCm SMI
// (librocm_smi64), both loaded at run time through package bind with no
// cgo, and neither creating a GPU context. For the simulator (package sim)
// it reads the simulator's accounting, so that code watching memory is
// tested with no GPU: this process's memory is what it allocated, and other
// processes are modelled with sim.GPU.SetOtherProcesses, whose bytes the
// simulated device loses as a shared GPU would.
//
//	t, err := telemetry.Open(backend) // NVML, ROCm SMI or the simulator's accounting
//	s, err := t.Device(0)             // memory, utilization, temperature, power, clocks
//	others, procs, err := t.Others(0) // what other processes hold on device 0
//
// Open indexes devices by the backend's ordinals: each device is found in
// the library by its PCI address, so a CUDA_VISIBLE_DEVICES or
// HIP_VISIBLE_DEVICES reordering is followed. OpenSystem opens a library
// alone, in its own device order.
//
// # What may be missing
//
// A reading the library, the driver or the device lacks (an optional
// function absent from an older library, a sensor a board has not) is left
// out of DeviceStats.Supported; the others stand. Only the memory is
// required. Per-process figures: NVML lists the processes with a CUDA
// context on the device; in a container it may list other PID namespaces'
// processes under IDs this process cannot see, or hide them, so Self may
// find no entry for this process there. ROCm SMI before 6 has no per-device
// figure for a process spread over several devices (Process.Unknown).
//
// # Out-of-memory errors
//
// Importing the package makes every allocator's out-of-memory error say
// what other processes hold on the device (gpumem.OutOfMemoryError.Others,
// in its message and Summary): it installs gpumem.SetOtherProcessesFunc,
// which allocators consult only when an allocation fails.
//
// # Tables
//
// The bind tables (NVML, ROCmSMI) cite the headers they follow; the symbols
// command checks them against a library file:
//
//	gpumem symbols --table smi --backend cuda --library libnvidia-ml.so.1
package telemetry
