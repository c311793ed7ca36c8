// fakehip: a header-faithful fake HIP runtime on host memory, for tests.
//
// Built once per ROCm version against that version's hip_runtime_api.h
// (.ci/fakehip.sh), it defines the HIP functions the gpumem backend calls
// with the header's own prototypes (the compiler checks every signature) and
// reads every struct the backend passes through the header's own types
// (hipMemAllocationProp, hipMemPoolProps, hipMemLocation, hipMemAccessDesc),
// so that a layout or enum value the backend gets wrong for that version
// shows up as a refusal here. It reports the header's HIP_VERSION as its
// runtime and driver version, so the backend picks that version's ABI.
//
// Anything it does not recognise (an enum value the header does not define,
// a flag bit, a nonzero reserved or padding byte, a location that is not a
// device, a struct field the backend should leave zero) fails loudly: the
// call returns hipErrorInvalidValue, a line starting "fakehip: LOUD:" goes
// to stderr, fakehipLoudFailures() counts it, and with FAKEHIP_ABORT=1 the
// process aborts. Functions it does not fake are absent (the backend treats
// a missing optional symbol as not supported) or return hipErrorNotSupported.
//
// Model: FAKEHIP_DEVICES (1 or 2, default 2) devices of FAKEHIP_CAPACITY
// bytes each (default 8 GiB); every allocation is host memory (mmap).
// Streams are queues: work runs when nothing is ahead of it, except host
// functions, which run inline on the thread of a synchronizing call
// (stream, event or device synchronization); queries advance a stream up to
// its first host function. Events complete when their record runs. Stream
// capture records memsets, copies, host functions and stream-ordered
// allocations into a graph that a launch appends to a stream.
//
// Not part of gpumem: test scaffolding only (tests/fakehip/fakehip_test.go).

#define _GNU_SOURCE
#include <hip/hip_runtime_api.h>

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifndef HIP_VERSION
#error "hip_version.h did not define HIP_VERSION"
#endif

#define EXPORT __attribute__((visibility("default")))
#define MAXDEV 2

// ---------------------------------------------------------------------------
// State, locking, loud failures

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int ndev = -1;
static size_t capacity;
static size_t devUsed[MAXDEV];
static int peerOn[MAXDEV][MAXDEV];
static __thread int curDev;
static long loudCount;
static int abortOnLoud;
static unsigned long long nextCaptureID = 1;

static void setup(void) {
	if (ndev >= 0) return;
	const char* e = getenv("FAKEHIP_DEVICES");
	ndev = e ? atoi(e) : 2;
	if (ndev < 1 || ndev > MAXDEV) ndev = 2;
	e = getenv("FAKEHIP_CAPACITY");
	capacity = e ? strtoull(e, NULL, 0) : (8ull << 30);
	e = getenv("FAKEHIP_ABORT");
	abortOnLoud = e && *e && strcmp(e, "0") != 0;
}

#define LOCK() (pthread_mutex_lock(&mu), setup())
#define UNLOCK() pthread_mutex_unlock(&mu)
#define RET(x) do { hipError_t r_ = (x); UNLOCK(); return r_; } while (0)

