package driver

import (
	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/native"
	"github.com/gpumem/gpumem/internal/symtab"
)

// Driver versions (1000*major + 10*minor) at which the ABI the backend
// speaks changed; each is the first version with the new form.
const (
	// cuda120: cuGetProcAddress_v2 and its CUdriverProcAddressQueryResult
	// (CU_GET_PROC_ADDRESS_SUCCESS); CUDA 11.8's cuda.h has neither.
	cuda120 = 12000
	// cuda122: CUmemPoolProps has maxSize at 24 and CUmemLocation a host
	// type.
	cuda122 = 12020
	// cuda126: CUmemPoolProps has usage at 32 (12.5's cuda.h does not).
	cuda126 = 12060
)

// layouts are the structs the backend writes (cuda.h).
var layouts = []symtab.Layout{
	{Struct: "CUmemAllocationProp", Size: native.AllocPropSize, Fields: []symtab.Field{
		{Name: "type", Offset: 0}, {Name: "requestedHandleTypes", Offset: 4}, {Name: "location.type", Offset: 8},
		{Name: "location.id", Offset: 12}, {Name: "win32HandleMetaData", Offset: 16}, {Name: "allocFlags", Offset: 24}}},
	{Struct: "CUmemPoolProps", Size: native.PoolPropsSize, Fields: []symtab.Field{
		{Name: "allocType", Offset: 0}, {Name: "handleTypes", Offset: 4}, {Name: "location.type", Offset: 8},
		{Name: "location.id", Offset: 12}, {Name: "win32SecurityAttributes", Offset: 16}, {Name: "reserved", Offset: 24}}},
	{Struct: "CUmemPoolProps", From: cuda122, Size: native.PoolPropsSize, Fields: []symtab.Field{
		{Name: "allocType", Offset: 0}, {Name: "handleTypes", Offset: 4}, {Name: "location.type", Offset: 8},
		{Name: "location.id", Offset: 12}, {Name: "win32SecurityAttributes", Offset: 16}, {Name: "maxSize", Offset: 24},
		{Name: "reserved", Offset: 32}}},
	// usage (unsigned short, left 0) took the first two reserved bytes in
	// 12.6; 12.5's cuda.h has reserved[56] at 32.
	{Struct: "CUmemPoolProps", From: cuda126, Size: native.PoolPropsSize, Fields: []symtab.Field{
		{Name: "allocType", Offset: 0}, {Name: "handleTypes", Offset: 4}, {Name: "location.type", Offset: 8},
		{Name: "location.id", Offset: 12}, {Name: "win32SecurityAttributes", Offset: 16}, {Name: "maxSize", Offset: 24},
		{Name: "usage", Offset: 32}, {Name: "reserved", Offset: 34}}},
	{Struct: "CUmemAccessDesc", Size: native.AccessDescSize, Fields: []symtab.Field{
		{Name: "location.type", Offset: 0}, {Name: "location.id", Offset: 4}, {Name: "flags", Offset: 8}}},
	{Struct: "CUmemLocation", Size: 8, Fields: []symtab.Field{{Name: "type", Offset: 0}, {Name: "id", Offset: 4}}},
}

