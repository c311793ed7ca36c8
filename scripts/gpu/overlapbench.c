// Moving chunks of physical memory to another address: unmap the old
// address, map the new one and grant access there, in that order on one
// thread (sequential), against mapping and granting the new address while
// the handles are still mapped at the old one and unmapping the old address
// on a second thread (overlapped). Prints the median µs per chunk of the
// foreground work and of the whole move for each, and of the foreground
// alone (old address unmapped beforehand, untimed). Rounds interleaved.
// On the GPU machine: nvcc -O2 -o /tmp/overlapbench scripts/gpu/overlapbench.c -lcuda -lpthread && /tmp/overlapbench
#include "vmmbench.h"
#include <pthread.h>
enum { N = 32, ROUNDS = 9 };
static const size_t SZ = 20u << 20;
static CUcontext ctx;
struct job { CUdeviceptr va; size_t size; double t1; };
static void* unmapper(void* p) {
  struct job* j = p;
  CK(cuCtxSetCurrent(ctx));
  CK(cuMemUnmap(j->va, j->size));
  j->t1 = now();
  return NULL;
}
int main() {
  CUmemAllocationProp prop;
  CUmemAccessDesc acc;
  ctx = vmm_setup(&prop, &acc);
  const char* names[3] = {"sequential", "overlapped", "foreground alone"};
  double fg[3][ROUNDS], all[3][ROUNDS];
  for (int round = 0; round < ROUNDS; round++) {
    for (int k = 0; k < 3; k++) {
      int mode = (k + round) % 3;
      CUdeviceptr r1, r2;
      CUmemGenericAllocationHandle hs[N];
      vmm_move_begin(&r1, &r2, hs, N, SZ, &prop, &acc);
      double t0, t1, t2;
      if (mode == 0) {
        t0 = now();
        CK(cuMemUnmap(r1, N * SZ));
        vmm_mapgrant(r2, hs, N, SZ, &acc);
        t1 = t2 = now();
      } else if (mode == 1) {
        struct job j = {r1, N * SZ, 0};
        pthread_t th;
        t0 = now();
        pthread_create(&th, NULL, unmapper, &j);
        vmm_mapgrant(r2, hs, N, SZ, &acc);
        t1 = now();
        pthread_join(th, NULL);
        t2 = j.t1 > t1 ? j.t1 : t1;
      } else {
        CK(cuMemUnmap(r1, N * SZ));
        t0 = now();
        vmm_mapgrant(r2, hs, N, SZ, &acc);
        t1 = t2 = now();
      }
      CK(cuMemsetD8(r2, 2, N * SZ)); CK(cuCtxSynchronize());
      fg[mode][round] = (t1 - t0) / N;
      all[mode][round] = (t2 - t0) / N;
      vmm_move_end(r1, r2, hs, N, SZ);
    }
  }
  for (int m = 0; m < 3; m++) {
    qsort(fg[m], ROUNDS, sizeof(double), cmp);
    qsort(all[m], ROUNDS, sizeof(double), cmp);
    printf("%d chunks of 20 MiB, %-16s: foreground %.1f us a chunk, whole move %.1f (medians of %d; fastest %.1f / %.1f)\n",
           N, names[m], fg[m][ROUNDS / 2], all[m][ROUNDS / 2], ROUNDS, fg[m][0], all[m][0]);
  }
  return 0;
}
