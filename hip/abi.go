package hip

import (
	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/native"
	"github.com/gpumem/gpumem/internal/symtab"
)

// HIP runtime versions (major*10^7 + minor*10^5 + patch, as
// hipRuntimeGetVersion says) at which the ABI the backend speaks changed,
// read from ROCm/HIP's hip_runtime_api.h at each tag and from Debian's
// libamdhip64-dev 5.2.3, 5.7.1, 6.4.3 and 7.2.4. Each is the first version
// with the new form.
const (
	// ABI53: hipMemAllocationProp takes the CUDA-like layout (type at 0,
	// location at 8; rocm-5.2.3 has compressionType first and type at 16);
	// hipDeviceAttributeVirtualMemoryManagementSupported (89),
	// hipUserObjectNoDestructorSync and hipGraphUserObjectMove appear.
	ABI53 = 50300000
	// ABI62: hipMemPoolProps gains maxSize at 24 (6.0 and 6.1 still have
	// reserved bytes there that the runtime never reads).
	ABI62 = 60200000
	// ABI70: the first version whose virtual memory API PyTorch trusts for
	// expandable segments; before it the allocators' VMM-backed defaults are
	// off (see VirtualMemoryDefault).
	ABI70 = 70000000
	// ABI60: hipGetDeviceProperties becomes a macro for
	// hipGetDevicePropertiesR0600, whose hipDeviceProp_tR0600 is laid out
	// anew (gcnArchName at 1160 of 1472 bytes; before, 396 of 792).
	ABI60 = 60000000
)

// layouts are the structs the backend writes (and the one it reads), in
// every form it knows.
var layouts = []symtab.Layout{
	{Struct: "hipMemAllocationProp", Size: 32, Fields: []symtab.Field{
		{Name: "compressionType", Offset: 0}, {Name: "location.type", Offset: 4}, {Name: "location.id", Offset: 8},
		{Name: "requestedHandleType", Offset: 12}, {Name: "type", Offset: 16}, {Name: "usage", Offset: 20},
		{Name: "win32HandleMetaData", Offset: 24}}},
	{Struct: "hipMemAllocationProp", From: ABI53, Size: 32, Fields: []symtab.Field{
		{Name: "type", Offset: 0}, {Name: "requestedHandleType", Offset: 4}, {Name: "location.type", Offset: 8},
		{Name: "location.id", Offset: 12}, {Name: "win32HandleMetaData", Offset: 16}, {Name: "allocFlags", Offset: 24}}},
	{Struct: "hipMemPoolProps", Size: native.PoolPropsSize, Fields: []symtab.Field{
		{Name: "allocType", Offset: 0}, {Name: "handleTypes", Offset: 4}, {Name: "location.type", Offset: 8},
		{Name: "location.id", Offset: 12}, {Name: "win32SecurityAttributes", Offset: 16}, {Name: "reserved", Offset: 24}}},
	{Struct: "hipMemPoolProps", From: ABI62, Size: native.PoolPropsSize, Fields: []symtab.Field{
		{Name: "allocType", Offset: 0}, {Name: "handleTypes", Offset: 4}, {Name: "location.type", Offset: 8},
		{Name: "location.id", Offset: 12}, {Name: "win32SecurityAttributes", Offset: 16}, {Name: "maxSize", Offset: 24},
		{Name: "reserved", Offset: 32}}},
	{Struct: "hipMemAccessDesc", Size: native.AccessDescSize, Fields: []symtab.Field{
		{Name: "location.type", Offset: 0}, {Name: "location.id", Offset: 4}, {Name: "flags", Offset: 8}}},
	{Struct: "hipMemLocation", Size: 8, Fields: []symtab.Field{{Name: "type", Offset: 0}, {Name: "id", Offset: 4}}},
	// Read, not written: the device's properties, for its gcnArchName
	// (char[256]), the target a compiler for the device takes.
	{Struct: "hipDeviceProp_t", Size: 792, Fields: []symtab.Field{{Name: "gcnArchName", Offset: 396}}},
	{Struct: "hipDeviceProp_t", From: ABI60, Size: 1472, Fields: []symtab.Field{{Name: "gcnArchName", Offset: 1160}}},
}