// attributes maps gpumem attributes to CUdevice_attribute (cuda.h).
var attributes = []symtab.Mapping[gpumem.Attribute]{
	{Key: gpumem.AttrComputeCapabilityMajor, Const: symtab.Const{Name: "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR", Value: 75}},
	{Key: gpumem.AttrComputeCapabilityMinor, Const: symtab.Const{Name: "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR", Value: 76}},
	{Key: gpumem.AttrMultiprocessorCount, Const: symtab.Const{Name: "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT", Value: 16}},
	{Key: gpumem.AttrUnifiedAddressing, Const: symtab.Const{Name: "CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING", Value: 41}},
	{Key: gpumem.AttrManagedMemory, Const: symtab.Const{Name: "CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY", Value: 83}},
	{Key: gpumem.AttrConcurrentManagedAccess, Const: symtab.Const{Name: "CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS", Value: 89}},
	{Key: gpumem.AttrPageableMemoryAccess, Const: symtab.Const{Name: "CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS", Value: 88}},
	{Key: gpumem.AttrCanMapHostMemory, Const: symtab.Const{Name: "CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY", Value: 19}},
	{Key: gpumem.AttrMemoryPoolsSupported, Const: symtab.Const{Name: "CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED", Value: 115}},
	{Key: gpumem.AttrVirtualMemoryManagement, Const: symtab.Const{Name: "CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED", Value: 102}},
	{Key: gpumem.AttrIntegrated, Const: symtab.Const{Name: "CU_DEVICE_ATTRIBUTE_INTEGRATED", Value: 18}},
	{Key: gpumem.AttrPCIBusID, Const: symtab.Const{Name: "CU_DEVICE_ATTRIBUTE_PCI_BUS_ID", Value: 33}},
	{Key: gpumem.AttrPCIDeviceID, Const: symtab.Const{Name: "CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID", Value: 34}},
	{Key: gpumem.AttrClockRateKHz, Const: symtab.Const{Name: "CU_DEVICE_ATTRIBUTE_CLOCK_RATE", Value: 13}},
	{Key: gpumem.AttrMemoryClockRateKHz, Const: symtab.Const{Name: "CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE", Value: 36}},
	{Key: gpumem.AttrGlobalMemoryBusWidth, Const: symtab.Const{Name: "CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH", Value: 37}},
	{Key: gpumem.AttrL2CacheSize, Const: symtab.Const{Name: "CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE", Value: 38}},
	{Key: gpumem.AttrPCIDomainID, Const: symtab.Const{Name: "CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID", Value: 50}},
}

// advices maps gpumem advice to CUmem_advise. CUDA has no coarse-grain
// advice.
var advices = []symtab.Mapping[gpumem.Advice]{
	{Key: gpumem.AdviseSetReadMostly, Const: symtab.Const{Name: "CU_MEM_ADVISE_SET_READ_MOSTLY", Value: 1}},
	{Key: gpumem.AdviseUnsetReadMostly, Const: symtab.Const{Name: "CU_MEM_ADVISE_UNSET_READ_MOSTLY", Value: 2}},
	{Key: gpumem.AdviseSetPreferredLocation, Const: symtab.Const{Name: "CU_MEM_ADVISE_SET_PREFERRED_LOCATION", Value: 3}},
	{Key: gpumem.AdviseUnsetPreferredLocation, Const: symtab.Const{Name: "CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION", Value: 4}},
	{Key: gpumem.AdviseSetAccessedBy, Const: symtab.Const{Name: "CU_MEM_ADVISE_SET_ACCESSED_BY", Value: 5}},
	{Key: gpumem.AdviseUnsetAccessedBy, Const: symtab.Const{Name: "CU_MEM_ADVISE_UNSET_ACCESSED_BY", Value: 6}},
}

// funcAttributes maps gpumem function attributes to CUfunction_attribute.
var funcAttributes = []symtab.Mapping[gpumem.FuncAttribute]{
	{Key: gpumem.FuncMaxThreadsPerBlock, Const: symtab.Const{Name: "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK", Value: 0}},
	{Key: gpumem.FuncSharedSizeBytes, Const: symtab.Const{Name: "CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES", Value: 1}},
	{Key: gpumem.FuncConstSizeBytes, Const: symtab.Const{Name: "CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES", Value: 2}},
	{Key: gpumem.FuncLocalSizeBytes, Const: symtab.Const{Name: "CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES", Value: 3}},
	{Key: gpumem.FuncNumRegs, Const: symtab.Const{Name: "CU_FUNC_ATTRIBUTE_NUM_REGS", Value: 4}},
	{Key: gpumem.FuncPTXVersion, Const: symtab.Const{Name: "CU_FUNC_ATTRIBUTE_PTX_VERSION", Value: 5}},
	{Key: gpumem.FuncBinaryVersion, Const: symtab.Const{Name: "CU_FUNC_ATTRIBUTE_BINARY_VERSION", Value: 6}},
	{Key: gpumem.FuncMaxDynamicSharedSizeBytes, Const: symtab.Const{Name: "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", Value: 8}},
}

