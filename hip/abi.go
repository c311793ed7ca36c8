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

// attr is one device attribute's translation.
type attr struct {
	a gpumem.Attribute
	symtab.Const
}

// attributes maps gpumem attributes to hipDeviceAttribute_t (numbered
// differently from CUDA's enum).
var attributes = []attr{
	{gpumem.AttrComputeCapabilityMajor, symtab.Const{Name: "hipDeviceAttributeComputeCapabilityMajor", Value: 23}},
	{gpumem.AttrComputeCapabilityMinor, symtab.Const{Name: "hipDeviceAttributeComputeCapabilityMinor", Value: 61}},
	{gpumem.AttrMultiprocessorCount, symtab.Const{Name: "hipDeviceAttributeMultiprocessorCount", Value: 63}},
	{gpumem.AttrUnifiedAddressing, symtab.Const{Name: "hipDeviceAttributeUnifiedAddressing", Value: 85}},
	{gpumem.AttrManagedMemory, symtab.Const{Name: "hipDeviceAttributeManagedMemory", Value: 24}},
	{gpumem.AttrConcurrentManagedAccess, symtab.Const{Name: "hipDeviceAttributeConcurrentManagedAccess", Value: 9}},
	{gpumem.AttrPageableMemoryAccess, symtab.Const{Name: "hipDeviceAttributePageableMemoryAccess", Value: 65}},
	{gpumem.AttrCanMapHostMemory, symtab.Const{Name: "hipDeviceAttributeCanMapHostMemory", Value: 3}},
	{gpumem.AttrMemoryPoolsSupported, symtab.Const{Name: "hipDeviceAttributeMemoryPoolsSupported", Value: 88}},
	{gpumem.AttrVirtualMemoryManagement, symtab.Const{Name: "hipDeviceAttributeVirtualMemoryManagementSupported", Value: 89, From: ABI53}},
	{gpumem.AttrIntegrated, symtab.Const{Name: "hipDeviceAttributeIntegrated", Value: 16}},
	{gpumem.AttrPCIBusID, symtab.Const{Name: "hipDeviceAttributePciBusId", Value: 67}},
	{gpumem.AttrPCIDeviceID, symtab.Const{Name: "hipDeviceAttributePciDeviceId", Value: 68}},
	{gpumem.AttrClockRateKHz, symtab.Const{Name: "hipDeviceAttributeClockRate", Value: 5}},
	{gpumem.AttrMemoryClockRateKHz, symtab.Const{Name: "hipDeviceAttributeMemoryClockRate", Value: 60}},
	{gpumem.AttrGlobalMemoryBusWidth, symtab.Const{Name: "hipDeviceAttributeMemoryBusWidth", Value: 59}},
	{gpumem.AttrL2CacheSize, symtab.Const{Name: "hipDeviceAttributeL2CacheSize", Value: 19}},
}

// attribute translates a at the runtime version v: an attribute the
// version's enum lacks has no translation (not supported).
func attribute(v int, a gpumem.Attribute) (int32, bool) {
	for i := range attributes {
		if attributes[i].a == a {
			return int32(attributes[i].Value), attributes[i].In(v)
		}
	}
	return 0, false
}

// advices maps gpumem advice to hipMemoryAdvise (with the coarse-grain advice
// 100 and 101, which CUDA lacks).
var advices = []struct {
	a gpumem.Advice
	symtab.Const
}{
	{gpumem.AdviseSetReadMostly, symtab.Const{Name: "hipMemAdviseSetReadMostly", Value: 1}},
	{gpumem.AdviseUnsetReadMostly, symtab.Const{Name: "hipMemAdviseUnsetReadMostly", Value: 2}},
	{gpumem.AdviseSetPreferredLocation, symtab.Const{Name: "hipMemAdviseSetPreferredLocation", Value: 3}},
	{gpumem.AdviseUnsetPreferredLocation, symtab.Const{Name: "hipMemAdviseUnsetPreferredLocation", Value: 4}},
	{gpumem.AdviseSetAccessedBy, symtab.Const{Name: "hipMemAdviseSetAccessedBy", Value: 5}},
	{gpumem.AdviseUnsetAccessedBy, symtab.Const{Name: "hipMemAdviseUnsetAccessedBy", Value: 6}},
	{gpumem.AdviseSetCoarseGrain, symtab.Const{Name: "hipMemAdviseSetCoarseGrain", Value: 100}},
	{gpumem.AdviseUnsetCoarseGrain, symtab.Const{Name: "hipMemAdviseUnsetCoarseGrain", Value: 101}},
}

func advice(a gpumem.Advice) (int32, bool) {
	for _, x := range advices {
		if x.a == a {
			return int32(x.Value), true
		}
	}
	return 0, false
}

// funcAttributes maps gpumem function attributes to hipFunction_attribute
// (the enum counts from 0 in CUDA's order).
var funcAttributes = [...]symtab.Const{
	gpumem.FuncMaxThreadsPerBlock:        {Name: "HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK", Value: 0},
	gpumem.FuncSharedSizeBytes:           {Name: "HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES", Value: 1},
	gpumem.FuncConstSizeBytes:            {Name: "HIP_FUNC_ATTRIBUTE_CONST_SIZE_BYTES", Value: 2},
	gpumem.FuncLocalSizeBytes:            {Name: "HIP_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES", Value: 3},
	gpumem.FuncNumRegs:                   {Name: "HIP_FUNC_ATTRIBUTE_NUM_REGS", Value: 4},
	gpumem.FuncPTXVersion:                {Name: "HIP_FUNC_ATTRIBUTE_PTX_VERSION", Value: 5},
	gpumem.FuncBinaryVersion:             {Name: "HIP_FUNC_ATTRIBUTE_BINARY_VERSION", Value: 6},
	gpumem.FuncMaxDynamicSharedSizeBytes: {Name: "HIP_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", Value: 8},
}

func funcAttribute(a gpumem.FuncAttribute) (int32, bool) {
	if a < 0 || int(a) >= len(funcAttributes) {
		return 0, false
	}
	return int32(funcAttributes[a].Value), true
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
	var out []symtab.Const
	for _, a := range attributes {
		out = append(out, a.Const)
	}
	for _, a := range advices {
		out = append(out, a.Const)
	}
	out = append(out, funcAttributes[:]...)
	out = append(out, shared...)
	for _, s := range symtab.Statuses[symtab.HIP].Statuses {
		out = append(out, symtab.Const{Name: s.Name, Value: int64(s.Code)})
	}
	return out
}

// ABI returns the struct layouts and the constants the backend uses with a
// HIP runtime of version v (major*10^7 + minor*10^5 + patch), under HIP's
// names: what `gpumem symbols --json` reports for a library of that version,
// computed without loading one.
func ABI(v int) (map[string]gpumem.StructLayout, map[string]int64) {
	return symtab.ABIReport(layouts, constants(), v)
}
