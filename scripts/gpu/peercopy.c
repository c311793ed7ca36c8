/* peercopy: the reference figure for a 1 GiB peer copy between devices 0
 * and 1 through the CUDA driver API (cuMemcpyPeerAsync), timed with events,
 * best of 5 in each direction. Build: nvcc -O2 -o peercopy peercopy.c -lcuda
 * Prints "peer_GBps 0to1 X" and "peer_GBps 1to0 Y" (1 GB = 1e9 bytes). */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char *n_ = "?"; \
	cuGetErrorName(r_, &n_); fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, n_); exit(1); } } while (0)

int main(void) {
	const size_t n = (size_t)1 << 30;
	CUdevice dev[2];
	CUcontext ctx[2];
	CUdeviceptr buf[2];
	int count = 0, can01 = 0, can10 = 0;
	CK(cuInit(0));
	CK(cuDeviceGetCount(&count));
	if (count < 2) { fprintf(stderr, "need two devices, have %d\n", count); return 1; }
	for (int i = 0; i < 2; i++) {
		CK(cuDeviceGet(&dev[i], i));
		CK(cuDevicePrimaryCtxRetain(&ctx[i], dev[i]));
	}
	CK(cuDeviceCanAccessPeer(&can01, dev[0], dev[1]));
	CK(cuDeviceCanAccessPeer(&can10, dev[1], dev[0]));
	printf("can_access_peer 0to1 %d 1to0 %d\n", can01, can10);
	for (int i = 0; i < 2; i++) {
		CK(cuCtxSetCurrent(ctx[i]));
		if ((i == 0 && can01) || (i == 1 && can10)) {
			CUresult r = cuCtxEnablePeerAccess(ctx[1 - i], 0);
			if (r != CUDA_SUCCESS && r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) CK(r);
		}
		CK(cuMemAlloc(&buf[i], n));
		CK(cuMemsetD8(buf[i], (unsigned char)(0x11 * (i + 1)), n));
	}
	for (int d = 0; d < 2; d++) {
		int src = d, dst = 1 - d;
		CUstream s;
		CUevent start, end;
		float best = 0;
		CK(cuCtxSetCurrent(ctx[src]));
		CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
		CK(cuEventCreate(&start, CU_EVENT_DEFAULT));
		CK(cuEventCreate(&end, CU_EVENT_DEFAULT));
		for (int i = 0; i < 5; i++) {
			float ms = 0;
			CK(cuEventRecord(start, s));
			CK(cuMemcpyPeerAsync(buf[dst], ctx[dst], buf[src], ctx[src], n, s));
			CK(cuEventRecord(end, s));
			CK(cuEventSynchronize(end));
			CK(cuEventElapsedTime(&ms, start, end));
			if (best == 0 || ms < best) best = ms;
		}
		printf("peer_GBps %dto%d %.1f\n", src, dst, (double)n / (best / 1e3) / 1e9);
		CK(cuEventDestroy(start));
		CK(cuEventDestroy(end));
		CK(cuStreamDestroy(s));
	}
	for (int i = 0; i < 2; i++) {
		CK(cuCtxSetCurrent(ctx[i]));
		CK(cuMemFree(buf[i]));
		CK(cuDevicePrimaryCtxRelease(dev[i]));
	}
	return 0;
}
