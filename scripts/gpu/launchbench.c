// launchbench: the C anchor of BenchmarkGPULaunchEmpty. Loads a PTX file
// (the tests' own text, written by tests.test -test.run GPUKernelWritePTX),
// launches its kernel "empty" (1 block of 32 threads) N times on one
// non-blocking stream through cuLaunchKernel, synchronizing every SYNC
// launches as the Go benchmark does, and prints the time per launch.
//
//   cc -O2 -o launchbench launchbench.c -ldl
//   ./launchbench kernels.ptx [N=200000] [SYNC=1000] [ROUNDS=5]
//
// libcuda.so.1 is opened with dlopen, as gpumem opens it: no CUDA headers
// or toolkit needed.
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int CUresult;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream;

static CUresult (*cuInit)(unsigned);
static CUresult (*cuDriverGetVersion)(int *);
static CUresult (*cuDeviceGet)(int *, int);
static CUresult (*cuDeviceGetName)(char *, int, int);
static CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, int);
static CUresult (*cuCtxSetCurrent)(CUcontext);
static CUresult (*cuModuleLoadData)(CUmodule *, const void *);
static CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
static CUresult (*cuStreamCreate)(CUstream *, unsigned);
static CUresult (*cuStreamSynchronize)(CUstream);
static CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
				  unsigned, CUstream, void **, void **);

#define CHECK(call)                                                            \
	do {                                                                   \
		CUresult r_ = (call);                                          \
		if (r_ != 0) {                                                 \
			fprintf(stderr, "%s failed: %d\n", #call, r_);          \
			exit(1);                                               \
		}                                                              \
	} while (0)

static void *sym(void *lib, const char *name) {
	void *p = dlsym(lib, name);
	if (!p) {
		fprintf(stderr, "libcuda.so.1 lacks %s\n", name);
		exit(1);
	}
	return p;
}

static double now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static char *readfile(const char *path) {
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		exit(1);
	}
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *b = malloc(n + 1);
	if (fread(b, 1, n, f) != (size_t)n) {
		perror(path);
		exit(1);
	}
	b[n] = 0; // PTX is NUL-terminated text
	fclose(f);
	return b;
}

int main(int argc, char **argv) {
	if (argc < 2) {
		fprintf(stderr, "usage: %s PTX [N] [SYNC] [ROUNDS]\n", argv[0]);
		return 2;
	}
	long n = argc > 2 ? atol(argv[2]) : 200000;
	long every = argc > 3 ? atol(argv[3]) : 1000;
	int rounds = argc > 4 ? atoi(argv[4]) : 5;
	void *lib = dlopen("libcuda.so.1", RTLD_NOW);
	if (!lib) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	cuInit = sym(lib, "cuInit");
	cuDriverGetVersion = sym(lib, "cuDriverGetVersion");
	cuDeviceGet = sym(lib, "cuDeviceGet");
	cuDeviceGetName = sym(lib, "cuDeviceGetName");
	cuDevicePrimaryCtxRetain = sym(lib, "cuDevicePrimaryCtxRetain");
	cuCtxSetCurrent = sym(lib, "cuCtxSetCurrent");
	cuModuleLoadData = sym(lib, "cuModuleLoadData");
	cuModuleGetFunction = sym(lib, "cuModuleGetFunction");
	cuStreamCreate = sym(lib, "cuStreamCreate");
	cuStreamSynchronize = sym(lib, "cuStreamSynchronize");
	cuLaunchKernel = sym(lib, "cuLaunchKernel");

	int ver, dev;
	char name[256];
	CUcontext ctx;
	CUmodule mod;
	CUfunction fn;
	CUstream s;
	CHECK(cuInit(0));
	CHECK(cuDriverGetVersion(&ver));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDeviceGetName(name, sizeof name, dev));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	char *ptx = readfile(argv[1]);
	CHECK(cuModuleLoadData(&mod, ptx));
	CHECK(cuModuleGetFunction(&fn, mod, "empty"));
	CHECK(cuStreamCreate(&s, 1 /* CU_STREAM_NON_BLOCKING */));
	printf("device %s driver_version %d\n", name, ver);
	for (long i = 0; i < 10000; i++) // warm up
		CHECK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
	CHECK(cuStreamSynchronize(s));
	for (int r = 0; r < rounds; r++) {
		double t0 = now_ns();
		for (long i = 1; i <= n; i++) {
			CHECK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
			if (i % every == 0)
				CHECK(cuStreamSynchronize(s));
		}
		CHECK(cuStreamSynchronize(s));
		printf("launch_ns %.1f (round %d, %ld launches, sync every %ld)\n", (now_ns() - t0) / n, r + 1, n, every);
	}
	return 0;
}
