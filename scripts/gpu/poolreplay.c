// poolreplay: a trace replayed straight through the CUDA driver's
// stream-ordered pool, several times in one process, to separate what the
// first pass pays for growing the pool from the steady state.
//
//   nvcc -O2 -o poolreplay poolreplay.c -lcuda
//   poolreplay TRACE [pool|async] [REPEATS]
//
// TRACE is an uncompressed trace of ../shared/traces' format. Mode pool (the
// default) calls cuMemAllocFromPoolAsync on the device's default pool, as
// gpumem's asyncpool does; async calls cuMemAllocAsync, as the anchor's
// cudaMallocAsync does. Frees are cuMemFreeAsync on the allocation's stream.
// The pool keeps its memory between passes (release threshold: all), so
// every pass after the first runs on a grown pool. Prints one JSON line a
// pass.
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char* s_; cuGetErrorName(r_, &s_); \
  fprintf(stderr, "%s:%d %s -> %s\n", __FILE__, __LINE__, #x, s_); exit(1);} } while (0)

typedef struct { int alloc; long id; size_t size; int stream; } Ev;

static double now_ns(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }

int main(int argc, char** argv) {
  if (argc < 2) { fprintf(stderr, "usage: poolreplay TRACE [pool|async] [REPEATS]\n"); return 2; }
  const char* mode = argc > 2 ? argv[2] : "pool";
  int reps = argc > 3 ? atoi(argv[3]) : 1;
  int async = strcmp(mode, "async") == 0;
  if (!async && strcmp(mode, "pool") != 0) { fprintf(stderr, "poolreplay: unknown mode %s\n", mode); return 2; }
  if (reps < 1) reps = 1;
  size_t cap = 1 << 16, n = 0;
  Ev* evs = malloc(cap * sizeof(Ev));
  FILE* f = fopen(argv[1], "r");
  if (!f) { perror(argv[1]); return 1; }
  char op[4]; long id; size_t sz; int st;
  while (fscanf(f, "%3s %ld", op, &id) == 2) {
    if (n == cap) { cap *= 2; evs = realloc(evs, cap * sizeof(Ev)); }
    if (op[0] == 'a') {
      if (fscanf(f, "%zu %d", &sz, &st) != 2) { fprintf(stderr, "poolreplay: bad line %zu\n", n + 1); return 1; }
      evs[n++] = (Ev){1, id, sz, st};
    } else {
      if (fscanf(f, "%d", &st) != 1) { fprintf(stderr, "poolreplay: bad line %zu\n", n + 1); return 1; }
      evs[n++] = (Ev){0, id, 0, st};
    }
  }
  fclose(f);
  CK(cuInit(0));
  CUdevice dev; CK(cuDeviceGet(&dev, 0));
  CUcontext ctx; CK(cuDevicePrimaryCtxRetain(&ctx, dev)); CK(cuCtxSetCurrent(ctx));
  CUstream streams[4];
  for (int i = 0; i < 4; i++) CK(cuStreamCreate(&streams[i], CU_STREAM_NON_BLOCKING));
  long maxid = 0;
  for (size_t i = 0; i < n; i++) if (evs[i].id > maxid) maxid = evs[i].id;
  CUdeviceptr* ptr = calloc(maxid + 1, sizeof(CUdeviceptr));
  int* owner = calloc(maxid + 1, sizeof(int));
  CUmemoryPool pool; CK(cuDeviceGetDefaultMemPool(&pool, dev));
  cuuint64_t keep = ~0ull; CK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
  for (int r = 0; r < reps; r++) {
    long pairs = 0;
    double t0 = now_ns();
    for (size_t i = 0; i < n; i++) {
      Ev* e = &evs[i];
      CUstream s = streams[e->stream & 3];
      if (e->alloc) {
        CUresult rc = async ? cuMemAllocAsync(&ptr[e->id], e->size, s) : cuMemAllocFromPoolAsync(&ptr[e->id], e->size, pool, s);
        if (rc != CUDA_SUCCESS) { fprintf(stderr, "poolreplay: allocation of %zu failed (%d)\n", e->size, rc); return 1; }
        owner[e->id] = e->stream & 3;
        pairs++;
      } else if (ptr[e->id]) {
        CK(cuMemFreeAsync(ptr[e->id], streams[owner[e->id]]));
        ptr[e->id] = 0;
      }
    }
    double t1 = now_ns();
    for (long i = 0; i <= maxid; i++)
      if (ptr[i]) { CK(cuMemFreeAsync(ptr[i], streams[owner[i]])); ptr[i] = 0; }
    for (int i = 0; i < 4; i++) CK(cuStreamSynchronize(streams[i]));
    printf("{\"tool\":\"poolreplay\",\"trace\":\"%s\",\"mode\":\"%s\",\"pass\":%d,\"pairs\":%ld,\"ns_per_pair\":%.1f}\n",
           argv[1], mode, r + 1, pairs, (t1 - t0) / pairs);
  }
  return 0;
}
