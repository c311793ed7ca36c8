// What the virtual-memory benchmarks of this folder share: the error check,
// the clock, the comparison for qsort, and the set-up (device 0's primary
// context made current; a property for pinned device memory and read-write
// access on device 0). Included by ghostbench.c, grantbench.c,
// grantscale.c, overlapbench.c, sizecost.c and vmmbench.c, compiled with nvcc beside them.
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
#endif