// attributes maps gpumem attributes to hipDeviceAttribute_t (numbered
// differently from CUDA's enum).
var attributes = []symtab.Mapping[gpumem.Attribute]{
	{Key: gpumem.AttrComputeCapabilityMajor, Const: symtab.Const{Name: "hipDeviceAttributeComputeCapabilityMajor", Value: 23}},
	{Key: gpumem.AttrComputeCapabilityMinor, Const: symtab.Const{Name: "hipDeviceAttributeComputeCapabilityMinor", Value: 61}},
	{Key: gpumem.AttrMultiprocessorCount, Const: symtab.Const{Name: "hipDeviceAttributeMultiprocessorCount", Value: 63}},
	{Key: gpumem.AttrUnifiedAddressing, Const: symtab.Const{Name: "hipDeviceAttributeUnifiedAddressing", Value: 85}},
	{Key: gpumem.AttrManagedMemory, Const: symtab.Const{Name: "hipDeviceAttributeManagedMemory", Value: 24}},
	{Key: gpumem.AttrConcurrentManagedAccess, Const: symtab.Const{Name: "hipDeviceAttributeConcurrentManagedAccess", Value: 9}},
	{Key: gpumem.AttrPageableMemoryAccess, Const: symtab.Const{Name: "hipDeviceAttributePageableMemoryAccess", Value: 65}},
	{Key: gpumem.AttrCanMapHostMemory, Const: symtab.Const{Name: "hipDeviceAttributeCanMapHostMemory", Value: 3}},
	{Key: gpumem.AttrMemoryPoolsSupported, Const: symtab.Const{Name: "hipDeviceAttributeMemoryPoolsSupported", Value: 88}},
	{Key: gpumem.AttrVirtualMemoryManagement, Const: symtab.Const{Name: "hipDeviceAttributeVirtualMemoryManagementSupported", Value: 89, From: ABI53}},
	{Key: gpumem.AttrIntegrated, Const: symtab.Const{Name: "hipDeviceAttributeIntegrated", Value: 16}},
	{Key: gpumem.AttrPCIBusID, Const: symtab.Const{Name: "hipDeviceAttributePciBusId", Value: 67}},
	{Key: gpumem.AttrPCIDeviceID, Const: symtab.Const{Name: "hipDeviceAttributePciDeviceId", Value: 68}},
	{Key: gpumem.AttrClockRateKHz, Const: symtab.Const{Name: "hipDeviceAttributeClockRate", Value: 5}},
	{Key: gpumem.AttrMemoryClockRateKHz, Const: symtab.Const{Name: "hipDeviceAttributeMemoryClockRate", Value: 60}},
	{Key: gpumem.AttrGlobalMemoryBusWidth, Const: symtab.Const{Name: "hipDeviceAttributeMemoryBusWidth", Value: 59}},
	{Key: gpumem.AttrL2CacheSize, Const: symtab.Const{Name: "hipDeviceAttributeL2CacheSize", Value: 19}},
	{Key: gpumem.AttrPCIDomainID, Const: symtab.Const{Name: "hipDeviceAttributePciDomainID", Value: 69}},
}

// advices maps gpumem advice to hipMemoryAdvise (with the coarse-grain advice
// 100 and 101, which CUDA lacks).
var advices = []symtab.Mapping[gpumem.Advice]{
	{Key: gpumem.AdviseSetReadMostly, Const: symtab.Const{Name: "hipMemAdviseSetReadMostly", Value: 1}},
	{Key: gpumem.AdviseUnsetReadMostly, Const: symtab.Const{Name: "hipMemAdviseUnsetReadMostly", Value: 2}},
	{Key: gpumem.AdviseSetPreferredLocation, Const: symtab.Const{Name: "hipMemAdviseSetPreferredLocation", Value: 3}},
	{Key: gpumem.AdviseUnsetPreferredLocation, Const: symtab.Const{Name: "hipMemAdviseUnsetPreferredLocation", Value: 4}},
	{Key: gpumem.AdviseSetAccessedBy, Const: symtab.Const{Name: "hipMemAdviseSetAccessedBy", Value: 5}},
	{Key: gpumem.AdviseUnsetAccessedBy, Const: symtab.Const{Name: "hipMemAdviseUnsetAccessedBy", Value: 6}},
	{Key: gpumem.AdviseSetCoarseGrain, Const: symtab.Const{Name: "hipMemAdviseSetCoarseGrain", Value: 100}},
	{Key: gpumem.AdviseUnsetCoarseGrain, Const: symtab.Const{Name: "hipMemAdviseUnsetCoarseGrain", Value: 101}},
}

// funcAttributes maps gpumem function attributes to hipFunction_attribute
// (the enum counts from 0 in CUDA's order).
var funcAttributes = []symtab.Mapping[gpumem.FuncAttribute]{
	{Key: gpumem.FuncMaxThreadsPerBlock, Const: symtab.Const{Name: "HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK", Value: 0}},
	{Key: gpumem.FuncSharedSizeBytes, Const: symtab.Const{Name: "HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES", Value: 1}},
	{Key: gpumem.FuncConstSizeBytes, Const: symtab.Const{Name: "HIP_FUNC_ATTRIBUTE_CONST_SIZE_BYTES", Value: 2}},
	{Key: gpumem.FuncLocalSizeBytes, Const: symtab.Const{Name: "HIP_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES", Value: 3}},
	{Key: gpumem.FuncNumRegs, Const: symtab.Const{Name: "HIP_FUNC_ATTRIBUTE_NUM_REGS", Value: 4}},
	{Key: gpumem.FuncPTXVersion, Const: symtab.Const{Name: "HIP_FUNC_ATTRIBUTE_PTX_VERSION", Value: 5}},
	{Key: gpumem.FuncBinaryVersion, Const: symtab.Const{Name: "HIP_FUNC_ATTRIBUTE_BINARY_VERSION", Value: 6}},
	{Key: gpumem.FuncMaxDynamicSharedSizeBytes, Const: symtab.Const{Name: "HIP_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", Value: 8}},
}

