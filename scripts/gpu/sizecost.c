// What one mapping costs by its size: create, map, grant access, unmap and
// release one physical allocation of 2 MiB to 1 GiB, each step timed, seven
// interleaved rounds; prints the median µs of each step per size. Tells
// whether fewer, larger mappings would cost less than many 20 MiB chunks.
// On the GPU machine: nvcc -O2 -o /tmp/sizecost scripts/gpu/sizecost.c -lcuda && /tmp/sizecost
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define CK(x) do { CUresult r = (x); if (r) { const char* s; cuGetErrorName(r, &s); fprintf(stderr, "%s: %s\n", #x, s); exit(1);} } while (0)
static double now() { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }
static int cmp(const void* a, const void* b) { double x = *(const double*)a, y = *(const double*)b; return x < y ? -1 : x > y; }
enum { NS = 6, ROUNDS = 7, REPS = 4 };
int main() {
  CUdevice dev; CUcontext ctx;
  CK(cuInit(0)); CK(cuDeviceGet(&dev, 0)); CK(cuDevicePrimaryCtxRetain(&ctx, dev)); CK(cuCtxSetCurrent(ctx));
  CUmemAllocationProp prop = {0};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED; prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE; prop.location.id = 0;
  CUmemAccessDesc acc = {0};
  acc.location = prop.location; acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  size_t mib[NS] = {2, 20, 64, 256, 1024, 4096};
  const char* steps[5] = {"create", "map", "grant", "unmap", "release"};
  static double r[NS][5][ROUNDS];
  CUdeviceptr va; CK(cuMemAddressReserve(&va, (size_t)4096 << 20, 0, 0, 0));
  for (int round = 0; round < ROUNDS; round++) {
    for (int k = 0; k < NS; k++) {
      int si = (k + round) % NS;
      size_t sz = mib[si] << 20;
      double t[5] = {0};
      for (int rep = 0; rep < REPS; rep++) {
        CUmemGenericAllocationHandle h;
        double t0 = now(); CK(cuMemCreate(&h, sz, &prop, 0));
        double t1 = now(); CK(cuMemMap(va, sz, 0, h, 0));
        double t2 = now(); CK(cuMemSetAccess(va, sz, &acc, 1));
        double t3 = now();
        CK(cuMemsetD8(va, 1, sz)); CK(cuCtxSynchronize());
        double t4 = now(); CK(cuMemUnmap(va, sz));
        double t5 = now(); CK(cuMemRelease(h));
        double t6 = now();
        t[0] += t1 - t0; t[1] += t2 - t1; t[2] += t3 - t2; t[3] += t5 - t4; t[4] += t6 - t5;
      }
      for (int s = 0; s < 5; s++) r[si][s][round] = t[s] / REPS;
    }
  }
  for (int si = 0; si < NS; si++) {
    printf("%5zu MiB:", mib[si]);
    for (int s = 0; s < 5; s++) {
      qsort(r[si][s], ROUNDS, sizeof(double), cmp);
      printf("  %s %.1f", steps[s], r[si][s][ROUNDS / 2]);
    }
    printf("  (us, medians of %d rounds of %d)\n", ROUNDS, REPS);
  }
  return 0;
}