// loud reports a value or layout the fake does not recognise and returns
// hipErrorInvalidValue.
static hipError_t loud(const char* fn, const char* format, ...) {
	va_list ap;
	loudCount++;
	fprintf(stderr, "fakehip: LOUD: %s (HIP %d.%d.%d headers): ", fn, HIP_VERSION_MAJOR, HIP_VERSION_MINOR,
		HIP_VERSION_PATCH);
	va_start(ap, format);
	vfprintf(stderr, format, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (abortOnLoud) abort();
	return hipErrorInvalidValue;
}

// note explains an ordinary refusal on stderr (not counted).
static hipError_t note(hipError_t r, const char* fn, const char* what) {
	if (getenv("FAKEHIP_VERBOSE")) fprintf(stderr, "fakehip: %s: %s (%d)\n", fn, what, (int)r);
	return r;
}

// fakehipLoudFailures is the number of loud failures so far (the Go test
// driver checks it after every subtest).
EXPORT long fakehipLoudFailures(void) {
	LOCK();
	long n = loudCount;
	UNLOCK();
	return n;
}

static int validDev(int d) { return d >= 0 && d < ndev; }

static double nowMs(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// checkZeroOutside fails loudly when a byte of the struct at p (size n) that
// no known field covers is not zero: padding and reserved bytes the backend
// must leave zero. covered marks the known fields' bytes.
static hipError_t checkZeroOutside(const char* fn, const char* st, const void* p, size_t n, const unsigned char* covered) {
	const unsigned char* b = p;
	for (size_t i = 0; i < n; i++) {
		if (!covered[i] && b[i] != 0) return loud(fn, "%s byte %zu (padding or reserved) is %#x, want 0", st, i, b[i]);
	}
	return hipSuccess;
}
#define COVER(mask, T, field) memset((mask) + offsetof(T, field), 1, sizeof(((T*)0)->field))

static hipError_t checkLocation(const char* fn, const char* st, const hipMemLocation* l) {
	switch (l->type) {
	case hipMemLocationTypeDevice:
		if (!validDev(l->id)) return loud(fn, "%s.location.id %d is not a device (have %d)", st, l->id, ndev);
		return hipSuccess;
	default:
		return loud(fn, "%s.location.type %d is not hipMemLocationTypeDevice (%d)", st, (int)l->type,
			(int)hipMemLocationTypeDevice);
	}
}

// ---------------------------------------------------------------------------
// Allocations

enum { K_DEVICE = 1, K_HOST, K_MANAGED, K_POOL, K_GRAPH };

typedef struct fpool fpool;
typedef struct alloc {
	char* base;
	size_t size, mapped;
	int kind, dev;
	fpool* pool;
	int preferred, lastPrefetch; // managed
} alloc;

static alloc* allocs;
static size_t nallocs, capallocs;

static char* mapMem(size_t n, size_t* mapped) {
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	*mapped = (n + pg - 1) / pg * pg;
	if (*mapped == 0) *mapped = pg;
	void* p = mmap(NULL, *mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static alloc* addAlloc(size_t n, int kind, int dev) {
	size_t mapped;
	char* p = mapMem(n, &mapped);
	if (!p) return NULL;
	if (nallocs == capallocs) {
		capallocs = capallocs ? 2 * capallocs : 256;
		allocs = realloc(allocs, capallocs * sizeof *allocs);
	}
	alloc* a = &allocs[nallocs++];
	*a = (alloc){.base = p, .size = n, .mapped = mapped, .kind = kind, .dev = dev, .preferred = hipInvalidDeviceId,
		.lastPrefetch = hipInvalidDeviceId};
	return a;
}

static alloc* findExact(const void* p) {
	for (size_t i = 0; i < nallocs; i++)
		if (allocs[i].base == p) return &allocs[i];
	return NULL;
}

static alloc* findContaining(const void* p) {
	for (size_t i = 0; i < nallocs; i++)
		if ((const char*)p >= allocs[i].base && (const char*)p < allocs[i].base + (allocs[i].size ? allocs[i].size : 1))
			return &allocs[i];
	return NULL;
}

static void dropAlloc(alloc* a) {
	munmap(a->base, a->mapped);
	*a = allocs[--nallocs];
}

// ---------------------------------------------------------------------------
// Handles: every object the fake hands out is registered, so that a stale or
// foreign handle is refused instead of dereferenced.

enum { H_STREAM = 1, H_EVENT, H_POOL, H_GRAPH, H_EXEC, H_UOBJ, H_VMEM };
typedef struct {
	void* p;
	int type;
} handle;
static handle* handles;
static size_t nhandles, caphandles;

static void reg(void* p, int type) {
	if (nhandles == caphandles) {
		caphandles = caphandles ? 2 * caphandles : 64;
		handles = realloc(handles, caphandles * sizeof *handles);
	}
	handles[nhandles++] = (handle){p, type};
}
static int known(const void* p, int type) {
	for (size_t i = 0; i < nhandles; i++)
		if (handles[i].p == p && handles[i].type == type) return 1;
	return 0;
}
static void unreg(const void* p) {
	for (size_t i = 0; i < nhandles; i++)
		if (handles[i].p == p) {
			handles[i] = handles[--nhandles];
			return;
		}
}

// ---------------------------------------------------------------------------
// Pools

struct fpool {
	int dev, isDefault;
	size_t maxSize, threshold, reserved, used, cached, reservedHigh, usedHigh;
	int reuse[3];
	int access[MAXDEV];
};
static fpool* defaultPools[MAXDEV];

static fpool* newPool(int dev) {
	fpool* p = calloc(1, sizeof *p);
	p->dev = dev;
	p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
	p->access[dev] = hipMemAccessFlagsProtReadWrite;
	reg(p, H_POOL);
	return p;
}

static fpool* defaultPool(int dev) {
	if (!defaultPools[dev]) {
		defaultPools[dev] = newPool(dev);
		defaultPools[dev]->isDefault = 1;
	}
	return defaultPools[dev];
}

static void poolRelease(fpool* p, size_t keep) {
	if (p->reserved <= keep) return;
	size_t r = p->reserved - keep;
	if (r > p->cached) r = p->cached;
	p->cached -= r;
	p->reserved -= r;
	devUsed[p->dev] -= r;
}

static void poolsAtSync(void) {
	for (size_t i = 0; i < nhandles; i++)
		if (handles[i].type == H_POOL) poolRelease(handles[i].p, ((fpool*)handles[i].p)->threshold);
}

static hipError_t poolAlloc(void** out, size_t n, fpool* p) {
	if (p->cached >= n) {
		p->cached -= n;
	} else {
		if (devUsed[p->dev] + n > capacity || n > capacity) return hipErrorOutOfMemory;
		if (p->maxSize && p->reserved + n > p->maxSize) return hipErrorOutOfMemory;
		p->reserved += n;
		devUsed[p->dev] += n;
	}
	alloc* a = addAlloc(n, K_POOL, p->dev);
	if (!a) return hipErrorOutOfMemory;
	a->pool = p;
	p->used += n;
	if (p->used > p->usedHigh) p->usedHigh = p->used;
	if (p->reserved > p->reservedHigh) p->reservedHigh = p->reserved;
	*out = a->base;
	return hipSuccess;
}

static void poolFree(alloc* a) {
	fpool* p = a->pool;
	p->used -= a->size;
	p->cached += a->size;
	dropAlloc(a);
}

// ---------------------------------------------------------------------------
// Streams, events, graphs, user objects

enum { OP_COPY = 1, OP_SET, OP_HOST, OP_RECORD, OP_WAIT, OP_FREE, OP_PREFETCH };
typedef struct fevent fevent;
typedef struct op {
	int kind;
	void* dst;
	const void* src;
	size_t n;
	int value;
	hipHostFn_t fn;
	void* data;
	fevent* ev;
	unsigned long long gen;
	struct op* next;
} op;

typedef struct fgraph fgraph;
typedef struct fstream {
	int dev, flags, priority, isNull;
	op *head, *tail;
	int running, advancing;
	int capture; // hipStreamCaptureStatus
	hipStreamCaptureMode mode;
	pthread_t thread;
	unsigned long long captureID;
	fgraph* graph;
} fstream;

struct fevent {
	int dev, flags;
	fstream* stream;
	unsigned long long recorded, done;
	double ms;
};

typedef struct fuobj {
	void* ptr;
	hipHostFn_t destroy;
	unsigned refs;
} fuobj;

struct fgraph {
	op *head, *tail;
	int refs; // the graph handle and every instance of it
	struct {
		fuobj* o;
		unsigned n;
	} uobjs[16];
	int nuobjs;
	void* owned[16]; // stream-ordered allocations made during the capture
	int nowned;
};

typedef struct fexec {
	fgraph* g;
} fexec;

static fstream nullStreams[MAXDEV];

static fstream* streamOf(hipStream_t s, int* bad) {
	*bad = 0;
	if (s == NULL) {
		fstream* n = &nullStreams[curDev];
		n->dev = curDev;
		n->isNull = 1;
		return n;
	}
	if (!known(s, H_STREAM)) {
		*bad = 1;
		return NULL;
	}
	return (fstream*)s;
}
#define STREAM(var, h, fn)                                                     \
	int bad_;                                                                    \
	fstream* var = streamOf(h, &bad_);                                           \
	if (bad_) RET(note(hipErrorInvalidHandle, fn, "unknown stream"));

static void drain(fstream* s);
static void uobjRelease(fuobj* o, unsigned n);

static void runOp(fstream* s, op* o) {
	switch (o->kind) {
	case OP_COPY:
		memmove(o->dst, o->src, o->n);
		break;
	case OP_SET:
		memset(o->dst, o->value, o->n);
		break;
	case OP_HOST:
		UNLOCK();
		o->fn(o->data);
		LOCK();
		break;
	case OP_RECORD:
		if (o->ev->done < o->gen) {
			o->ev->done = o->gen;
			o->ev->ms = nowMs();
		}
		break;
	case OP_WAIT:
		while (o->ev->done < o->gen && o->ev->stream && o->ev->stream != s &&
		       (o->ev->stream->head || o->ev->stream->running))
			drain(o->ev->stream);
		break;
	case OP_FREE: {
		alloc* a = findExact(o->dst);
		if (a && a->kind == K_POOL) poolFree(a);
		break;
	}
	case OP_PREFETCH: {
		alloc* a = findContaining(o->dst);
		if (a) a->lastPrefetch = o->value;
		break;
	}
	}
}

// ready reports whether o can run without a synchronizing caller: host
// functions wait for one, a wait for its event.
static int ready(op* o) {
	if (o->kind == OP_HOST) return 0;
	if (o->kind == OP_WAIT) return o->ev->done >= o->gen;
	return 1;
}

static void advanceStream(fstream* s);
static void advanceWaits(fstream* s) {
	// Let the stream a wait depends on move first.
	if (s->head && s->head->kind == OP_WAIT && s->head->ev->stream && s->head->ev->stream != s)
		advanceStream(s->head->ev->stream);
}

// advanceStream runs the work at the head of s that needs no synchronizing
// caller.
static void advanceStream(fstream* s) {
	if (s->running || s->advancing) return;
	s->advancing = 1;
	for (;;) {
		advanceWaits(s);
		op* o = s->head;
		if (!o || !ready(o)) break;
		s->head = o->next;
		if (!s->head) s->tail = NULL;
		runOp(s, o);
		free(o);
	}
	s->advancing = 0;
}

// drain runs everything queued on s, host functions included, and waits for
// another thread's run of s to finish.
static void drain(fstream* s) {
	for (;;) {
		while (s->running) pthread_cond_wait(&cond, &mu);
		op* o = s->head;
		if (!o) return;
		s->head = o->next;
		if (!s->head) s->tail = NULL;
		s->running++;
		runOp(s, o);
		s->running--;
		pthread_cond_broadcast(&cond);
		free(o);
	}
}

static void drainAll(int dev, int blockingOnly) {
	for (int d = 0; d < ndev; d++)
		if (dev < 0 || d == dev) drain(&nullStreams[d]);
	for (size_t i = 0; i < nhandles; i++) {
		if (handles[i].type != H_STREAM) continue;
		fstream* s = handles[i].p;
		if ((dev < 0 || s->dev == dev) && (!blockingOnly || !(s->flags & hipStreamNonBlocking)) && s->capture == hipStreamCaptureStatusNone)
			drain(s);
	}
}

static op* newOp(int kind) {
	op* o = calloc(1, sizeof *o);
	o->kind = kind;
	return o;
}

static void append(op** head, op** tail, op* o) {
	o->next = NULL;
	if (*tail) (*tail)->next = o;
	else *head = o;
	*tail = o;
}

// submit queues o on s, or records it into the capture of s. It returns the
// capture's refusal when s's capture is invalidated.
static hipError_t submit(fstream* s, op* o) {
	if (s->capture == hipStreamCaptureStatusInvalidated) {
		free(o);
		return hipErrorStreamCaptureInvalidated;
	}
	if (s->capture == hipStreamCaptureStatusActive) {
		if (o->kind == OP_RECORD || o->kind == OP_WAIT || o->kind == OP_PREFETCH) {
			free(o);
			return note(hipErrorNotSupported, "capture", "events and prefetches are not captured by the fake");
		}
		append(&s->graph->head, &s->graph->tail, o);
		return hipSuccess;
	}
	append(&s->head, &s->tail, o);
	advanceStream(s);
	return hipSuccess;
}

static void graphUnref(fgraph* g) {
	if (--g->refs > 0) return;
	for (op* o = g->head; o;) {
		op* n = o->next;
		free(o);
		o = n;
	}
	for (int i = 0; i < g->nowned; i++) {
		alloc* a = findExact(g->owned[i]);
		if (a) dropAlloc(a);
	}
	for (int i = 0; i < g->nuobjs; i++) uobjRelease(g->uobjs[i].o, g->uobjs[i].n);
	unreg(g);
	free(g);
}

static void uobjRelease(fuobj* o, unsigned n) {
	if (n > o->refs) n = o->refs;
	o->refs -= n;
	if (o->refs) return;
	unreg(o);
	hipHostFn_t fn = o->destroy;
	void* ptr = o->ptr;
	free(o);
	UNLOCK();
	fn(ptr); // inside the releasing call, as clr does
	LOCK();
}

// ---------------------------------------------------------------------------
// Initialisation, versions, devices

EXPORT hipError_t hipInit(unsigned int flags) {
	LOCK();
	if (flags != 0) RET(loud("hipInit", "flags %#x, want 0", flags));
	RET(hipSuccess);
}

// reportVersion is the version the fake reports: the headers' HIP_VERSION,
// unless a test makes it lie (fakehipReportVersion) to check that a backend
// using another version's layouts is caught.
static int reportVersion = HIP_VERSION;

// fakehipReportVersion sets the reported version (0: the headers') and
// returns the headers' HIP_VERSION.
EXPORT int fakehipReportVersion(int v) {
	LOCK();
	reportVersion = v ? v : HIP_VERSION;
	UNLOCK();
	return HIP_VERSION;
}

EXPORT hipError_t hipDriverGetVersion(int* driverVersion) {
	if (!driverVersion) return hipErrorInvalidValue;
	*driverVersion = reportVersion;
	return hipSuccess;
}

EXPORT hipError_t hipRuntimeGetVersion(int* runtimeVersion) {
	if (!runtimeVersion) return hipErrorInvalidValue;
	*runtimeVersion = reportVersion;
	return hipSuccess;
}

#define NAME(x) \
	case x: \
		return #x;
EXPORT const char* hipGetErrorName(hipError_t e) {
	switch (e) {
		NAME(hipSuccess)
		NAME(hipErrorInvalidValue)
		NAME(hipErrorOutOfMemory)
		NAME(hipErrorNotInitialized)
		NAME(hipErrorDeinitialized)
		NAME(hipErrorInvalidDevicePointer)
		NAME(hipErrorNoDevice)
		NAME(hipErrorInvalidDevice)
		NAME(hipErrorInvalidContext)
		NAME(hipErrorInvalidHandle)
		NAME(hipErrorIllegalState)
		NAME(hipErrorNotFound)
		NAME(hipErrorNotReady)
		NAME(hipErrorPeerAccessAlreadyEnabled)
		NAME(hipErrorPeerAccessNotEnabled)
		NAME(hipErrorNotSupported)
		NAME(hipErrorStreamCaptureUnsupported)
		NAME(hipErrorStreamCaptureInvalidated)
		NAME(hipErrorStreamCaptureMerge)
		NAME(hipErrorStreamCaptureUnmatched)
		NAME(hipErrorStreamCaptureUnjoined)
		NAME(hipErrorStreamCaptureIsolation)
		NAME(hipErrorStreamCaptureImplicit)
		NAME(hipErrorCapturedEvent)
		NAME(hipErrorStreamCaptureWrongThread)
	default:
		return "hipErrorUnknown";
	}
}

EXPORT hipError_t hipGetDeviceCount(int* count) {
	LOCK();
	if (!count) RET(hipErrorInvalidValue);
	*count = ndev;
	RET(hipSuccess);
}

EXPORT hipError_t hipSetDevice(int deviceId) {
	LOCK();
	if (!validDev(deviceId)) RET(hipErrorInvalidDevice);
	curDev = deviceId;
	RET(hipSuccess);
}

EXPORT hipError_t hipGetDevice(int* deviceId) {
	if (!deviceId) return hipErrorInvalidValue;
	*deviceId = curDev;
	return hipSuccess;
}

EXPORT hipError_t hipDeviceGetName(char* name, int len, hipDevice_t device) {
	LOCK();
	if (!validDev(device)) RET(hipErrorInvalidDevice);
	if (!name || len <= 0) RET(hipErrorInvalidValue);
	snprintf(name, (size_t)len, "fakehip %d.%d device %d", HIP_VERSION_MAJOR, HIP_VERSION_MINOR, device);
	RET(hipSuccess);
}

/* The device's properties, through the header's own hipDeviceProp_t (from
 * 6.0 the header makes hipGetDeviceProperties a macro for
 * hipGetDevicePropertiesR0600 and the struct hipDeviceProp_tR0600, so this
 * defines whichever the version's header names). Only name and gcnArchName
 * are filled: a backend reading gcnArchName at the wrong offset for the
 * version reads zeros or the wrong bytes. */
EXPORT hipError_t hipGetDeviceProperties(hipDeviceProp_t* prop, int deviceId) {
	LOCK();
	if (!validDev(deviceId)) RET(hipErrorInvalidDevice);
	if (!prop) RET(hipErrorInvalidValue);
	memset(prop, 0, sizeof *prop);
	snprintf(prop->name, sizeof prop->name, "fakehip %d.%d device %d", HIP_VERSION_MAJOR, HIP_VERSION_MINOR, deviceId);
	snprintf(prop->gcnArchName, sizeof prop->gcnArchName, "gfx90a:sramecc+:xnack-");
	RET(hipSuccess);
}

EXPORT hipError_t hipDeviceGetAttribute(int* pi, hipDeviceAttribute_t attr, int deviceId) {
	LOCK();
	if (!validDev(deviceId)) RET(hipErrorInvalidDevice);
	if (!pi) RET(hipErrorInvalidValue);
	int v;
	switch (attr) {
	case hipDeviceAttributeComputeCapabilityMajor: v = 9; break;
	case hipDeviceAttributeComputeCapabilityMinor: v = 0; break;
	case hipDeviceAttributeMultiprocessorCount: v = 104; break;
	case hipDeviceAttributeUnifiedAddressing: v = 1; break;
	case hipDeviceAttributeManagedMemory: v = 1; break;
	case hipDeviceAttributeConcurrentManagedAccess: v = 1; break;
	case hipDeviceAttributePageableMemoryAccess: v = 0; break;
	case hipDeviceAttributeCanMapHostMemory: v = 1; break;
	case hipDeviceAttributeMemoryPoolsSupported: v = 1; break;
#if HIP_VERSION >= 50300000
	case hipDeviceAttributeVirtualMemoryManagementSupported: v = 1; break;
#endif
	case hipDeviceAttributeIntegrated: v = 0; break;
	case hipDeviceAttributePciBusId: v = 0x10 + deviceId; break;
	case hipDeviceAttributePciDeviceId: v = 0; break;
	case hipDeviceAttributePciDomainID: v = 0; break;
	case hipDeviceAttributeClockRate: v = 1700000; break;
	case hipDeviceAttributeMemoryClockRate: v = 1600000; break;
	case hipDeviceAttributeMemoryBusWidth: v = 8192; break;
	case hipDeviceAttributeL2CacheSize: v = 8 << 20; break;
	default:
		RET(loud("hipDeviceGetAttribute", "attribute %d is not one the fake knows by its header name", (int)attr));
	}
	*pi = v;
	RET(hipSuccess);
}

EXPORT hipError_t hipMemGetInfo(size_t* free_, size_t* total) {
	LOCK();
	if (!free_ || !total) RET(hipErrorInvalidValue);
	*total = capacity;
	*free_ = capacity - devUsed[curDev];
	RET(hipSuccess);
}

EXPORT hipError_t hipDeviceSynchronize(void) {
	LOCK();
	drainAll(curDev, 0);
	poolsAtSync();
	RET(hipSuccess);
}

// ---------------------------------------------------------------------------
// Memory

EXPORT hipError_t hipMalloc(void** ptr, size_t size) {
	LOCK();
	if (!ptr) RET(hipErrorInvalidValue);
	if (size == 0) {
		*ptr = NULL;
		RET(hipSuccess);
	}
	if (size > capacity || devUsed[curDev] + size > capacity) RET(hipErrorOutOfMemory);
	alloc* a = addAlloc(size, K_DEVICE, curDev);
	if (!a) RET(hipErrorOutOfMemory);
	devUsed[curDev] += size;
	*ptr = a->base;
	RET(hipSuccess);
}

EXPORT hipError_t hipFree(void* ptr) {
	LOCK();
	if (!ptr) RET(hipSuccess);
	alloc* a = findExact(ptr);
	if (!a || (a->kind != K_DEVICE && a->kind != K_MANAGED))
		RET(note(hipErrorInvalidValue, "hipFree", "not the start of a live hipMalloc or hipMallocManaged allocation"));
	if (a->kind == K_DEVICE) devUsed[a->dev] -= a->size;
	dropAlloc(a);
	RET(hipSuccess);
}

EXPORT hipError_t hipHostMalloc(void** ptr, size_t size, unsigned int flags) {
	LOCK();
	const unsigned known = hipHostMallocPortable | hipHostMallocMapped | hipHostMallocWriteCombined |
		hipHostMallocNumaUser | hipHostMallocCoherent | hipHostMallocNonCoherent;
	if (flags & ~known) RET(loud("hipHostMalloc", "flags %#x has bits the header does not define", flags));
	if (!ptr) RET(hipErrorInvalidValue);
	alloc* a = addAlloc(size, K_HOST, -1);
	if (!a) RET(hipErrorOutOfMemory);
	*ptr = a->base;
	RET(hipSuccess);
}

EXPORT hipError_t hipHostFree(void* ptr) {
	LOCK();
	if (!ptr) RET(hipSuccess);
	alloc* a = findExact(ptr);
	if (!a || a->kind != K_HOST) RET(note(hipErrorInvalidValue, "hipHostFree", "not a live hipHostMalloc allocation"));
	dropAlloc(a);
	RET(hipSuccess);
}

EXPORT hipError_t hipMallocManaged(void** dev_ptr, size_t size, unsigned int flags) {
	LOCK();
	if (flags != hipMemAttachGlobal && flags != hipMemAttachHost)
		RET(loud("hipMallocManaged", "flags %#x, want hipMemAttachGlobal or hipMemAttachHost", flags));
	if (!dev_ptr || size == 0) RET(hipErrorInvalidValue);
	alloc* a = addAlloc(size, K_MANAGED, curDev);
	if (!a) RET(hipErrorOutOfMemory);
	*dev_ptr = a->base;
	RET(hipSuccess);
}

static hipError_t managedRange(const char* fn, const void* p, size_t n, alloc** out) {
	alloc* a = findContaining(p);
	if (!a || a->kind != K_MANAGED) return note(hipErrorInvalidValue, fn, "not managed memory");
	if ((const char*)p + n > a->base + a->size) return note(hipErrorInvalidValue, fn, "range beyond the allocation");
	*out = a;
	return hipSuccess;
}

static hipError_t checkDeviceOrCPU(const char* fn, int device) {
	if (device == hipCpuDeviceId || validDev(device)) return hipSuccess;
	return loud(fn, "device %d is neither a device nor hipCpuDeviceId", device);
}

EXPORT hipError_t hipMemAdvise(const void* dev_ptr, size_t count, hipMemoryAdvise advice, int device) {
	LOCK();
	alloc* a;
	hipError_t r = managedRange("hipMemAdvise", dev_ptr, count, &a);
	if (r) RET(r);
	if ((r = checkDeviceOrCPU("hipMemAdvise", device))) RET(r);
	switch (advice) {
	case hipMemAdviseSetPreferredLocation: a->preferred = device; break;
	case hipMemAdviseUnsetPreferredLocation: a->preferred = hipInvalidDeviceId; break;
	case hipMemAdviseSetReadMostly:
	case hipMemAdviseUnsetReadMostly:
	case hipMemAdviseSetAccessedBy:
	case hipMemAdviseUnsetAccessedBy:
	case hipMemAdviseSetCoarseGrain:
	case hipMemAdviseUnsetCoarseGrain:
		break;
	default:
		RET(loud("hipMemAdvise", "advice %d is not a hipMemoryAdvise value", (int)advice));
	}
	RET(hipSuccess);
}

EXPORT hipError_t hipMemPrefetchAsync(const void* dev_ptr, size_t count, int device, hipStream_t stream) {
	LOCK();
	alloc* a;
	hipError_t r = managedRange("hipMemPrefetchAsync", dev_ptr, count, &a);
	if (r) RET(r);
	if ((r = checkDeviceOrCPU("hipMemPrefetchAsync", device))) RET(r);
	STREAM(s, stream, "hipMemPrefetchAsync");
	op* o = newOp(OP_PREFETCH);
	o->dst = (void*)dev_ptr;
	o->value = device;
	RET(submit(s, o));
}

EXPORT hipError_t hipMemRangeGetAttribute(void* data, size_t data_size, hipMemRangeAttribute attribute,
	const void* dev_ptr, size_t count) {
	LOCK();
	alloc* a;
	hipError_t r = managedRange("hipMemRangeGetAttribute", dev_ptr, count, &a);
	if (r) RET(r);
	if (data_size != sizeof(int)) RET(loud("hipMemRangeGetAttribute", "data_size %zu, want 4", data_size));
	switch (attribute) {
	case hipMemRangeAttributePreferredLocation: *(int*)data = a->preferred; break;
	case hipMemRangeAttributeLastPrefetchLocation: *(int*)data = a->lastPrefetch; break;
	default:
		RET(loud("hipMemRangeGetAttribute", "attribute %d is not one the backend reads", (int)attribute));
	}
	RET(hipSuccess);
}

static hipError_t checkKind(const char* fn, hipMemcpyKind kind) {
	switch (kind) {
	case hipMemcpyHostToHost:
	case hipMemcpyHostToDevice:
	case hipMemcpyDeviceToHost:
	case hipMemcpyDeviceToDevice:
	case hipMemcpyDefault:
		return hipSuccess;
	default:
		return loud(fn, "kind %d is not a hipMemcpyKind the fake knows", (int)kind);
	}
}

EXPORT hipError_t hipMemcpy(void* dst, const void* src, size_t sizeBytes, hipMemcpyKind kind) {
	LOCK();
	hipError_t r = checkKind("hipMemcpy", kind);
	if (r) RET(r);
	drainAll(curDev, 1);
	if (sizeBytes) memmove(dst, src, sizeBytes);
	RET(hipSuccess);
}

EXPORT hipError_t hipMemcpyAsync(void* dst, const void* src, size_t sizeBytes, hipMemcpyKind kind, hipStream_t stream) {
	LOCK();
	hipError_t r = checkKind("hipMemcpyAsync", kind);
	if (r) RET(r);
	STREAM(s, stream, "hipMemcpyAsync");
	op* o = newOp(OP_COPY);
	o->dst = dst, o->src = src, o->n = sizeBytes;
	RET(submit(s, o));
}

EXPORT hipError_t hipMemcpyPeerAsync(void* dst, int dstDeviceId, const void* src, int srcDevice, size_t sizeBytes,
	hipStream_t stream) {
	LOCK();
	if (!validDev(dstDeviceId) || !validDev(srcDevice)) RET(hipErrorInvalidDevice);
	STREAM(s, stream, "hipMemcpyPeerAsync");
	op* o = newOp(OP_COPY);
	o->dst = dst, o->src = src, o->n = sizeBytes;
	RET(submit(s, o));
}

EXPORT hipError_t hipMemset(void* dst, int value, size_t sizeBytes) {
	LOCK();
	drainAll(curDev, 1);
	if (sizeBytes) memset(dst, value, sizeBytes);
	RET(hipSuccess);
}

EXPORT hipError_t hipMemsetAsync(void* dst, int value, size_t sizeBytes, hipStream_t stream) {
	LOCK();
	STREAM(s, stream, "hipMemsetAsync");
	op* o = newOp(OP_SET);
	o->dst = dst, o->value = value, o->n = sizeBytes;
	RET(submit(s, o));
}

EXPORT hipError_t hipPointerGetAttribute(void* data, hipPointer_attribute attribute, hipDeviceptr_t ptr) {
	LOCK();
	if (attribute != HIP_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
		RET(loud("hipPointerGetAttribute", "attribute %d is not HIP_POINTER_ATTRIBUTE_DEVICE_ORDINAL", (int)attribute));
	alloc* a = findContaining(ptr);
	if (!a || a->dev < 0) RET(hipErrorInvalidValue);
	*(int*)data = a->dev;
	RET(hipSuccess);
}

// ---------------------------------------------------------------------------
// Streams and events

EXPORT hipError_t hipDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority) {
	if (leastPriority) *leastPriority = 0;
	if (greatestPriority) *greatestPriority = -1;
	return hipSuccess;
}

EXPORT hipError_t hipStreamCreateWithPriority(hipStream_t* stream, unsigned int flags, int priority) {
	LOCK();
	if (flags & ~(unsigned)hipStreamNonBlocking) RET(loud("hipStreamCreateWithPriority", "flags %#x", flags));
	if (!stream) RET(hipErrorInvalidValue);
	fstream* s = calloc(1, sizeof *s);
	s->dev = curDev, s->flags = (int)flags;
	s->priority = priority < -1 ? -1 : priority > 0 ? 0 : priority;
	reg(s, H_STREAM);
	*stream = (hipStream_t)s;
	RET(hipSuccess);
}

EXPORT hipError_t hipStreamDestroy(hipStream_t stream) {
	LOCK();
	if (!stream || !known(stream, H_STREAM)) RET(note(hipErrorInvalidHandle, "hipStreamDestroy", "unknown stream"));
	fstream* s = (fstream*)stream;
	if (s->capture != hipStreamCaptureStatusNone) RET(hipErrorStreamCaptureUnsupported);
	drain(s);
	unreg(s);
	free(s);
	RET(hipSuccess);
}

// illegalInCapture invalidates an active capture of s: the call is not
// permitted while s captures.
static int illegalInCapture(fstream* s) {
	if (s->capture == hipStreamCaptureStatusNone) return 0;
	s->capture = hipStreamCaptureStatusInvalidated;
	return 1;
}

EXPORT hipError_t hipStreamSynchronize(hipStream_t stream) {
	LOCK();
	STREAM(s, stream, "hipStreamSynchronize");
	if (illegalInCapture(s)) RET(hipErrorStreamCaptureUnsupported);
	if (s->isNull) drainAll(s->dev, 1);
	else drain(s);
	poolsAtSync();
	RET(hipSuccess);
}

EXPORT hipError_t hipStreamQuery(hipStream_t stream) {
	LOCK();
	STREAM(s, stream, "hipStreamQuery");
	if (illegalInCapture(s)) RET(hipErrorStreamCaptureUnsupported);
	advanceStream(s);
	RET(s->head || s->running ? hipErrorNotReady : hipSuccess);
}

static fevent* eventOf(hipEvent_t e) { return e && known(e, H_EVENT) ? (fevent*)e : NULL; }

EXPORT hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags) {
	LOCK();
	if (flags != 0) RET(loud("hipStreamWaitEvent", "flags %#x, want 0", flags));
	STREAM(s, stream, "hipStreamWaitEvent");
	fevent* e = eventOf(event);
	if (!e) RET(note(hipErrorInvalidHandle, "hipStreamWaitEvent", "unknown event"));
	if (e->done >= e->recorded) RET(hipSuccess);
	op* o = newOp(OP_WAIT);
	o->ev = e, o->gen = e->recorded;
	RET(submit(s, o));
}

EXPORT hipError_t hipEventCreateWithFlags(hipEvent_t* event, unsigned flags) {
	LOCK();
	if (flags & ~(unsigned)(hipEventBlockingSync | hipEventDisableTiming | hipEventInterprocess))
		RET(loud("hipEventCreateWithFlags", "flags %#x has bits the fake does not know", flags));
	if (!event) RET(hipErrorInvalidValue);
	fevent* e = calloc(1, sizeof *e);
	e->dev = curDev, e->flags = (int)flags;
	reg(e, H_EVENT);
	*event = (hipEvent_t)e;
	RET(hipSuccess);
}

EXPORT hipError_t hipEventDestroy(hipEvent_t event) {
	LOCK();
	fevent* e = eventOf(event);
	if (!e) RET(note(hipErrorInvalidHandle, "hipEventDestroy", "unknown event"));
	// Queued waits and records keep pointing at it: finish them first.
	if (e->stream && e->done < e->recorded) drain(e->stream);
	for (size_t i = 0; i < nhandles; i++)
		if (handles[i].type == H_STREAM)
			for (op* o = ((fstream*)handles[i].p)->head; o; o = o->next)
				if (o->ev == e) drain(handles[i].p);
	unreg(e);
	free(e);
	RET(hipSuccess);
}

EXPORT hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream) {
	LOCK();
	fevent* e = eventOf(event);
	if (!e) RET(note(hipErrorInvalidHandle, "hipEventRecord", "unknown event"));
	STREAM(s, stream, "hipEventRecord");
	if (s->capture != hipStreamCaptureStatusNone) RET(note(hipErrorNotSupported, "hipEventRecord", "not captured by the fake"));
	e->stream = s;
	op* o = newOp(OP_RECORD);
	o->ev = e, o->gen = ++e->recorded;
	RET(submit(s, o));
}

EXPORT hipError_t hipEventQuery(hipEvent_t event) {
	LOCK();
	fevent* e = eventOf(event);
	if (!e) RET(note(hipErrorInvalidHandle, "hipEventQuery", "unknown event"));
	if (e->stream) advanceStream(e->stream);
	RET(e->done >= e->recorded ? hipSuccess : hipErrorNotReady);
}

EXPORT hipError_t hipEventSynchronize(hipEvent_t event) {
	LOCK();
	fevent* e = eventOf(event);
	if (!e) RET(note(hipErrorInvalidHandle, "hipEventSynchronize", "unknown event"));
	while (e->done < e->recorded && e->stream && (e->stream->head || e->stream->running)) drain(e->stream);
	poolsAtSync();
	RET(hipSuccess);
}

EXPORT hipError_t hipEventElapsedTime(float* ms, hipEvent_t start, hipEvent_t stop) {
	LOCK();
	fevent *a = eventOf(start), *b = eventOf(stop);
	if (!a || !b || !ms) RET(hipErrorInvalidHandle);
	if ((a->flags | b->flags) & hipEventDisableTiming) RET(hipErrorInvalidHandle);
	if (!a->recorded || !b->recorded) RET(hipErrorInvalidHandle);
	if (a->done < a->recorded || b->done < b->recorded) RET(hipErrorNotReady);
	*ms = (float)(b->ms - a->ms);
	RET(hipSuccess);
}

EXPORT hipError_t hipLaunchHostFunc(hipStream_t stream, hipHostFn_t fn, void* userData) {
	LOCK();
	if (!fn) RET(hipErrorInvalidValue);
	STREAM(s, stream, "hipLaunchHostFunc");
	op* o = newOp(OP_HOST);
	o->fn = fn, o->data = userData;
	RET(submit(s, o));
}

// ---------------------------------------------------------------------------
// Stream-ordered allocation

static fpool* poolOf(hipMemPool_t p) { return p && known(p, H_POOL) ? (fpool*)p : NULL; }

EXPORT hipError_t hipDeviceGetDefaultMemPool(hipMemPool_t* mem_pool, int device) {
	LOCK();
	if (!validDev(device)) RET(hipErrorInvalidDevice);
	if (!mem_pool) RET(hipErrorInvalidValue);
	*mem_pool = (hipMemPool_t)defaultPool(device);
	RET(hipSuccess);
}

EXPORT hipError_t hipMemPoolCreate(hipMemPool_t* mem_pool, const hipMemPoolProps* pool_props) {
	static const char fn[] = "hipMemPoolCreate";
	LOCK();
	if (!mem_pool || !pool_props) RET(hipErrorInvalidValue);
	const hipMemPoolProps* p = pool_props;
	if (p->allocType != hipMemAllocationTypePinned)
		RET(loud(fn, "allocType %d, want hipMemAllocationTypePinned (%d)", (int)p->allocType, (int)hipMemAllocationTypePinned));
	if (p->handleTypes != hipMemHandleTypeNone)
		RET(loud(fn, "handleTypes %d, want hipMemHandleTypeNone", (int)p->handleTypes));
	hipError_t r = checkLocation(fn, "hipMemPoolProps", &p->location);
	if (r) RET(r);
	if (p->win32SecurityAttributes) RET(loud(fn, "win32SecurityAttributes %p, want NULL", p->win32SecurityAttributes));
	unsigned char covered[sizeof(hipMemPoolProps)] = {0};
	COVER(covered, hipMemPoolProps, allocType);
	COVER(covered, hipMemPoolProps, handleTypes);
	COVER(covered, hipMemPoolProps, location);
	COVER(covered, hipMemPoolProps, win32SecurityAttributes);
	size_t maxSize = 0;
#if HIP_VERSION >= 60200000
	COVER(covered, hipMemPoolProps, maxSize);
	maxSize = p->maxSize;
#endif
	if ((r = checkZeroOutside(fn, "hipMemPoolProps", p, sizeof *p, covered))) RET(r);
	fpool* pool = newPool(p->location.id);
	pool->maxSize = maxSize;
	*mem_pool = (hipMemPool_t)pool;
	RET(hipSuccess);
}

EXPORT hipError_t hipMemPoolDestroy(hipMemPool_t mem_pool) {
	LOCK();
	fpool* p = poolOf(mem_pool);
	if (!p || p->isDefault) RET(note(hipErrorInvalidValue, "hipMemPoolDestroy", "unknown or default pool"));
	for (size_t i = 0; i < nallocs;) {
		if (allocs[i].pool == p) poolFree(&allocs[i]);
		else i++;
	}
	poolRelease(p, 0);
	unreg(p);
	free(p);
	RET(hipSuccess);
}

EXPORT hipError_t hipMemPoolSetAttribute(hipMemPool_t mem_pool, hipMemPoolAttr attr, void* value) {
	LOCK();
	fpool* p = poolOf(mem_pool);
	if (!p || !value) RET(hipErrorInvalidValue);
	switch (attr) {
	case hipMemPoolReuseFollowEventDependencies: p->reuse[0] = *(int*)value; break;
	case hipMemPoolReuseAllowOpportunistic: p->reuse[1] = *(int*)value; break;
	case hipMemPoolReuseAllowInternalDependencies: p->reuse[2] = *(int*)value; break;
	case hipMemPoolAttrReleaseThreshold: p->threshold = *(uint64_t*)value; break;
	case hipMemPoolAttrReservedMemHigh:
		if (*(uint64_t*)value != 0) RET(hipErrorInvalidValue);
		p->reservedHigh = p->reserved;
		break;
	case hipMemPoolAttrUsedMemHigh:
		if (*(uint64_t*)value != 0) RET(hipErrorInvalidValue);
		p->usedHigh = p->used;
		break;
	case hipMemPoolAttrReservedMemCurrent:
	case hipMemPoolAttrUsedMemCurrent:
		RET(hipErrorInvalidValue);
	default:
		RET(loud("hipMemPoolSetAttribute", "attribute %d is not a hipMemPoolAttr", (int)attr));
	}
	RET(hipSuccess);
}

EXPORT hipError_t hipMemPoolGetAttribute(hipMemPool_t mem_pool, hipMemPoolAttr attr, void* value) {
	LOCK();
	fpool* p = poolOf(mem_pool);
	if (!p || !value) RET(hipErrorInvalidValue);
	switch (attr) {
	case hipMemPoolReuseFollowEventDependencies: *(int*)value = p->reuse[0]; break;
	case hipMemPoolReuseAllowOpportunistic: *(int*)value = p->reuse[1]; break;
	case hipMemPoolReuseAllowInternalDependencies: *(int*)value = p->reuse[2]; break;
	case hipMemPoolAttrReleaseThreshold: *(uint64_t*)value = p->threshold; break;
	case hipMemPoolAttrReservedMemCurrent: *(uint64_t*)value = p->reserved; break;
	case hipMemPoolAttrReservedMemHigh: *(uint64_t*)value = p->reservedHigh; break;
	case hipMemPoolAttrUsedMemCurrent: *(uint64_t*)value = p->used; break;
	case hipMemPoolAttrUsedMemHigh: *(uint64_t*)value = p->usedHigh; break;
	default:
		RET(loud("hipMemPoolGetAttribute", "attribute %d is not a hipMemPoolAttr", (int)attr));
	}
	RET(hipSuccess);
}

EXPORT hipError_t hipMemPoolTrimTo(hipMemPool_t mem_pool, size_t min_bytes_to_hold) {
	LOCK();
	fpool* p = poolOf(mem_pool);
	if (!p) RET(hipErrorInvalidValue);
	poolRelease(p, min_bytes_to_hold);
	RET(hipSuccess);
}

static hipError_t checkAccessDesc(const char* fn, const hipMemAccessDesc* d) {
	hipError_t r = checkLocation(fn, "hipMemAccessDesc", &d->location);
	if (r) return r;
	switch (d->flags) {
	case hipMemAccessFlagsProtNone:
	case hipMemAccessFlagsProtRead:
	case hipMemAccessFlagsProtReadWrite:
		break;
	default:
		return loud(fn, "hipMemAccessDesc.flags %d is not a hipMemAccessFlags value", (int)d->flags);
	}
	unsigned char covered[sizeof(hipMemAccessDesc)] = {0};
	COVER(covered, hipMemAccessDesc, location);
	COVER(covered, hipMemAccessDesc, flags);
	return checkZeroOutside(fn, "hipMemAccessDesc", d, sizeof *d, covered);
}

EXPORT hipError_t hipMemPoolSetAccess(hipMemPool_t mem_pool, const hipMemAccessDesc* desc_list, size_t count) {
	LOCK();
	fpool* p = poolOf(mem_pool);
	if (!p || (!desc_list && count)) RET(hipErrorInvalidValue);
	for (size_t i = 0; i < count; i++) {
		hipError_t r = checkAccessDesc("hipMemPoolSetAccess", &desc_list[i]);
		if (r) RET(r);
		int d = desc_list[i].location.id;
		if (d == p->dev && desc_list[i].flags != hipMemAccessFlagsProtReadWrite) RET(hipErrorInvalidDevice);
		if (d != p->dev && desc_list[i].flags != hipMemAccessFlagsProtNone && !peerOn[d][p->dev] && 0)
			RET(hipErrorInvalidDevice);
		p->access[d] = desc_list[i].flags;
	}
	RET(hipSuccess);
}

EXPORT hipError_t hipMemPoolGetAccess(hipMemAccessFlags* flags, hipMemPool_t mem_pool, hipMemLocation* location) {
	LOCK();
	fpool* p = poolOf(mem_pool);
	if (!p || !flags || !location) RET(hipErrorInvalidValue);
	hipError_t r = checkLocation("hipMemPoolGetAccess", "hipMemLocation", location);
	if (r) RET(r);
	*flags = (hipMemAccessFlags)p->access[location->id];
	RET(hipSuccess);
}

static hipError_t streamAlloc(void** dev_ptr, size_t size, fpool* p, fstream* s) {
	if (!dev_ptr) return hipErrorInvalidValue;
	if (size == 0) {
		*dev_ptr = NULL;
		return hipSuccess;
	}
	if (s->capture == hipStreamCaptureStatusInvalidated) return hipErrorStreamCaptureInvalidated;
	if (s->capture == hipStreamCaptureStatusActive) {
		// A memory node: the graph owns the memory for its whole life.
		if (s->graph->nowned == 16) return note(hipErrorNotSupported, "hipMallocAsync", "more than 16 memory nodes in a capture");
		alloc* a = addAlloc(size, K_GRAPH, p->dev);
		if (!a) return hipErrorOutOfMemory;
		s->graph->owned[s->graph->nowned++] = a->base;
		*dev_ptr = a->base;
		return hipSuccess;
	}
	return poolAlloc(dev_ptr, size, p);
}

EXPORT hipError_t hipMallocAsync(void** dev_ptr, size_t size, hipStream_t stream) {
	LOCK();
	STREAM(s, stream, "hipMallocAsync");
	RET(streamAlloc(dev_ptr, size, defaultPool(s->dev), s));
}

EXPORT hipError_t hipMallocFromPoolAsync(void** dev_ptr, size_t size, hipMemPool_t mem_pool, hipStream_t stream) {
	LOCK();
	fpool* p = poolOf(mem_pool);
	if (!p) RET(note(hipErrorInvalidValue, "hipMallocFromPoolAsync", "unknown pool"));
	STREAM(s, stream, "hipMallocFromPoolAsync");
	RET(streamAlloc(dev_ptr, size, p, s));
}

EXPORT hipError_t hipFreeAsync(void* dev_ptr, hipStream_t stream) {
	LOCK();
	STREAM(s, stream, "hipFreeAsync");
	if (!dev_ptr) RET(hipSuccess);
	alloc* a = findExact(dev_ptr);
	if (s->capture == hipStreamCaptureStatusActive) {
		if (a && a->kind == K_GRAPH) RET(hipSuccess); // freed with the graph
		RET(note(hipErrorNotSupported, "hipFreeAsync", "freeing memory the capture did not allocate is not faked"));
	}
	if (!a || a->kind != K_POOL) RET(note(hipErrorInvalidValue, "hipFreeAsync", "not a live stream-ordered allocation"));
	op* o = newOp(OP_FREE);
	o->dst = dev_ptr;
	RET(submit(s, o));
}

// ---------------------------------------------------------------------------
// Stream capture and graphs

EXPORT hipError_t hipStreamBeginCapture(hipStream_t stream, hipStreamCaptureMode mode) {
	LOCK();
	switch (mode) {
	case hipStreamCaptureModeGlobal:
	case hipStreamCaptureModeThreadLocal:
	case hipStreamCaptureModeRelaxed:
		break;
	default:
		RET(loud("hipStreamBeginCapture", "mode %d is not a hipStreamCaptureMode", (int)mode));
	}
	if (!stream) RET(hipErrorStreamCaptureUnsupported); // the legacy default stream
	STREAM(s, stream, "hipStreamBeginCapture");
	if (s->capture != hipStreamCaptureStatusNone) RET(hipErrorIllegalState);
	drain(s);
	fgraph* g = calloc(1, sizeof *g);
	g->refs = 1;
	reg(g, H_GRAPH);
	s->graph = g;
	s->capture = hipStreamCaptureStatusActive;
	s->mode = mode;
	s->thread = pthread_self();
	s->captureID = nextCaptureID++;
	RET(hipSuccess);
}

static void dropCapture(fstream* s) {
	graphUnref(s->graph);
	s->graph = NULL;
	s->capture = hipStreamCaptureStatusNone;
}

EXPORT hipError_t hipStreamEndCapture(hipStream_t stream, hipGraph_t* pGraph) {
	LOCK();
	STREAM(s, stream, "hipStreamEndCapture");
	if (!s || s->capture == hipStreamCaptureStatusNone) RET(hipErrorIllegalState);
	if (s->mode != hipStreamCaptureModeRelaxed && !pthread_equal(s->thread, pthread_self())) {
		dropCapture(s);
		RET(hipErrorStreamCaptureWrongThread);
	}
	if (s->capture == hipStreamCaptureStatusInvalidated) {
		dropCapture(s);
		RET(hipErrorStreamCaptureInvalidated);
	}
	if (!pGraph) RET(hipErrorInvalidValue);
	*pGraph = (hipGraph_t)s->graph;
	s->graph = NULL;
	s->capture = hipStreamCaptureStatusNone;
	RET(hipSuccess);
}

EXPORT hipError_t hipStreamIsCapturing(hipStream_t stream, hipStreamCaptureStatus* pCaptureStatus) {
	LOCK();
	STREAM(s, stream, "hipStreamIsCapturing");
	if (!pCaptureStatus) RET(hipErrorInvalidValue);
	*pCaptureStatus = (hipStreamCaptureStatus)s->capture;
	RET(hipSuccess);
}

EXPORT hipError_t hipStreamGetCaptureInfo_v2(hipStream_t stream, hipStreamCaptureStatus* captureStatus_out,
	unsigned long long* id_out, hipGraph_t* graph_out, const hipGraphNode_t** dependencies_out,
	size_t* numDependencies_out) {
	LOCK();
	STREAM(s, stream, "hipStreamGetCaptureInfo_v2");
	if (!captureStatus_out) RET(hipErrorInvalidValue);
	*captureStatus_out = (hipStreamCaptureStatus)s->capture;
	int active = s->capture == hipStreamCaptureStatusActive;
	if (id_out) *id_out = active ? s->captureID : 0;
	if (graph_out) *graph_out = active ? (hipGraph_t)s->graph : NULL;
	if (dependencies_out) *dependencies_out = NULL;
	if (numDependencies_out) *numDependencies_out = 0;
	RET(hipSuccess);
}

static fgraph* graphOf(hipGraph_t g) { return g && known(g, H_GRAPH) ? (fgraph*)g : NULL; }

EXPORT hipError_t hipGraphInstantiateWithFlags(hipGraphExec_t* pGraphExec, hipGraph_t graph, unsigned long long flags) {
	LOCK();
	if (flags != 0) RET(loud("hipGraphInstantiateWithFlags", "flags %#llx, want 0", flags));
	fgraph* g = graphOf(graph);
	if (!g || !pGraphExec) RET(hipErrorInvalidValue);
	fexec* x = calloc(1, sizeof *x);
	x->g = g;
	g->refs++;
	reg(x, H_EXEC);
	*pGraphExec = (hipGraphExec_t)x;
	RET(hipSuccess);
}

EXPORT hipError_t hipGraphLaunch(hipGraphExec_t graphExec, hipStream_t stream) {
	LOCK();
	if (!graphExec || !known(graphExec, H_EXEC)) RET(hipErrorInvalidValue);
	STREAM(s, stream, "hipGraphLaunch");
	if (s->capture != hipStreamCaptureStatusNone) RET(note(hipErrorNotSupported, "hipGraphLaunch", "launch into a capture"));
	for (op* o = ((fexec*)graphExec)->g->head; o; o = o->next) {
		op* c = newOp(o->kind);
		*c = *o;
		append(&s->head, &s->tail, c);
	}
	advanceStream(s);
	RET(hipSuccess);
}

EXPORT hipError_t hipGraphExecDestroy(hipGraphExec_t graphExec) {
	LOCK();
	if (!graphExec || !known(graphExec, H_EXEC)) RET(hipErrorInvalidValue);
	fexec* x = (fexec*)graphExec;
	// Launches still queued read the graph's memory: let them finish.
	drainAll(-1, 0);
	unreg(x);
	graphUnref(x->g);
	free(x);
	RET(hipSuccess);
}

EXPORT hipError_t hipGraphDestroy(hipGraph_t graph) {
	LOCK();
	fgraph* g = graphOf(graph);
	if (!g) RET(hipErrorInvalidValue);
	for (size_t i = 0; i < nhandles; i++)
		if (handles[i].type == H_STREAM && ((fstream*)handles[i].p)->graph == g)
			RET(note(hipErrorInvalidValue, "hipGraphDestroy", "the graph is still being captured"));
	graphUnref(g);
	RET(hipSuccess);
}

#if HIP_VERSION >= 50300000
EXPORT hipError_t hipUserObjectCreate(hipUserObject_t* object_out, void* ptr, hipHostFn_t destroy,
	unsigned int initialRefcount, unsigned int flags) {
	LOCK();
	if (flags != hipUserObjectNoDestructorSync)
		RET(loud("hipUserObjectCreate", "flags %#x, want hipUserObjectNoDestructorSync (%d)", flags,
			(int)hipUserObjectNoDestructorSync));
	if (!object_out || !destroy || initialRefcount == 0) RET(hipErrorInvalidValue);
	fuobj* o = calloc(1, sizeof *o);
	o->ptr = ptr, o->destroy = destroy, o->refs = initialRefcount;
	reg(o, H_UOBJ);
	*object_out = (hipUserObject_t)o;
	RET(hipSuccess);
}

EXPORT hipError_t hipUserObjectRelease(hipUserObject_t object, unsigned int count) {
	LOCK();
	if (!object || !known(object, H_UOBJ) || count == 0) RET(hipErrorInvalidValue);
	uobjRelease((fuobj*)object, count);
	RET(hipSuccess);
}

EXPORT hipError_t hipGraphRetainUserObject(hipGraph_t graph, hipUserObject_t object, unsigned int count,
	unsigned int flags) {
	LOCK();
	if (flags != 0 && flags != hipGraphUserObjectMove)
		RET(loud("hipGraphRetainUserObject", "flags %#x, want 0 or hipGraphUserObjectMove", flags));
	fgraph* g = graphOf(graph);
	if (!g || !object || !known(object, H_UOBJ) || count == 0) RET(hipErrorInvalidValue);
	if (g->nuobjs == 16) RET(note(hipErrorNotSupported, "hipGraphRetainUserObject", "more than 16 user objects"));
	fuobj* o = (fuobj*)object;
	if (!(flags & hipGraphUserObjectMove)) o->refs += count;
	g->uobjs[g->nuobjs].o = o;
	g->uobjs[g->nuobjs++].n = count;
	RET(hipSuccess);
}
#endif

// ---------------------------------------------------------------------------
// Virtual memory

#define GRAN_MIN (64u << 10)
#define GRAN_REC (2u << 20)

typedef struct vreserve {
	char* base;
	size_t size;
	struct vreserve* next;
} vreserve;
static vreserve* reserves;

typedef struct fvmem {
	int dev, fd;
	size_t size;
	int maps;
	int released;
} fvmem;

typedef struct vmap {
	char* base;
	size_t size;
	fvmem* h;
	int access[MAXDEV];
	struct vmap* next;
} vmap;
static vmap* vmaps;

static hipError_t checkAllocProp(const char* fn, const hipMemAllocationProp* p) {
	if (p->type != hipMemAllocationTypePinned)
		return loud(fn, "hipMemAllocationProp.type %d, want hipMemAllocationTypePinned (%d)", (int)p->type,
			(int)hipMemAllocationTypePinned);
	if (p->requestedHandleType != hipMemHandleTypeNone)
		return loud(fn, "hipMemAllocationProp.requestedHandleType %d, want hipMemHandleTypeNone", (int)p->requestedHandleType);
	hipError_t r = checkLocation(fn, "hipMemAllocationProp", &p->location);
	if (r) return r;
	if (p->win32HandleMetaData) return loud(fn, "hipMemAllocationProp.win32HandleMetaData %p, want NULL", p->win32HandleMetaData);
	unsigned char covered[sizeof(hipMemAllocationProp)] = {0};
	COVER(covered, hipMemAllocationProp, type);
	COVER(covered, hipMemAllocationProp, requestedHandleType);
	COVER(covered, hipMemAllocationProp, location);
	COVER(covered, hipMemAllocationProp, win32HandleMetaData);
	// The remaining fields must be zero: left to the byte check.
	return checkZeroOutside(fn, "hipMemAllocationProp", p, sizeof *p, covered);
}

EXPORT hipError_t hipMemGetAllocationGranularity(size_t* granularity, const hipMemAllocationProp* prop,
	hipMemAllocationGranularity_flags option) {
	LOCK();
	if (!granularity || !prop) RET(hipErrorInvalidValue);
	hipError_t r = checkAllocProp("hipMemGetAllocationGranularity", prop);
	if (r) RET(r);
	switch (option) {
	case hipMemAllocationGranularityMinimum: *granularity = GRAN_MIN; break;
	case hipMemAllocationGranularityRecommended: *granularity = GRAN_REC; break;
	default:
		RET(loud("hipMemGetAllocationGranularity", "option %d is not a hipMemAllocationGranularity_flags", (int)option));
	}
	RET(hipSuccess);
}

EXPORT hipError_t hipMemAddressReserve(void** ptr, size_t size, size_t alignment, void* addr, unsigned long long flags) {
	LOCK();
	if (flags != 0) RET(loud("hipMemAddressReserve", "flags %#llx, want 0", flags));
	if (!ptr || size == 0) RET(hipErrorInvalidValue);
	if (size % GRAN_MIN) RET(note(hipErrorOutOfMemory, "hipMemAddressReserve", "size not a multiple of the granularity (clr answers out of memory)"));
	size_t align = alignment > GRAN_MIN ? alignment : GRAN_MIN;
	(void)addr;
	char* p = mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) RET(hipErrorOutOfMemory);
	char* base = (char*)(((uintptr_t)p + align - 1) / align * align);
	if (base > p) munmap(p, (size_t)(base - p));
	if (base + size < p + size + align) munmap(base + size, (size_t)(p + size + align - (base + size)));
	vreserve* v = calloc(1, sizeof *v);
	v->base = base, v->size = size, v->next = reserves;
	reserves = v;
	*ptr = base;
	RET(hipSuccess);
}

EXPORT hipError_t hipMemAddressFree(void* devPtr, size_t size) {
	LOCK();
	for (vreserve** pv = &reserves; *pv; pv = &(*pv)->next) {
		vreserve* v = *pv;
		if (v->base != devPtr) continue;
		if (v->size != size) RET(note(hipErrorInvalidValue, "hipMemAddressFree", "size differs from the reservation's"));
		for (vmap* m = vmaps; m; m = m->next)
			if (m->base >= v->base && m->base < v->base + v->size)
				RET(note(hipErrorInvalidValue, "hipMemAddressFree", "the range is still mapped"));
		munmap(v->base, v->size);
		*pv = v->next;
		free(v);
		RET(hipSuccess);
	}
	RET(note(hipErrorInvalidValue, "hipMemAddressFree", "not a reservation"));
}

EXPORT hipError_t hipMemCreate(hipMemGenericAllocationHandle_t* handle, size_t size, const hipMemAllocationProp* prop,
	unsigned long long flags) {
	LOCK();
	if (flags != 0) RET(loud("hipMemCreate", "flags %#llx, want 0", flags));
	if (!handle || !prop) RET(hipErrorInvalidValue);
	hipError_t r = checkAllocProp("hipMemCreate", prop);
	if (r) RET(r);
	if (size == 0 || size % GRAN_MIN) RET(note(hipErrorInvalidValue, "hipMemCreate", "size not a multiple of the granularity"));
	int dev = prop->location.id;
	if (devUsed[dev] + size > capacity) RET(hipErrorOutOfMemory);
	int fd = memfd_create("fakehip", 0);
	if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
		if (fd >= 0) close(fd);
		RET(hipErrorOutOfMemory);
	}
	fvmem* h = calloc(1, sizeof *h);
	h->dev = dev, h->fd = fd, h->size = size;
	devUsed[dev] += size;
	reg(h, H_VMEM);
	*handle = (hipMemGenericAllocationHandle_t)h;
	RET(hipSuccess);
}

