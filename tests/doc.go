// Package tests holds the project's tests that cross packages; it has no
// code of its own. They are: the backend conformance suite (backendtest)
// on the simulator in several configurations and, where the vendor
// libraries are given, on vendor runtimes; tests on a real GPU (gpu_*,
// multi_gpu), which skip where no device is present; many-device tests of
// every allocator on the simulator; and checks of errors and of the
// packages' layering.
package tests
