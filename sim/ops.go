package sim

// method numbers every Backend method (and the simulator's own Launch) so that
// call counters and fault injection index a fixed array instead of a map.
type method int

const (
	mName method = iota
	mLibrary
	mVersion
	mErrorName
	mClose
	mDeviceCount
	mDeviceName
	mDeviceAttribute
	mMemInfo
	mDeviceSynchronize
	mMalloc
	mFree
	mMallocHost
	mFreeHost
	mMallocManaged
	mAdvise
	mPrefetch
	mRangeLocation
	mMemcpy
	mMemcpyAsync
	mMemcpyPeerAsync
	mMemset
	mMemsetAsync
	mCopyToDevice
	mCopyFromDevice
	mStreamCreate
	mStreamDestroy
	mStreamSynchronize
	mStreamQuery
	mStreamWaitEvent
	mStreamPriorityRange
	mEventCreate
	mEventDestroy
	mEventRecord
	mEventQuery
	mEventSynchronize
	mEventElapsed
	mLaunchHostFunc
	mDefaultMemPool
	mMemPoolCreate
	mMemPoolDestroy
	mMemPoolSetAttribute
	mMemPoolGetAttribute
	mMemPoolTrimTo
	mMemPoolSetAccess
	mMemPoolGetAccess
	mMallocAsync
	mMallocFromPoolAsync
	mFreeAsync
	mStreamBeginCapture
	mStreamEndCapture
	mStreamCaptureInfo
	mGraphInstantiate
	mGraphLaunch
	mGraphExecDestroy
	mGraphDestroy
	mUserObjectCreate
	mUserObjectRelease
	mGraphRetainUserObject
	mMemGranularity
	mMemAddressReserve
	mMemAddressFree
	mMemCreate
	mMemRelease
	mMemMap
	mMemUnmap
	mMemSetAccess
	mCanAccessPeer
	mEnablePeerAccess
	mDisablePeerAccess
	mLaunch
	nMethods
)

