package hip

import (
	"github.com/gpumem/gpumem"
)

// attributes maps gpumem attributes to hipDeviceAttribute_t
// (hip_runtime_api.h of HIP 5.2; the enum is numbered differently from
// CUDA's). HIP 5.2 has no virtual-memory-management attribute.
var attributes = map[gpumem.Attribute]int32{
	gpumem.AttrComputeCapabilityMajor:  23, // hipDeviceAttributeComputeCapabilityMajor
	gpumem.AttrComputeCapabilityMinor:  61, // hipDeviceAttributeComputeCapabilityMinor
	gpumem.AttrMultiprocessorCount:     63, // hipDeviceAttributeMultiprocessorCount
	gpumem.AttrUnifiedAddressing:       85, // hipDeviceAttributeUnifiedAddressing
	gpumem.AttrManagedMemory:           24, // hipDeviceAttributeManagedMemory
	gpumem.AttrConcurrentManagedAccess: 9,  // hipDeviceAttributeConcurrentManagedAccess
	gpumem.AttrPageableMemoryAccess:    65, // hipDeviceAttributePageableMemoryAccess
	gpumem.AttrCanMapHostMemory:        3,  // hipDeviceAttributeCanMapHostMemory
	gpumem.AttrMemoryPoolsSupported:    88, // hipDeviceAttributeMemoryPoolsSupported
	gpumem.AttrIntegrated:              16, // hipDeviceAttributeIntegrated
	gpumem.AttrPCIBusID:                67, // hipDeviceAttributePciBusId
	gpumem.AttrPCIDeviceID:             68, // hipDeviceAttributePciDeviceId
	gpumem.AttrClockRateKHz:            5,  // hipDeviceAttributeClockRate
	gpumem.AttrMemoryClockRateKHz:      60, // hipDeviceAttributeMemoryClockRate
	gpumem.AttrGlobalMemoryBusWidth:    59, // hipDeviceAttributeMemoryBusWidth
	gpumem.AttrL2CacheSize:             19, // hipDeviceAttributeL2CacheSize
}

func attribute(a gpumem.Attribute) (int32, bool) {
	v, ok := attributes[a]
	return v, ok
}

// advices maps gpumem advice to hipMemoryAdvise.
var advices = map[gpumem.Advice]int32{
	gpumem.AdviseSetReadMostly:          1,   // hipMemAdviseSetReadMostly
	gpumem.AdviseUnsetReadMostly:        2,   // hipMemAdviseUnsetReadMostly
	gpumem.AdviseSetPreferredLocation:   3,   // hipMemAdviseSetPreferredLocation
	gpumem.AdviseUnsetPreferredLocation: 4,   // hipMemAdviseUnsetPreferredLocation
	gpumem.AdviseSetAccessedBy:          5,   // hipMemAdviseSetAccessedBy
	gpumem.AdviseUnsetAccessedBy:        6,   // hipMemAdviseUnsetAccessedBy
	gpumem.AdviseSetCoarseGrain:         100, // hipMemAdviseSetCoarseGrain
	gpumem.AdviseUnsetCoarseGrain:       101, // hipMemAdviseUnsetCoarseGrain
}

func advice(a gpumem.Advice) (int32, bool) {
	v, ok := advices[a]
	return v, ok
}

// funcAttributes maps gpumem function attributes to hipFunction_attribute
// (driver_types.h of HIP 5.2: the enum counts from 0 in CUDA's order).
var funcAttributes = [...]int32{
	gpumem.FuncMaxThreadsPerBlock:        0, // HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
	gpumem.FuncSharedSizeBytes:           1, // HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
	gpumem.FuncConstSizeBytes:            2, // HIP_FUNC_ATTRIBUTE_CONST_SIZE_BYTES
	gpumem.FuncLocalSizeBytes:            3, // HIP_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES
	gpumem.FuncNumRegs:                   4, // HIP_FUNC_ATTRIBUTE_NUM_REGS
	gpumem.FuncPTXVersion:                5, // HIP_FUNC_ATTRIBUTE_PTX_VERSION
	gpumem.FuncBinaryVersion:             6, // HIP_FUNC_ATTRIBUTE_BINARY_VERSION
	gpumem.FuncMaxDynamicSharedSizeBytes: 8, // HIP_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
}

func funcAttribute(a gpumem.FuncAttribute) (int32, bool) {
	if a < 0 || int(a) >= len(funcAttributes) {
		return 0, false
	}
	return funcAttributes[a], true
}