// shared are the values the shared implementation (internal/native) passes
// or interprets, under HIP's names.
var shared = []symtab.Const{
	{Name: "hipMemLocationTypeDevice", Value: native.LocationTypeDevice},
	{Name: "hipMemAllocationTypePinned", Value: native.AllocationTypePinned},
	{Name: "hipMemAccessFlagsProtNone", Value: native.AccessNone},
	{Name: "hipMemAccessFlagsProtRead", Value: native.AccessRead},
	{Name: "hipMemAccessFlagsProtReadWrite", Value: native.AccessReadWrite},
	{Name: "hipCpuDeviceId", Value: native.DeviceCPU},
	{Name: "hipInvalidDeviceId", Value: native.DeviceInvalid},
	{Name: "hipMemRangeAttributePreferredLocation", Value: native.RangePreferredLocation},
	{Name: "hipMemRangeAttributeLastPrefetchLocation", Value: native.RangeLastPrefetch},
	{Name: "hipMemcpyDefault", Value: native.MemcpyDefault},
	{Name: "hipHostMallocPortable", Value: native.HostAllocPortable},
	{Name: "hipMemAttachGlobal", Value: native.MemAttachGlobal},
	{Name: "hipMemAllocationGranularityMinimum", Value: 0},
	{Name: "hipMemAllocationGranularityRecommended", Value: 1},
	{Name: "hipStreamCaptureModeGlobal", Value: int64(gpumem.CaptureModeGlobal)},
	{Name: "hipStreamCaptureModeThreadLocal", Value: int64(gpumem.CaptureModeThreadLocal)},
	{Name: "hipStreamCaptureModeRelaxed", Value: int64(gpumem.CaptureModeRelaxed)},
	{Name: "hipStreamCaptureStatusNone", Value: int64(gpumem.CaptureNone)},
	{Name: "hipStreamCaptureStatusActive", Value: int64(gpumem.CaptureActive)},
	{Name: "hipStreamCaptureStatusInvalidated", Value: int64(gpumem.CaptureInvalidated)},
	{Name: "hipMemPoolReuseFollowEventDependencies", Value: 1},
	{Name: "hipMemPoolReuseAllowOpportunistic", Value: 2},
	{Name: "hipMemPoolReuseAllowInternalDependencies", Value: 3},
	{Name: "hipMemPoolAttrReleaseThreshold", Value: 4},
	{Name: "hipMemPoolAttrReservedMemCurrent", Value: 5},
	{Name: "hipMemPoolAttrReservedMemHigh", Value: 6},
	{Name: "hipMemPoolAttrUsedMemCurrent", Value: 7},
	{Name: "hipMemPoolAttrUsedMemHigh", Value: 8},
	{Name: "hipStreamNonBlocking", Value: int64(gpumem.StreamNonBlocking)},
	{Name: "hipEventBlockingSync", Value: int64(gpumem.EventBlockingSync)},
	{Name: "hipEventDisableTiming", Value: int64(gpumem.EventDisableTiming)},
	{Name: "hipUserObjectNoDestructorSync", Value: native.UserObjectNoDestructSync, From: ABI53},
	{Name: "hipGraphUserObjectMove", Value: native.GraphUserObjectMove, From: ABI53},
	{Name: "hipErrorNotReady", Value: native.StatusNotReady},
	{Name: "hipErrorPeerAccessAlreadyEnabled", Value: native.StatusPeerAlreadyEnabled},
	{Name: "hipErrorNotInitialized", Value: native.StatusNotInitialized},
	{Name: "hipErrorDeinitialized", Value: native.StatusDeinitialized},
}

// constants is every vendor value the backend passes or interprets.
func constants() []symtab.Const {
	return symtab.Constants(symtab.HIP, symtab.Consts(attributes), symtab.Consts(advices), symtab.Consts(funcAttributes), shared)
}

// ABI returns the struct layouts and the constants the backend uses with a
// HIP runtime of version v (major*10^7 + minor*10^5 + patch), under HIP's
// names: what `gpumem symbols --json` reports for a library of that version,
// computed without loading one.
func ABI(v int) (map[string]gpumem.StructLayout, map[string]int64) {
	return symtab.ABIReport(layouts, constants(), v)
}