static void vmemMaybeFree(fvmem* h) {
	if (!h->released || h->maps) return;
	devUsed[h->dev] -= h->size;
	close(h->fd);
	free(h);
}

EXPORT hipError_t hipMemRelease(hipMemGenericAllocationHandle_t handle) {
	LOCK();
	if (!handle || !known(handle, H_VMEM)) RET(note(hipErrorInvalidValue, "hipMemRelease", "unknown handle"));
	fvmem* h = (fvmem*)handle;
	unreg(h);
	h->released = 1;
	vmemMaybeFree(h);
	RET(hipSuccess);
}

EXPORT hipError_t hipMemMap(void* ptr, size_t size, size_t offset, hipMemGenericAllocationHandle_t handle,
	unsigned long long flags) {
	LOCK();
	if (flags != 0) RET(loud("hipMemMap", "flags %#llx, want 0", flags));
	if (!handle || !known(handle, H_VMEM)) RET(note(hipErrorInvalidValue, "hipMemMap", "unknown handle"));
	fvmem* h = (fvmem*)handle;
	char* p = ptr;
	if ((uintptr_t)p % GRAN_MIN || size % GRAN_MIN || offset % GRAN_MIN || offset + size > h->size || size == 0)
		RET(note(hipErrorInvalidValue, "hipMemMap", "misaligned or beyond the allocation"));
	vreserve* v = reserves;
	for (; v; v = v->next)
		if (p >= v->base && p + size <= v->base + v->size) break;
	if (!v) RET(note(hipErrorInvalidValue, "hipMemMap", "not inside a reservation"));
	for (vmap* m = vmaps; m; m = m->next)
		if (p < m->base + m->size && m->base < p + size) RET(note(hipErrorInvalidValue, "hipMemMap", "overlaps a mapping"));
	if (mmap(p, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, h->fd, (off_t)offset) == MAP_FAILED)
		RET(hipErrorOutOfMemory);
	vmap* m = calloc(1, sizeof *m);
	m->base = p, m->size = size, m->h = h, m->next = vmaps;
	vmaps = m;
	h->maps++;
	RET(hipSuccess);
}

