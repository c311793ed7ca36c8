// What one stream-ordered allocation+free pair costs from C, by how it is
// called: cuMemAllocAsync (what cudaMallocAsync reaches) against
// cuMemAllocFromPoolAsync on the default pool (what asyncpool calls), with
// the context made current before each call, checked before each call, or
// with no context or another context current on the calling thread. Each
// variant is first checked: the allocation must come from the default pool
// and be usable on the stream. Variants rotate from round to round; prints
// the median and fastest ns a pair of each.
// On the GPU machine: nvcc -O2 -o /tmp/poolcall scripts/gpu/poolcall.c -lcuda && /tmp/poolcall
#include "vmmbench.h"
#include <string.h>

enum { L = 100000, ROUNDS = 9, NV = 6 };
static const char* names[NV] = {
    "cuMemAllocAsync", "FromPool", "FromPool, cuCtxSetCurrent each call",
    "FromPool, cuCtxGetCurrent each call", "FromPool, no context current", "FromPool, another context current"};
static CUcontext primary, other;
static CUmemoryPool pool;
static CUstream s;

// enter makes the thread's context what variant v runs with.
static void enter(int v) {
  if (v == 4) CK(cuCtxSetCurrent(NULL));
  else if (v == 5) CK(cuCtxSetCurrent(other));
  else CK(cuCtxSetCurrent(primary));
}

// pair makes one allocation+free of n bytes as variant v does.
static CUresult pair(int v, size_t n) {
  CUdeviceptr p;
  CUresult r;
  if (v == 2) CK(cuCtxSetCurrent(primary));
  if (v == 3) { CUcontext c; CK(cuCtxGetCurrent(&c)); if (c != primary) CK(cuCtxSetCurrent(primary)); }
  r = v == 0 ? cuMemAllocAsync(&p, n, s) : cuMemAllocFromPoolAsync(&p, n, pool, s);
  if (r) return r;
  if (v == 2) CK(cuCtxSetCurrent(primary));
  if (v == 3) { CUcontext c; CK(cuCtxGetCurrent(&c)); if (c != primary) CK(cuCtxSetCurrent(primary)); }
  return cuMemFreeAsync(p, s);
}

// check reports whether variant v allocates from the default pool memory
// that the stream can write, and frees it.
static int check(int v) {
  CUdeviceptr p;
  enter(v);
  CUresult r = v == 0 ? cuMemAllocAsync(&p, 1 << 20, s) : cuMemAllocFromPoolAsync(&p, 1 << 20, pool, s);
  CK(cuCtxSetCurrent(primary));
  if (r) { const char* e; cuGetErrorName(r, &e); printf("%-40s: allocation refused: %s\n", names[v], e); return 0; }
  CUmemoryPool got = 0;
  CK(cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p));
  CK(cuMemsetD8Async(p, 7, 1 << 20, s));
  unsigned char b[16];
  CK(cuMemcpyDtoHAsync(b, p + (1 << 19), sizeof b, s));
  CK(cuStreamSynchronize(s));
  enter(v);
  r = cuMemFreeAsync(p, s);
  CK(cuCtxSetCurrent(primary));
  if (r) { const char* e; cuGetErrorName(r, &e); printf("%-40s: free refused: %s\n", names[v], e); return 0; }
  CK(cuStreamSynchronize(s));
  int ok = got == pool && b[0] == 7 && b[15] == 7;
  printf("%-40s: %s (pool %s, contents %s)\n", names[v], ok ? "works" : "WRONG", got == pool ? "default" : "other",
         b[0] == 7 ? "written" : "not written");
  return ok;
}

int main(void) {
  CUmemAllocationProp prop;
  CUmemAccessDesc acc;
  primary = vmm_setup(&prop, &acc);
  CUdevice dev;
  CK(cuDeviceGet(&dev, 0));
#if CUDA_VERSION >= 13000
  CK(cuCtxCreate(&other, NULL, 0, dev));
#else
  CK(cuCtxCreate(&other, 0, dev));
#endif
  CK(cuCtxSetCurrent(primary));
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuDeviceGetDefaultMemPool(&pool, dev));
  cuuint64_t thr = ~0ull;
  CK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr));
  int ok[NV];
  for (int v = 0; v < NV; v++) ok[v] = check(v);
  double r[NV][ROUNDS];
  for (int round = 0; round < ROUNDS; round++) {
    for (int k = 0; k < NV; k++) {
      int v = (k + round) % NV;
      if (!ok[v]) continue;
      enter(v);
      double t0 = now();
      for (int i = 0; i < L; i++) CK(pair(v, 1 << 20));
      r[v][round] = (now() - t0) * 1e3 / L;
      CK(cuCtxSetCurrent(primary));
      CK(cuStreamSynchronize(s));
    }
  }
  for (int v = 0; v < NV; v++) {
    if (!ok[v]) continue;
    qsort(r[v], ROUNDS, sizeof(double), cmp);
    printf("%-40s: %.1f ns a pair (median of %d rounds; fastest %.1f)\n", names[v], r[v][ROUNDS / 2], ROUNDS, r[v][0]);
  }
  return 0;
}
