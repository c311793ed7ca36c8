package driver

import (
	"github.com/gpumem/gpumem"
)

// attributes maps gpumem attributes to CUdevice_attribute (cuda.h).
var attributes = map[gpumem.Attribute]int32{
	gpumem.AttrComputeCapabilityMajor:  75,  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
	gpumem.AttrComputeCapabilityMinor:  76,  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
	gpumem.AttrMultiprocessorCount:     16,  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
	gpumem.AttrUnifiedAddressing:       41,  // CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING
	gpumem.AttrManagedMemory:           83,  // CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY
	gpumem.AttrConcurrentManagedAccess: 89,  // CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS
	gpumem.AttrPageableMemoryAccess:    88,  // CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS
	gpumem.AttrCanMapHostMemory:        19,  // CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY
	gpumem.AttrMemoryPoolsSupported:    115, // CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED
	gpumem.AttrVirtualMemoryManagement: 102, // CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
	gpumem.AttrIntegrated:              18,  // CU_DEVICE_ATTRIBUTE_INTEGRATED
	gpumem.AttrPCIBusID:                33,  // CU_DEVICE_ATTRIBUTE_PCI_BUS_ID
	gpumem.AttrPCIDeviceID:             34,  // CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID
	gpumem.AttrClockRateKHz:            13,  // CU_DEVICE_ATTRIBUTE_CLOCK_RATE
	gpumem.AttrMemoryClockRateKHz:      36,  // CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE
	gpumem.AttrGlobalMemoryBusWidth:    37,  // CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH
	gpumem.AttrL2CacheSize:             38,  // CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE
}

func attribute(a gpumem.Attribute) (int32, bool) {
	v, ok := attributes[a]
	return v, ok
}

// advice maps gpumem advice to CUmem_advise (cuda.h: SET_READ_MOSTLY 1 ..
// UNSET_ACCESSED_BY 6). CUDA has no coarse-grain advice.
func advice(a gpumem.Advice) (int32, bool) {
	switch a {
	case gpumem.AdviseSetReadMostly:
		return 1, true
	case gpumem.AdviseUnsetReadMostly:
		return 2, true
	case gpumem.AdviseSetPreferredLocation:
		return 3, true
	case gpumem.AdviseUnsetPreferredLocation:
		return 4, true
	case gpumem.AdviseSetAccessedBy:
		return 5, true
	case gpumem.AdviseUnsetAccessedBy:
		return 6, true
	}
	return 0, false
}

// funcAttributes maps gpumem function attributes to CUfunction_attribute
// (cuda.h).
var funcAttributes = [...]int32{
	gpumem.FuncMaxThreadsPerBlock:        0, // CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
	gpumem.FuncSharedSizeBytes:           1, // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
	gpumem.FuncConstSizeBytes:            2, // CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES
	gpumem.FuncLocalSizeBytes:            3, // CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES
	gpumem.FuncNumRegs:                   4, // CU_FUNC_ATTRIBUTE_NUM_REGS
	gpumem.FuncPTXVersion:                5, // CU_FUNC_ATTRIBUTE_PTX_VERSION
	gpumem.FuncBinaryVersion:             6, // CU_FUNC_ATTRIBUTE_BINARY_VERSION
	gpumem.FuncMaxDynamicSharedSizeBytes: 8, // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
}

func funcAttribute(a gpumem.FuncAttribute) (int32, bool) {
	if a < 0 || int(a) >= len(funcAttributes) {
		return 0, false
	}
	return funcAttributes[a], true
}
