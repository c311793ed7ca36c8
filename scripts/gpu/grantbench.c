// Access grants over many mappings: one cuMemSetAccess over a run of N
// freshly mapped chunks against one call per chunk, for fresh handles and
// for handles unmapped elsewhere and mapped again (a move), with 20 MiB and
// 2 MiB chunks, rounds interleaved. Prints the median µs per chunk of each.
// On the GPU machine: nvcc -O2 -o /tmp/grantbench scripts/gpu/grantbench.c -lcuda && /tmp/grantbench
#include "vmmbench.h"
enum { N = 64, ROUNDS = 7 };
static CUmemAccessDesc acc;
// grant maps hs at va (n chunks of sz) and grants access, in one call or per chunk; returns µs per chunk of the grants.
static double grant(CUdeviceptr va, CUmemGenericAllocationHandle* hs, int n, size_t sz, int per) {
  for (int i = 0; i < n; i++) CK(cuMemMap(va + i * sz, sz, 0, hs[i], 0));
  double t0 = now();
  if (per) for (int i = 0; i < n; i++) CK(cuMemSetAccess(va + i * sz, sz, &acc, 1));
  else CK(cuMemSetAccess(va, n * sz, &acc, 1));
  double t1 = now();
  CK(cuMemsetD8(va, 1, n * sz)); CK(cuCtxSynchronize());
  return (t1 - t0) / n;
}
int main() {
  CUmemAllocationProp prop;
  vmm_setup(&prop, &acc);
  size_t sizes[2] = {20u << 20, 2u << 20};
  const char* names[4] = {"fresh, one call", "fresh, per chunk", "moved, one call", "moved, per chunk"};
  for (int si = 0; si < 2; si++) {
    size_t sz = sizes[si];
    double r[4][ROUNDS];
    for (int round = 0; round < ROUNDS; round++) {
      for (int k = 0; k < 4; k++) {
        int mode = (k + round) % 4; // rotate the order from round to round
        int per = mode & 1, moved = mode >> 1;
        CUdeviceptr va; CK(cuMemAddressReserve(&va, 2 * N * sz, 0, 0, 0));
        CUmemGenericAllocationHandle hs[N];
        for (int i = 0; i < N; i++) CK(cuMemCreate(&hs[i], sz, &prop, 0));
        double us;
        if (moved) {
          grant(va, hs, N, sz, 0); // mapped and granted once at the start of the range
          CK(cuMemUnmap(va, N * sz));
          us = grant(va + N * sz, hs, N, sz, per); // then moved to its second half
          CK(cuMemUnmap(va + N * sz, N * sz));
        } else {
          us = grant(va, hs, N, sz, per);
          CK(cuMemUnmap(va, N * sz));
        }
        for (int i = 0; i < N; i++) CK(cuMemRelease(hs[i]));
        CK(cuMemAddressFree(va, 2 * N * sz));
        r[mode][round] = us;
      }
    }
    for (int m = 0; m < 4; m++) {
      qsort(r[m], ROUNDS, sizeof(double), cmp);
      printf("chunks of %2zu MiB, %d of them, %-17s: grant %.1f us a chunk (median of %d; fastest %.1f)\n", sz >> 20, N, names[m], r[m][ROUNDS / 2], ROUNDS, r[m][0]);
    }
  }
  return 0;
}
