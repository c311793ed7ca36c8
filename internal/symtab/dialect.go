package symtab

// DialectRow is one difference between CUDA C++ and HIP C++ that the
// project's common kernel dialect papers over, in the manner of hipify's
// tables: the common spelling (a macro kernels write), what it is in each
// vendor's dialect, and why. rtc renders the rows into the header it
// prepends to every source (one #define per row and vendor); an empty
// spelling leaves the macro undefined for that vendor.
type DialectRow struct {
	// Common is the macro kernels write, with its parameters:
	// "GPUMEM_SHFL_DOWN(mask, v, delta)".
	Common string
	// Spelling is the macro's body per vendor.
	Spelling [NumVendors]string
	Notes    string
}

// DialectHeaderName is the name the rendered header goes by in compiler
// logs and docs.
const DialectHeaderName = "gpumem_dialect.h"

// Dialect is the table of dialect differences, in the order the header
// defines them.
var Dialect = []DialectRow{
	{"GPUMEM_CUDA", [NumVendors]string{CUDA: "1"}, "defined when compiling with NVRTC"},
	{"GPUMEM_HIP", [NumVendors]string{HIP: "1"}, "defined when compiling with hipRTC"},
	{"GPUMEM_WARP_SIZE", [NumVendors]string{CUDA: "32", HIP: "warpSize"},
		"a warp is 32 lanes on NVIDIA; a wavefront is 64 on CDNA (gfx9) and 32 or 64 on RDNA: on HIP it is read at run time, never a constant"},
	{"GPUMEM_FULL_MASK", [NumVendors]string{CUDA: "0xffffffffu", HIP: "0xffffffffffffffffull"},
		"every lane of the warp: warp masks are 32-bit on CUDA and 64-bit on HIP"},
	{"GPUMEM_SHFL(mask, v, lane)", [NumVendors]string{CUDA: "__shfl_sync(mask, v, lane)", HIP: "__shfl(v, lane)"},
		"CUDA 9 removed the maskless __shfl; HIP before ROCm 6.2 has only the maskless form (its lanes run in lockstep)"},
	{"GPUMEM_SHFL_DOWN(mask, v, delta)", [NumVendors]string{CUDA: "__shfl_down_sync(mask, v, delta)", HIP: "__shfl_down(v, delta)"},
		"as GPUMEM_SHFL"},
	{"GPUMEM_SHFL_XOR(mask, v, lanemask)", [NumVendors]string{CUDA: "__shfl_xor_sync(mask, v, lanemask)", HIP: "__shfl_xor(v, lanemask)"},
		"as GPUMEM_SHFL"},
	{"GPUMEM_BALLOT(mask, pred)", [NumVendors]string{CUDA: "__ballot_sync(mask, pred)", HIP: "__ballot(pred)"},
		"the result is 32-bit on CUDA, 64-bit on HIP"},
	{"GPUMEM_SYNCWARP(mask)", [NumVendors]string{CUDA: "__syncwarp(mask)", HIP: "__builtin_amdgcn_wave_barrier()"},
		"HIP before ROCm 6.2 has no __syncwarp; a wavefront executes in lockstep and the barrier only orders the compiler"},
	{"GPUMEM_LAUNCH_BOUNDS(threads)", [NumVendors]string{CUDA: "__launch_bounds__(threads)", HIP: "__launch_bounds__(threads)"},
		"one argument only: CUDA's second is min blocks per SM, HIP's is min waves per EU"},
	{"GPUMEM_RESTRICT", [NumVendors]string{CUDA: "__restrict__", HIP: "__restrict__"}, "same spelling"},
	{"GPUMEM_INLINE", [NumVendors]string{CUDA: "__device__ __forceinline__", HIP: "__device__ __forceinline__"}, "same spelling"},
	{"GPUMEM_ATOMIC_ADD(p, v)", [NumVendors]string{CUDA: "atomicAdd(p, v)", HIP: "atomicAdd(p, v)"},
		"same spelling; HIP's float atomicAdd is a CAS loop unless -munsafe-fp-atomics (gfx90a: fine-grained memory loses hardware float atomics)"},
	{"GPUMEM_SIZE_T", [NumVendors]string{CUDA: "unsigned long long", HIP: "unsigned long long"},
		"NVRTC has no <cstddef> and hipRTC's size_t comes from its own runtime header: kernels name sizes with this; 64-bit on both (LP64)"},
}
