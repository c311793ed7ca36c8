// Costs of cuMemAlloc/cuMemFree against the virtual memory calls (reserve, create, map, access, a
// 208 MiB growth, unmap, release) for 20 MiB, 256 MiB and 1320 MiB segments, four times each.
// On the GPU machine: nvcc -O2 -o /tmp/vmmbench scripts/gpu/vmmbench.c -lcuda && /tmp/vmmbench
#include "vmmbench.h"
int main() {
  CUmemAllocationProp prop;
  CUmemAccessDesc acc;
  vmm_setup(&prop, &acc);
  size_t sizes[] = {20u << 20, 256u << 20, 1320ull << 20};
  for (int si = 0; si < 3; si++) {
    size_t n = sizes[si], g = 208ull << 20;
    for (int rep = 0; rep < 4; rep++) {
      CUdeviceptr p; double t0 = now(); CK(cuMemAlloc(&p, n)); double t1 = now();
      CK(cuMemsetD8(p, 1, n)); CK(cuCtxSynchronize());
      double t2 = now(); CK(cuMemFree(p)); double t3 = now();
      CUdeviceptr va; CUmemGenericAllocationHandle h, h2;
      double v0 = now(); CK(cuMemAddressReserve(&va, 4 * n, 0, 0, 0)); double v1 = now();
      CK(cuMemCreate(&h, n, &prop, 0)); double v2 = now();
      CK(cuMemMap(va, n, 0, h, 0)); double v3 = now();
      CK(cuMemSetAccess(va, n, &acc, 1)); double v4 = now();
      CK(cuMemsetD8(va, 1, n)); CK(cuCtxSynchronize());
      double w0 = now(); CK(cuMemCreate(&h2, g, &prop, 0)); CK(cuMemMap(va + n, g, 0, h2, 0)); CK(cuMemSetAccess(va + n, g, &acc, 1)); double w1 = now();
      CK(cuMemsetD8(va, 2, n + g)); CK(cuCtxSynchronize());
      double u0 = now(); CK(cuMemUnmap(va, n + g)); double u1 = now(); CK(cuMemRelease(h)); CK(cuMemRelease(h2)); double u2 = now(); CK(cuMemAddressFree(va, 4 * n)); double u3 = now();
      printf("size %5zu MiB: cuMemAlloc %.1f us cuMemFree %.1f us | reserve %.1f create %.1f map %.1f access %.1f | grow 208MiB %.1f | unmap %.1f release %.1f addrfree %.1f\n",
             n >> 20, t1 - t0, t3 - t2, v1 - v0, v2 - v1, v3 - v2, v4 - v3, w1 - w0, u1 - u0, u2 - u1, u3 - u2);
    }
  }
  return 0;
}
