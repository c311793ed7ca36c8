//go:build cgoanchor && cgo

// Package cgoanchor is a benchmark anchor, not part of the product: the
// per-call cost of a driver call that needs the device's context current
// (cuCtxSetCurrent, then cuCtxGetCurrent), made four ways in one binary so
// that they are compared in one run on one machine:
//
//   - gpumem: the backend's own path (internal/ccall, CGO_ENABLED=0 in the
//     product): make-current and call in one transition into C;
//   - cgo, one call: a C wrapper doing both, called through cgo;
//   - cgo, two calls: cuCtxSetCurrent and cuCtxGetCurrent each through cgo,
//     as a binding that wraps the driver function by function does;
//   - C: the pair in a C loop (no Go at all).
//
// Build on a machine with a C compiler (the build needs no CUDA toolkit: the
// driver is opened with dlopen):
//
//	CGO_ENABLED=1 go test -c -tags cgoanchor -o cgoanchor.test ./scripts/gpu/cgoanchor
//	./cgoanchor.test -test.run '^$' -test.bench Transition -test.count 5
package cgoanchor

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <time.h>
#include <stdlib.h>

typedef int (*init_fn)(unsigned);
typedef int (*devget_fn)(int *, int);
typedef int (*retain_fn)(void **, int);
typedef int (*set_fn)(void *);
typedef int (*get_fn)(void **);

static set_fn pset;
static get_fn pget;
static void *ctx;
static void *out;

static int anchor_load(const char *lib) {
	void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
	if (!h) return -1;
	init_fn init = (init_fn)dlsym(h, "cuInit");
	devget_fn devget = (devget_fn)dlsym(h, "cuDeviceGet");
	retain_fn retain = (retain_fn)dlsym(h, "cuDevicePrimaryCtxRetain");
	pset = (set_fn)dlsym(h, "cuCtxSetCurrent");
	pget = (get_fn)dlsym(h, "cuCtxGetCurrent");
	if (!init || !devget || !retain || !pset || !pget) return -2;
	int r = init(0);
	if (r) return r;
	int dev;
	if ((r = devget(&dev, 0))) return r;
	return retain(&ctx, dev);
}

static int anchor_set_get(void) {
	int r = pset(ctx);
	if (r) return r;
	return pget(&out);
}

static int anchor_set(void) { return pset(ctx); }
static int anchor_get(void) { return pget(&out); }

// The trampoline alone, with no driver: labs twice (the "make current"
// and the call), as one cgo call.
// (Through a pointer, as the trampoline calls it: gcc would otherwise
// compute labs inline.)
static long (*volatile anchor_labs_fn)(long) = labs;

static long anchor_labs2(long x) {
	long r = anchor_labs_fn(x);
	if (r == 0) return 0;
	return anchor_labs_fn(-x);
}

static void *anchor_labs_addr(void) { return (void *)labs; }

// The driver's functions, the context and the out-parameter, for the
// trampoline alone (no backend around it).
static void *anchor_set_addr(void) { return (void *)pset; }
static void *anchor_get_addr(void) { return (void *)pget; }
static void *anchor_ctx(void) { return ctx; }
static void *anchor_out_addr(void) { return (void *)&out; }

static double anchor_c_loop(long n) {
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++) {
		if (pset(ctx) || pget(&out)) return -1;
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	return ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / (double)n;
}
*/
import "C"

import "unsafe"

// load opens the driver with dlopen and retains device 0's primary context.
func load(lib string) int {
	cl := C.CString(lib)
	defer C.free(unsafe.Pointer(cl))
	return int(C.anchor_load(cl))
}

// setGet is the pair in one cgo call.
func setGet() int { return int(C.anchor_set_get()) }

// set and get are the pair's halves, one cgo call each.
func set() int { return int(C.anchor_set()) }
func get() int { return int(C.anchor_get()) }

// labs2 is labs twice in one cgo call.
func labs2(x int) int { return int(C.anchor_labs2(C.long(x))) }

// labsAddr is labs's address, for gpumem's call path.
func labsAddr() uintptr { return uintptr(C.anchor_labs_addr()) }

// driverAddrs returns cuCtxSetCurrent's and cuCtxGetCurrent's addresses,
// the retained context, and the address of the C out-parameter.
func driverAddrs() (set, get, ctx, out uintptr) {
	return uintptr(C.anchor_set_addr()), uintptr(C.anchor_get_addr()), uintptr(C.anchor_ctx()), uintptr(C.anchor_out_addr())
}

// cLoop times n pairs in C and returns ns per pair (-1 on failure).
func cLoop(n int) float64 { return float64(C.anchor_c_loop(C.long(n))) }