EXPORT hipError_t hipMemUnmap(void* ptr, size_t size) {
	LOCK();
	for (vmap** pm = &vmaps; *pm; pm = &(*pm)->next) {
		vmap* m = *pm;
		if (m->base != ptr) continue;
		// clr releases the one mapping at ptr: a size spanning more is a
		// caller that expects otherwise.
		if (m->size != size) RET(note(hipErrorInvalidValue, "hipMemUnmap", "size differs from the mapping's at ptr"));
		mmap(m->base, m->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
		*pm = m->next;
		m->h->maps--;
		vmemMaybeFree(m->h);
		free(m);
		RET(hipSuccess);
	}
	RET(note(hipErrorInvalidValue, "hipMemUnmap", "no mapping starts at ptr"));
}

EXPORT hipError_t hipMemSetAccess(void* ptr, size_t size, const hipMemAccessDesc* desc, size_t count) {
	LOCK();
	if (!desc || count == 0) RET(hipErrorInvalidValue);
	for (size_t i = 0; i < count; i++) {
		hipError_t r = checkAccessDesc("hipMemSetAccess", &desc[i]);
		if (r) RET(r);
	}
	char* p = ptr;
	int any = 0;
	for (vmap* m = vmaps; m; m = m->next) {
		if (m->base + m->size <= p || m->base >= p + size) continue;
		any = 1;
		for (size_t i = 0; i < count; i++) m->access[desc[i].location.id] = desc[i].flags;
	}
	if (!any) RET(note(hipErrorInvalidValue, "hipMemSetAccess", "nothing mapped there"));
	RET(hipSuccess);
}

// ---------------------------------------------------------------------------
// Peers

EXPORT hipError_t hipDeviceCanAccessPeer(int* canAccessPeer, int deviceId, int peerDeviceId) {
	LOCK();
	if (!validDev(deviceId) || !validDev(peerDeviceId)) RET(hipErrorInvalidDevice);
	if (!canAccessPeer) RET(hipErrorInvalidValue);
	*canAccessPeer = deviceId != peerDeviceId;
	RET(hipSuccess);
}

EXPORT hipError_t hipDeviceEnablePeerAccess(int peerDeviceId, unsigned int flags) {
	LOCK();
	if (flags != 0) RET(loud("hipDeviceEnablePeerAccess", "flags %#x, want 0", flags));
	if (!validDev(peerDeviceId) || peerDeviceId == curDev) RET(hipErrorInvalidDevice);
	if (peerOn[curDev][peerDeviceId]) RET(hipErrorPeerAccessAlreadyEnabled);
	peerOn[curDev][peerDeviceId] = 1;
	RET(hipSuccess);
}

EXPORT hipError_t hipDeviceDisablePeerAccess(int peerDeviceId) {
	LOCK();
	if (!validDev(peerDeviceId)) RET(hipErrorInvalidDevice);
	if (!peerOn[curDev][peerDeviceId]) RET(hipErrorPeerAccessNotEnabled);
	peerOn[curDev][peerDeviceId] = 0;
	RET(hipSuccess);
}
