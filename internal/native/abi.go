package native

import (
	"unsafe"

	"github.com/gpumem/gpumem/internal/symtab"
)

// Struct sizes shared by CUDA and HIP (checked against the headers in tests).
const (
	AllocPropSize  = 32 // CUmemAllocationProp / hipMemAllocationProp
	PoolPropsSize  = 88 // CUmemPoolProps / hipMemPoolProps
	AccessDescSize = 12 // CUmemAccessDesc / hipMemAccessDesc
)

// Values shared by the two vendors' headers (CUDA cuda.h; HIP
// hip_runtime_api.h, checked in tests).
const (
	StatusNotReady           = symtab.CUDANotReady                 // CUDA_ERROR_NOT_READY, hipErrorNotReady
	StatusPeerAlreadyEnabled = symtab.CUDAPeerAccessAlreadyEnabled // CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, hipErrorPeerAccessAlreadyEnabled
	StatusNotInitialized     = symtab.CUDANotInitialized           // the status tables check that HIP numbers these four alike
	StatusDeinitialized      = symtab.CUDADeinitialized
	LocationTypeDevice       = 1 // CU_MEM_LOCATION_TYPE_DEVICE, hipMemLocationTypeDevice
	LocationTypeHost         = 2 // CU_MEM_LOCATION_TYPE_HOST (CUDA 12.2+)
	AllocationTypePinned     = 1
	AccessNone               = 0
	AccessRead               = 1
	AccessReadWrite          = 3
	DeviceCPU                = -1 // CU_DEVICE_CPU, hipCpuDeviceId
	DeviceInvalid            = -2 // CU_DEVICE_INVALID, hipInvalidDeviceId
	RangePreferredLocation   = 2  // CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, hipMemRangeAttributePreferredLocation
	RangeLastPrefetch        = 4
	MemcpyDefault            = 4 // hipMemcpyDefault
	HostAllocPortable        = 1 // CU_MEMHOSTALLOC_PORTABLE, hipHostMallocPortable
	MemAttachGlobal          = 1
	UserObjectNoDestructSync = 1 // CU_USER_OBJECT_NO_DESTRUCTOR_SYNC, hipUserObjectNoDestructorSync
	GraphUserObjectMove      = 1 // CU_GRAPH_USER_OBJECT_MOVE, hipGraphUserObjectMove
)

// EncodePoolProps writes CUmemPoolProps / hipMemPoolProps (88 bytes): pinned
// allocations on the device with handle dev, no export handles, maxSize at
// offset 24 when non-zero.
func EncodePoolProps(buf *[128]byte, dev int32, maxSize uint64) {
	*buf = [128]byte{}
	put32(buf[0:], AllocationTypePinned) // allocType
	put32(buf[4:], 0)                    // handleTypes: none
	put32(buf[8:], LocationTypeDevice)   // location.type
	put32(buf[12:], uint32(dev))         // location.id
	// win32SecurityAttributes at 16 stays NULL.
	if maxSize != 0 {
		*(*uint64)(unsafe.Pointer(&buf[24])) = maxSize
	}
}

// EncodeAccessDesc writes CUmemAccessDesc / hipMemAccessDesc (12 bytes).
func EncodeAccessDesc(buf []byte, dev int32, flags uint32) {
	put32(buf[0:], LocationTypeDevice)
	put32(buf[4:], uint32(dev))
	put32(buf[8:], flags)
}

func put32(b []byte, v uint32) { *(*uint32)(unsafe.Pointer(&b[0])) = v }