// shared are the values the shared implementation passes or interprets,
// under CUDA's names.
var shared = []symtab.Const{
	{Name: "CU_MEM_LOCATION_TYPE_DEVICE", Value: native.LocationTypeDevice},
	{Name: "CU_MEM_LOCATION_TYPE_HOST", Value: native.LocationTypeHost, From: cuda122},
	{Name: "CU_MEM_ALLOCATION_TYPE_PINNED", Value: native.AllocationTypePinned},
	{Name: "CU_MEM_ACCESS_FLAGS_PROT_NONE", Value: native.AccessNone},
	{Name: "CU_MEM_ACCESS_FLAGS_PROT_READ", Value: native.AccessRead},
	{Name: "CU_MEM_ACCESS_FLAGS_PROT_READWRITE", Value: native.AccessReadWrite},
	{Name: "CU_DEVICE_CPU", Value: native.DeviceCPU},
	{Name: "CU_DEVICE_INVALID", Value: native.DeviceInvalid},
	{Name: "CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION", Value: native.RangePreferredLocation},
	{Name: "CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION", Value: native.RangeLastPrefetch},
	{Name: "CU_MEMHOSTALLOC_PORTABLE", Value: native.HostAllocPortable},
	{Name: "CU_MEM_ATTACH_GLOBAL", Value: native.MemAttachGlobal},
	{Name: "CU_MEM_ALLOC_GRANULARITY_MINIMUM", Value: 0},
	{Name: "CU_MEM_ALLOC_GRANULARITY_RECOMMENDED", Value: 1},
	{Name: "CU_STREAM_CAPTURE_MODE_GLOBAL", Value: int64(gpumem.CaptureModeGlobal)},
	{Name: "CU_STREAM_CAPTURE_MODE_THREAD_LOCAL", Value: int64(gpumem.CaptureModeThreadLocal)},
	{Name: "CU_STREAM_CAPTURE_MODE_RELAXED", Value: int64(gpumem.CaptureModeRelaxed)},
	{Name: "CU_STREAM_CAPTURE_STATUS_NONE", Value: int64(gpumem.CaptureNone)},
	{Name: "CU_STREAM_CAPTURE_STATUS_ACTIVE", Value: int64(gpumem.CaptureActive)},
	{Name: "CU_STREAM_CAPTURE_STATUS_INVALIDATED", Value: int64(gpumem.CaptureInvalidated)},
	{Name: "CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES", Value: 1},
	{Name: "CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC", Value: 2},
	{Name: "CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES", Value: 3},
	{Name: "CU_MEMPOOL_ATTR_RELEASE_THRESHOLD", Value: 4},
	{Name: "CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT", Value: 5},
	{Name: "CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH", Value: 6},
	{Name: "CU_MEMPOOL_ATTR_USED_MEM_CURRENT", Value: 7},
	{Name: "CU_MEMPOOL_ATTR_USED_MEM_HIGH", Value: 8},
	{Name: "CU_STREAM_NON_BLOCKING", Value: int64(gpumem.StreamNonBlocking)},
	{Name: "CU_EVENT_BLOCKING_SYNC", Value: int64(gpumem.EventBlockingSync)},
	{Name: "CU_EVENT_DISABLE_TIMING", Value: int64(gpumem.EventDisableTiming)},
	{Name: "CU_USER_OBJECT_NO_DESTRUCTOR_SYNC", Value: native.UserObjectNoDestructSync},
	{Name: "CU_GRAPH_USER_OBJECT_MOVE", Value: native.GraphUserObjectMove},
	{Name: "CU_GET_PROC_ADDRESS_LEGACY_STREAM", Value: procLegacyStream},
	{Name: "CU_GET_PROC_ADDRESS_SUCCESS", Value: procSuccess, From: cuda120},
}

// constants is every vendor value the backend passes or interprets.
func constants() []symtab.Const {
	return symtab.Constants(symtab.CUDA, symtab.Consts(attributes), symtab.Consts(advices), symtab.Consts(funcAttributes), shared)
}

// ABI returns the struct layouts and the constants the backend uses with a
// CUDA driver of version v (1000*major + 10*minor), under cuda.h's names:
// what `gpumem symbols --json` reports for a library of that version,
// computed without loading one.
func ABI(v int) (map[string]gpumem.StructLayout, map[string]int64) {
	return symtab.ABIReport(layouts, constants(), v)
}