// methodInfo is the Go method name and the CUDA driver symbol the simulator
// names in its errors, so that a sim error reads like the driver's.
var methodInfo = [nMethods]struct{ name, symbol string }{
	mName:                  {"Name", "Name"},
	mLibrary:               {"Library", "Library"},
	mVersion:               {"Version", "cuDriverGetVersion"},
	mErrorName:             {"ErrorName", "cuGetErrorName"},
	mClose:                 {"Close", "Close"},
	mDeviceCount:           {"DeviceCount", "cuDeviceGetCount"},
	mDeviceName:            {"DeviceName", "cuDeviceGetName"},
	mDeviceAttribute:       {"DeviceAttribute", "cuDeviceGetAttribute"},
	mMemInfo:               {"MemInfo", "cuMemGetInfo_v2"},
	mDeviceSynchronize:     {"DeviceSynchronize", "cuCtxSynchronize"},
	mMalloc:                {"Malloc", "cuMemAlloc_v2"},
	mFree:                  {"Free", "cuMemFree_v2"},
	mMallocHost:            {"MallocHost", "cuMemHostAlloc"},
	mFreeHost:              {"FreeHost", "cuMemFreeHost"},
	mMallocManaged:         {"MallocManaged", "cuMemAllocManaged"},
	mAdvise:                {"Advise", "cuMemAdvise_v2"},
	mPrefetch:              {"Prefetch", "cuMemPrefetchAsync_v2"},
	mRangeLocation:         {"RangeLocation", "cuMemRangeGetAttribute"},
	mMemcpy:                {"Memcpy", "cuMemcpy"},
	mMemcpyAsync:           {"MemcpyAsync", "cuMemcpyAsync"},
	mMemcpyPeerAsync:       {"MemcpyPeerAsync", "cuMemcpyPeerAsync"},
	mMemset:                {"Memset", "cuMemsetD8_v2"},
	mMemsetAsync:           {"MemsetAsync", "cuMemsetD8Async"},
	mCopyToDevice:          {"CopyToDevice", "cuMemcpyHtoD_v2"},
	mCopyFromDevice:        {"CopyFromDevice", "cuMemcpyDtoH_v2"},
	mStreamCreate:          {"StreamCreate", "cuStreamCreateWithPriority"},
	mStreamDestroy:         {"StreamDestroy", "cuStreamDestroy_v2"},
	mStreamSynchronize:     {"StreamSynchronize", "cuStreamSynchronize"},
	mStreamQuery:           {"StreamQuery", "cuStreamQuery"},
	mStreamWaitEvent:       {"StreamWaitEvent", "cuStreamWaitEvent"},
	mStreamPriorityRange:   {"StreamPriorityRange", "cuCtxGetStreamPriorityRange"},
	mEventCreate:           {"EventCreate", "cuEventCreate"},
	mEventDestroy:          {"EventDestroy", "cuEventDestroy_v2"},
	mEventRecord:           {"EventRecord", "cuEventRecord"},
	mEventQuery:            {"EventQuery", "cuEventQuery"},
	mEventSynchronize:      {"EventSynchronize", "cuEventSynchronize"},
	mEventElapsed:          {"EventElapsed", "cuEventElapsedTime_v2"},
	mLaunchHostFunc:        {"LaunchHostFunc", "cuLaunchHostFunc"},
	mDefaultMemPool:        {"DefaultMemPool", "cuDeviceGetDefaultMemPool"},
	mMemPoolCreate:         {"MemPoolCreate", "cuMemPoolCreate"},
	mMemPoolDestroy:        {"MemPoolDestroy", "cuMemPoolDestroy"},
	mMemPoolSetAttribute:   {"MemPoolSetAttribute", "cuMemPoolSetAttribute"},
	mMemPoolGetAttribute:   {"MemPoolGetAttribute", "cuMemPoolGetAttribute"},
	mMemPoolTrimTo:         {"MemPoolTrimTo", "cuMemPoolTrimTo"},
	mMemPoolSetAccess:      {"MemPoolSetAccess", "cuMemPoolSetAccess"},
	mMemPoolGetAccess:      {"MemPoolGetAccess", "cuMemPoolGetAccess"},
	mMallocAsync:           {"MallocAsync", "cuMemAllocAsync"},
	mMallocFromPoolAsync:   {"MallocFromPoolAsync", "cuMemAllocFromPoolAsync"},
	mFreeAsync:             {"FreeAsync", "cuMemFreeAsync"},
	mStreamBeginCapture:    {"StreamBeginCapture", "cuStreamBeginCapture_v2"},
	mStreamEndCapture:      {"StreamEndCapture", "cuStreamEndCapture"},
	mStreamCaptureInfo:     {"StreamCaptureInfo", "cuStreamGetCaptureInfo_v3"},
	mGraphInstantiate:      {"GraphInstantiate", "cuGraphInstantiateWithFlags"},
	mGraphLaunch:           {"GraphLaunch", "cuGraphLaunch"},
	mGraphExecDestroy:      {"GraphExecDestroy", "cuGraphExecDestroy"},
	mGraphDestroy:          {"GraphDestroy", "cuGraphDestroy"},
	mUserObjectCreate:      {"UserObjectCreate", "cuUserObjectCreate"},
	mUserObjectRelease:     {"UserObjectRelease", "cuUserObjectRelease"},
	mGraphRetainUserObject: {"GraphRetainUserObject", "cuGraphRetainUserObject"},
	mMemGranularity:        {"MemGranularity", "cuMemGetAllocationGranularity"},
	mMemAddressReserve:     {"MemAddressReserve", "cuMemAddressReserve"},
	mMemAddressFree:        {"MemAddressFree", "cuMemAddressFree"},
	mMemCreate:             {"MemCreate", "cuMemCreate"},
	mMemRelease:            {"MemRelease", "cuMemRelease"},
	mMemMap:                {"MemMap", "cuMemMap"},
	mMemUnmap:              {"MemUnmap", "cuMemUnmap"},
	mMemSetAccess:          {"MemSetAccess", "cuMemSetAccess"},
	mCanAccessPeer:         {"CanAccessPeer", "cuDeviceCanAccessPeer"},
	mEnablePeerAccess:      {"EnablePeerAccess", "cuCtxEnablePeerAccess"},
	mDisablePeerAccess:     {"DisablePeerAccess", "cuCtxDisablePeerAccess"},
	mLaunch:                {"Launch", "cuLaunchKernel"},
}

var methodByName = func() map[string]method {
	m := make(map[string]method, nMethods)
	for i := method(0); i < nMethods; i++ {
		m[methodInfo[i].name] = i
	}
	return m
}()

// naturalCode is the CUDA status an injected fault with a nil error reports:
// out of memory for the methods that allocate, invalid value for the rest.
func naturalCode(m method) int {
	switch m {
	case mMalloc, mMallocHost, mMallocManaged, mMallocAsync, mMallocFromPoolAsync, mMemCreate:
		return codeOutOfMemory
	case mDeviceCount:
		return codeNoDevice
	}
	return codeInvalidValue
}
