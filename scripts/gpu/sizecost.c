// What one mapping costs by its size: create, map, grant access, unmap and
// release one physical allocation of 2 MiB to 1 GiB, each step timed, seven
// interleaved rounds; prints the median µs of each step per size. Tells
// whether fewer, larger mappings would cost less than many 20 MiB chunks.
// On the GPU machine: nvcc -O2 -o /tmp/sizecost scripts/gpu/sizecost.c -lcuda && /tmp/sizecost
#include "vmmbench.h"
enum { NS = 6, ROUNDS = 7, REPS = 4 };
int main() {
  CUmemAllocationProp prop;
  CUmemAccessDesc acc;
  vmm_setup(&prop, &acc);
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
