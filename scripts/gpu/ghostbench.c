// Moving chunks of physical memory to another address, as expandable
// segments move free chunks when they grow: unmap the old address, then map
// the new one and grant access there (a move that unmaps), against mapping
// and granting the new address while the handles stay mapped at the old one
// (a move that leaves a ghost), and against the map and grant alone with
// the old address unmapped beforehand, untimed. Prints the median µs per
// chunk of each, rounds interleaved, and checks that a write through the new
// address reads back through the ghost (one physical memory, two addresses).
// On the GPU machine: nvcc -O2 -o /tmp/ghostbench scripts/gpu/ghostbench.c -lcuda && /tmp/ghostbench
#include "vmmbench.h"
enum { N = 32, ROUNDS = 9 };
static const size_t SZ = 20u << 20;
int main() {
  CUmemAllocationProp prop;
  CUmemAccessDesc acc;
  vmm_setup(&prop, &acc);
  const char* names[3] = {"unmap, map, grant", "map, grant (ghost)", "map, grant alone"};
  double t[3][ROUNDS];
  for (int round = 0; round < ROUNDS; round++) {
    for (int k = 0; k < 3; k++) {
      int mode = (k + round) % 3;
      CUdeviceptr r1, r2;
      CUmemGenericAllocationHandle hs[N];
      vmm_move_begin(&r1, &r2, hs, N, SZ, &prop, &acc);
      if (mode == 2) CK(cuMemUnmap(r1, N * SZ));
      double t0 = now();
      if (mode == 0) CK(cuMemUnmap(r1, N * SZ));
      vmm_mapgrant(r2, hs, N, SZ, &acc);
      t[mode][round] = (now() - t0) / N;
      CK(cuMemsetD8(r2, 2, N * SZ)); CK(cuCtxSynchronize());
      if (mode == 1) {
        unsigned char last;
        CK(cuMemcpyDtoH(&last, r1 + N * SZ - 1, 1));
        if (last != 2) { fprintf(stderr, "the ghost reads %d, want 2\n", last); return 1; }
        CK(cuMemUnmap(r1, N * SZ));
      }
      vmm_move_end(r1, r2, hs, N, SZ);
    }
  }
  for (int m = 0; m < 3; m++) {
    qsort(t[m], ROUNDS, sizeof(double), cmp);
    printf("%d chunks of 20 MiB, %-20s: %.1f us a chunk (median of %d; fastest %.1f, slowest %.1f)\n",
           N, names[m], t[m][ROUNDS / 2], ROUNDS, t[m][0], t[m][ROUNDS - 1]);
  }
  printf("a write through the new address read back through the ghost: ok\n");
  return 0;
}
