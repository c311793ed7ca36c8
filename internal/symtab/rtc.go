package symtab

// The run-time compilers: NVRTC (libnvrtc) on NVIDIA and hipRTC (inside
// libamdhip64 in ROCm 5, libhiprtc from ROCm 6) on AMD. Their C APIs are one
// API spelled twice: hiprtc.h copies nvrtc.h function for function, with the
// same signatures and the same result codes (0 success ... 11 internal
// error). The signatures the project calls, from nvrtc.h (CUDA 11.2-13) and
// hip/hiprtc.h (ROCm 5.2):
//
//	const char *nvrtcGetErrorString(nvrtcResult result);
//	nvrtcResult nvrtcVersion(int *major, int *minor);
//	nvrtcResult nvrtcGetNumSupportedArchs(int *numArchs);            // 11.2+
//	nvrtcResult nvrtcGetSupportedArchs(int *supportedArchs);         // 11.2+
//	nvrtcResult nvrtcCreateProgram(nvrtcProgram *prog, const char *src, const char *name,
//	                               int numHeaders, const char *const *headers,
//	                               const char *const *includeNames);
//	nvrtcResult nvrtcDestroyProgram(nvrtcProgram *prog);
//	nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int numOptions, const char *const *options);
//	nvrtcResult nvrtcGetPTXSize(nvrtcProgram prog, size_t *ptxSizeRet);
//	nvrtcResult nvrtcGetPTX(nvrtcProgram prog, char *ptx);
//	nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, size_t *cubinSizeRet); // 11.1+
//	nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char *cubin);              // 11.1+
//	nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t *logSizeRet);
//	nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char *log);
//	nvrtcResult nvrtcAddNameExpression(nvrtcProgram prog, const char *const name_expression);
//	nvrtcResult nvrtcGetLoweredName(nvrtcProgram prog, const char *const name_expression,
//	                                const char **lowered_name);
//
//	hipError_t hipRuntimeGetVersion(int *runtimeVersion);  // libamdhip64 (ROCm 5)
//
// hipRTC's code is a code object (an ELF shared object for amdgcn), read
// with hiprtcGetCodeSize/hiprtcGetCode in the rows where NVRTC reads PTX.
//
// Every row's argument words (Args) are the same for both vendors; the
// header tests check them against nvrtc.h (CUDA 11.8, 12.5) and
// hip/hiprtc.h (ROCm 5.2 to 7.2).

// Operation ids of the RTC table, in table order.
const (
	RTCGetErrorString Op = iota
	RTCVersion
	RTCGetNumSupportedArchs
	RTCGetSupportedArchs
	RTCCreateProgram
	RTCDestroyProgram
	RTCCompileProgram
	RTCGetProgramLogSize
	RTCGetProgramLog
	RTCGetCodeSize
	RTCGetCode
	RTCGetCUBINSize
	RTCGetCUBIN
	RTCAddNameExpression
	RTCGetLoweredName
	RTCRuntimeVersion

	NumRTCOps // the number of rows of the RTC table
)

// RTCTableNames are the names the symbols command gives each vendor's
// column of the RTC table (--table nvrtc, --table hiprtc).
var RTCTableNames = [NumVendors]string{CUDA: "nvrtc", HIP: "hiprtc"}

// RTC is the table of the run-time compilers: NVRTC's column for CUDA,
// hipRTC's for HIP.
var RTC = Table{Name: "rtc", Rows: rtcRows[:]}

func rtcRow(id Op, op, nv string, nvVer int, hip string, req int, args Arity, notes string) Row {
	return row(id, op, nv, nvVer, hip, req, args, notes)
}

// rtcRows is RTC's rows, indexed by the RTC op ids. ABI is NVRTC's version
// (1000*major+10*minor) that introduced the signature.
var rtcRows = [NumRTCOps]Row{
	rtcRow(RTCGetErrorString, "ErrorString", "nvrtcGetErrorString", 7000, "hiprtcGetErrorString", both, Args(1), "static strings; the error messages name the code with it"),
	rtcRow(RTCVersion, "Version", "nvrtcVersion", 7000, "hiprtcVersion", both, Args(2), "int major, int minor: the compiler version the cache key and the target table use"),
	rtcRow(RTCGetNumSupportedArchs, "NumSupportedArchs", "nvrtcGetNumSupportedArchs", 11020, "", none, Args(1), "NVRTC 11.2+: how many archs GetSupportedArchs writes"),
	rtcRow(RTCGetSupportedArchs, "SupportedArchs", "nvrtcGetSupportedArchs", 11020, "", none, Args(1), "NVRTC 11.2+: the archs (75, 80, 90...) this NVRTC accepts; else the targets table by version"),
	rtcRow(RTCCreateProgram, "CreateProgram", "nvrtcCreateProgram", 7000, "hiprtcCreateProgram", both, Args(6), "source and name NUL-terminated; no headers passed (the dialect header is prepended)"),
	rtcRow(RTCDestroyProgram, "DestroyProgram", "nvrtcDestroyProgram", 7000, "hiprtcDestroyProgram", both, Args(1), "takes the program's address"),
	rtcRow(RTCCompileProgram, "CompileProgram", "nvrtcCompileProgram", 7000, "hiprtcCompileProgram", both, Args(3), "options as an array of NUL-terminated strings; status 6 is a compile error"),
	rtcRow(RTCGetProgramLogSize, "ProgramLogSize", "nvrtcGetProgramLogSize", 7000, "hiprtcGetProgramLogSize", both, Args(2), "size includes the NUL"),
	rtcRow(RTCGetProgramLog, "ProgramLog", "nvrtcGetProgramLog", 7000, "hiprtcGetProgramLog", both, Args(2), ""),
	rtcRow(RTCGetCodeSize, "CodeSize", "nvrtcGetPTXSize", 7000, "hiprtcGetCodeSize", both, Args(2), "NVRTC: PTX with its NUL; hipRTC: the code object"),
	rtcRow(RTCGetCode, "Code", "nvrtcGetPTX", 7000, "hiprtcGetCode", both, Args(2), "NVRTC: PTX (compiled for compute_XX); hipRTC: the code object"),
	rtcRow(RTCGetCUBINSize, "CUBINSize", "nvrtcGetCUBINSize", 11010, "", none, Args(2), "NVRTC 11.1+: a cubin when compiled for sm_XX (Request.Binary)"),
	rtcRow(RTCGetCUBIN, "CUBIN", "nvrtcGetCUBIN", 11010, "", none, Args(2), "NVRTC 11.1+"),
	rtcRow(RTCAddNameExpression, "AddNameExpression", "nvrtcAddNameExpression", 8000, "hiprtcAddNameExpression", both, Args(2), "before compiling: templated kernels to instantiate"),
	rtcRow(RTCGetLoweredName, "LoweredName", "nvrtcGetLoweredName", 8000, "hiprtcGetLoweredName", both, Args(3), "after compiling: the mangled name, owned by the program (copied before Destroy)"),
	rtcRow(RTCRuntimeVersion, "RuntimeVersion", "", 0, "hipRuntimeGetVersion", none, Args(1), "ROCm 5, where hipRTC is inside libamdhip64: hiprtcVersion answers 9.0 there, the runtime's 50221153 names the release the targets table needs"),
}

// RTC result codes, shared by nvrtcResult and hiprtcResult.
const (
	RTCSuccess            = 0
	RTCErrorOutOfMemory   = 1
	RTCErrorInvalidInput  = 3
	RTCErrorInvalidOption = 5
	RTCErrorCompilation   = 6
)
