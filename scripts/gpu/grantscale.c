// Does the cost of mapping and granting access depend on the size of the
// virtual reservation or on how many mappings are live? Maps N chunks of
// 20 MiB one by one (map, then grant that chunk) into a reservation of
// exactly N chunks or of 280 GiB (what an expandable segment reserves on an
// H200: twice the device), with 0 or L other chunks already mapped and
// granted in that reservation, rounds interleaved; prints the median µs
// per chunk of each case.
// On the GPU machine: nvcc -O2 -o /tmp/grantscale scripts/gpu/grantscale.c -lcuda && /tmp/grantscale
#include "vmmbench.h"
enum { N = 32, L = 384, ROUNDS = 7 };
static const size_t SZ = 20u << 20;
int main() {
  CUmemAllocationProp prop;
  CUmemAccessDesc acc;
  vmm_setup(&prop, &acc);
  const char* names[4] = {"small reservation, none live", "280 GiB reservation, none live",
                          "small reservation, 384 live", "280 GiB reservation, 384 live"};
  double r[4][ROUNDS];
  CUmemGenericAllocationHandle* live = malloc(sizeof(*live) * L);
  for (int round = 0; round < ROUNDS; round++) {
    for (int k = 0; k < 4; k++) {
      int mode = (k + round) % 4;
      int big = mode & 1, withLive = mode >> 1;
      size_t span = big ? (size_t)280 << 30 : (size_t)(N + (withLive ? L : 0)) * SZ;
      CUdeviceptr va; CK(cuMemAddressReserve(&va, span, 0, 0, 0));
      int nl = withLive ? L : 0;
      for (int i = 0; i < nl; i++) {
        CK(cuMemCreate(&live[i], SZ, &prop, 0));
        CK(cuMemMap(va + i * SZ, SZ, 0, live[i], 0));
        CK(cuMemSetAccess(va + i * SZ, SZ, &acc, 1));
      }
      CUmemGenericAllocationHandle hs[N];
      for (int i = 0; i < N; i++) CK(cuMemCreate(&hs[i], SZ, &prop, 0));
      CUdeviceptr at = va + (size_t)nl * SZ; // just past the live ones
      double t0 = now();
      for (int i = 0; i < N; i++) {
        CK(cuMemMap(at + i * SZ, SZ, 0, hs[i], 0));
        CK(cuMemSetAccess(at + i * SZ, SZ, &acc, 1));
      }
      double t1 = now();
      r[mode][round] = (t1 - t0) / N;
      CK(cuMemUnmap(at, N * SZ));
      for (int i = 0; i < N; i++) CK(cuMemRelease(hs[i]));
      if (nl) CK(cuMemUnmap(va, nl * SZ));
      for (int i = 0; i < nl; i++) CK(cuMemRelease(live[i]));
      CK(cuMemAddressFree(va, span));
    }
  }
  for (int m = 0; m < 4; m++) {
    qsort(r[m], ROUNDS, sizeof(double), cmp);
    printf("%-32s: map and grant %.1f us a chunk (median of %d; fastest %.1f)\n", names[m], r[m][ROUNDS / 2], ROUNDS, r[m][0]);
  }
  return 0;
}
