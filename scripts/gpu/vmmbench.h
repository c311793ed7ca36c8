// What the virtual-memory benchmarks of this folder share: the error check,
// the clock, the comparison for qsort, and the set-up (device 0's primary
// context made current; a property for pinned device memory and read-write
// access on device 0), and the set-up and tear-down of a move of chunks
// between two reservations (ghostbench.c, overlapbench.c). Included by
// ghostbench.c, grantbench.c, grantscale.c, overlapbench.c, sizecost.c and
// vmmbench.c, compiled with nvcc beside them.
#ifndef GPUMEM_VMMBENCH_H
#define GPUMEM_VMMBENCH_H
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CK(x) do { CUresult r = (x); if (r) { const char* s; cuGetErrorName(r, &s); fprintf(stderr, "%s: %s\n", #x, s); exit(1);} } while (0)

// now is the monotonic clock in microseconds.
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }

// cmp orders doubles for qsort.
static int cmp(const void* a, const void* b) { double x = *(const double*)a, y = *(const double*)b; return x < y ? -1 : x > y; }

// vmm_setup makes device 0's primary context current and fills prop and acc;
// it returns the context.
static CUcontext vmm_setup(CUmemAllocationProp* prop, CUmemAccessDesc* acc) {
  CUdevice dev; CUcontext ctx;
  CK(cuInit(0)); CK(cuDeviceGet(&dev, 0)); CK(cuDevicePrimaryCtxRetain(&ctx, dev)); CK(cuCtxSetCurrent(ctx));
  *prop = (CUmemAllocationProp){0};
  prop->type = CU_MEM_ALLOCATION_TYPE_PINNED; prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE; prop->location.id = 0;
  *acc = (CUmemAccessDesc){0};
  acc->location = prop->location; acc->flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return ctx;
}
// vmm_mapgrant maps the n handles hs, sz bytes each, one after another from
// va, and grants acc over all of them in one call.
static inline void vmm_mapgrant(CUdeviceptr va, const CUmemGenericAllocationHandle* hs, int n, size_t sz, const CUmemAccessDesc* acc) {
  for (int i = 0; i < n; i++) CK(cuMemMap(va + i * sz, sz, 0, hs[i], 0));
  CK(cuMemSetAccess(va, n * sz, acc, 1));
}

// vmm_move_begin sets up a move of n chunks of sz bytes: two reservations of
// n chunks each (*from, *to), n chunks created, mapped at *from with access
// and written there.
static inline void vmm_move_begin(CUdeviceptr* from, CUdeviceptr* to, CUmemGenericAllocationHandle* hs, int n, size_t sz,
                                  const CUmemAllocationProp* prop, const CUmemAccessDesc* acc) {
  CK(cuMemAddressReserve(from, n * sz, 0, 0, 0));
  CK(cuMemAddressReserve(to, n * sz, 0, 0, 0));
  for (int i = 0; i < n; i++) CK(cuMemCreate(&hs[i], sz, prop, 0));
  vmm_mapgrant(*from, hs, n, sz, acc);
  CK(cuMemsetD8(*from, 1, n * sz)); CK(cuCtxSynchronize());
}

// vmm_move_end undoes vmm_move_begin once the chunks are mapped at to only:
// unmaps them, releases them and frees both reservations.
static inline void vmm_move_end(CUdeviceptr from, CUdeviceptr to, CUmemGenericAllocationHandle* hs, int n, size_t sz) {
  CK(cuMemUnmap(to, n * sz));
  for (int i = 0; i < n; i++) CK(cuMemRelease(hs[i]));
  CK(cuMemAddressFree(from, n * sz));
  CK(cuMemAddressFree(to, n * sz));
}
#endif
