/*
 * A stand-in for the two CUDA 12.2+ driver functions that take a
 * CUmemLocation BY VALUE, with cuda.h's exact parameter lists:
 *
 *   CUresult cuMemAdvise_v2(CUdeviceptr devPtr, size_t count,
 *                           CUmem_advise advice, CUmemLocation location);
 *   CUresult cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count,
 *                                  CUmemLocation location, unsigned int flags,
 *                                  CUstream hStream);
 *
 * Each records what it received; locbyval_received copies the record out.
 * The make-current function the backend calls first records its argument
 * too. Built by .ci/arm64.sh with the host's gcc and with
 * aarch64-linux-gnu-gcc, and loaded by internal/native's
 * TestLocationByValueC (GPUMEM_LOCBYVAL_LIB names the library).
 */
#include <stddef.h>
#include <stdint.h>

typedef unsigned long long CUdeviceptr;
typedef struct CUstream_st *CUstream;
typedef int CUresult;
typedef int CUmem_advise;
typedef int CUmemLocationType;
typedef struct CUmemLocation_st {
	CUmemLocationType type;
	int id;
} CUmemLocation;

/* Shared with the Go test: every field is 8 bytes, so no padding. */
struct received {
	int64_t fn; /* 1: cuMemAdvise_v2, 2: cuMemPrefetchAsync_v2 */
	int64_t calls;
	int64_t ctx; /* argument of the make-current call before it */
	int64_t dptr;
	int64_t count;
	int64_t advice; /* cuMemAdvise_v2 only */
	int64_t loc_type;
	int64_t loc_id;
	int64_t flags;  /* cuMemPrefetchAsync_v2 only */
	int64_t stream; /* cuMemPrefetchAsync_v2 only */
};

static struct received last;
static int64_t calls;
static int64_t current;

CUresult locbyval_set_current(void *ctx)
{
	current = (int64_t)(uintptr_t)ctx;
	return 0;
}

CUresult cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUmemLocation location)
{
	struct received r = {0};
	r.fn = 1;
	r.calls = ++calls;
	r.ctx = current;
	r.dptr = (int64_t)devPtr;
	r.count = (int64_t)count;
	r.advice = advice;
	r.loc_type = location.type;
	r.loc_id = location.id;
	last = r;
	return 0;
}

CUresult cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location, unsigned int flags, CUstream hStream)
{
	struct received r = {0};
	r.fn = 2;
	r.calls = ++calls;
	r.ctx = current;
	r.dptr = (int64_t)devPtr;
	r.count = (int64_t)count;
	r.loc_type = location.type;
	r.loc_id = location.id;
	r.flags = flags;
	r.stream = (int64_t)(uintptr_t)hStream;
	last = r;
	return 0;
}

void locbyval_received(struct received *out)
{
	*out = last;
}

/* The struct's layout as this compiler sees it: the test checks it is two
 * 4-byte fields, type first, 8 bytes in all. */
int locbyval_layout(int64_t *out)
{
	out[0] = (int64_t)sizeof(CUmemLocation);
	out[1] = (int64_t)offsetof(CUmemLocation, type);
	out[2] = (int64_t)offsetof(CUmemLocation, id);
	return 0;
}
