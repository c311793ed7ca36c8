// Package backendtest is the conformance suite that every gpumem.Backend
// passes: the simulator always, the CUDA and HIP backends whenever a device
// is present.
//
// The suite uses only what a real GPU can do, with small memory (well under
// 2 GiB, managed memory under 1 GiB, never oversubscribed), and destroys
// every object it creates. Operations the backend lacks must return an error
// matching gpumem.ErrNotSupported; the suite then skips the rest of that
// subtest and says why, so a missing feature never passes silently.
//
// A backend's test runs it with a function that opens a fresh instance:
//
//	func TestConformance(t *testing.T) {
//		backendtest.Run(t, func(t *testing.T) gpumem.Backend {
//			b, err := mybackend.Open("")
//			if err != nil {
//				t.Skipf("no device: %v", err)
//			}
//			t.Cleanup(func() { _ = b.Close() })
//			return b
//		})
//	}
//
// The subtests cover devices and attributes, memory information, device
// and pinned allocation (1 byte to 768 MiB, foreign and double frees, out
// of memory), synchronous and asynchronous copies checked byte for byte,
// memsets, streams and priorities, event waits whose ordering is proven by
// data while the first stream is held by a host function, event timing,
// host functions in order, the default and a created pool (attributes,
// release threshold, high-water marks, trim, access), graph capture (status,
// replay twice, host nodes, user-object destructors, illegal calls, memory
// nodes, the thread a capture ends on), the virtual memory API, managed
// memory (advice, prefetch both ways, range attributes), peer access with
// two devices, and Close.
package backendtest

import (
	"testing"

	"github.com/gpumem/gpumem"
)

// Run runs the suite. open is called once per subtest and returns a fresh
// backend (or one the caller shares); the suite closes it only in the
// subtest that checks Close, after which open is not called again.
func Run(t *testing.T, open func(t *testing.T) gpumem.Backend) {
	RunDevice(t, 0, open)
}

// RunDevice runs the suite on device dev of the backends that open returns:
// every allocation, stream, event, pool, graph and managed range of the
// suite is on dev, and the peer subtest pairs dev with the next device
// (dev+1 modulo the count). A backend with no device dev fails the suite.
func RunDevice(t *testing.T, dev int, open func(t *testing.T) gpumem.Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b gpumem.Backend, dev int)
	}{
		{"Devices", testDevices},
		{"Malloc", testMalloc},
		{"MallocErrors", testMallocErrors},
		{"Host", testHost},
		{"Copies", testCopies},
		{"CopiesAsync", testCopiesAsync},
		{"Memset", testMemset},
		{"Streams", testStreams},
		{"StreamWaitEvent", testStreamWaitEvent},
		{"Events", testEvents},
		{"HostFuncOrder", testHostFuncOrder},
		{"DefaultPool", testDefaultPool},
		{"CreatedPool", testCreatedPool},
		{"GraphCapture", testGraphCapture},
		{"GraphCaptureIllegal", testGraphCaptureIllegal},
		{"GraphCaptureThread", testGraphCaptureThread},
		{"GraphMemoryNodes", testGraphMemoryNodes},
		{"VMM", testVMM},
		{"Managed", testManaged},
		{"Peer", testPeer},
		{"Kernels", testKernels},
		{"Close", testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := open(t)
			if n, err := b.DeviceCount(); err == nil && (dev < 0 || dev >= n) {
				t.Fatalf("the suite was asked for device %d of a backend with %d", dev, n)
			}
			tc.fn(t, b, dev)
		})
	}
}
