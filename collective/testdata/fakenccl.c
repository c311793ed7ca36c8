/* A stand-in for libnccl.so.2 with nccl.h's signatures, for testing the
 * collective package's native engine on a machine with no GPU: every call
 * records its arguments, the device made current before it
 * (fake_set_current, the test backend's make-current function) and the OS
 * thread it ran on. Communicators are small records; collectives touch no
 * memory. */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct { char internal[128]; } ncclUniqueId;

struct comm { int64_t nranks, rank, dev; };

struct call {
	int64_t fn;      /* which function: see the enum */
	int64_t dev;     /* the current device when it was called */
	int64_t tid;     /* the OS thread */
	uint64_t a[8];   /* its arguments, as words */
};

enum { F_ALLREDUCE = 1, F_BROADCAST, F_REDUCE, F_ALLGATHER, F_REDUCESCATTER, F_SEND, F_RECV,
       F_GROUPSTART, F_GROUPEND, F_INITALL, F_INITRANK, F_DESTROY, F_ABORT, F_FINALIZE,
       F_REGISTER, F_DEREGISTER, F_UNIQUEID };

static struct comm comms[64];
static int ncomms;
static int64_t current = -1;
static struct call calls[256];
static int ncalls;
static int async_status;

int fake_set_current(uintptr_t dev) { current = (int64_t)dev; return 0; }
int fake_calls(struct call *out, int max) {
	int n = ncalls < max ? ncalls : max;
	memcpy(out, calls, n * sizeof *out);
	ncalls = 0;
	return n;
}
void fake_set_async(int status) { async_status = status; }

static struct call *rec(int fn) {
	struct call *c = &calls[ncalls < 255 ? ncalls++ : 255];
	memset(c, 0, sizeof *c);
	c->fn = fn;
	c->dev = current;
	c->tid = syscall(SYS_gettid);
	return c;
}

static struct comm *mk(int nranks, int rank, int dev) {
	struct comm *c = &comms[ncomms++ % 64];
	c->nranks = nranks; c->rank = rank; c->dev = dev;
	return c;
}

int ncclGetVersion(int *v) { *v = 22803; return 0; }
const char *ncclGetErrorString(int r) { return r == 4 ? "invalid argument (fake)" : "fake status"; }
const char *ncclGetLastError(void *comm) { (void)comm; return "the fake's last error"; }

int ncclGetUniqueId(ncclUniqueId *id) {
	rec(F_UNIQUEID);
	for (int i = 0; i < 128; i++) id->internal[i] = (char)(i ^ 0x5a);
	return 0;
}

int ncclCommInitRank(void **comm, int nranks, ncclUniqueId id, int rank) {
	struct call *c = rec(F_INITRANK);
	c->a[0] = nranks; c->a[1] = rank;
	c->a[2] = (unsigned char)id.internal[0]; c->a[3] = (unsigned char)id.internal[127];
	*comm = mk(nranks, rank, (int)current);
	return 0;
}

int ncclCommInitRankConfig(void **comm, int nranks, ncclUniqueId id, int rank, void *config) {
	(void)config;
	return ncclCommInitRank(comm, nranks, id, rank);
}

int ncclCommInitAll(void **comm, int ndev, const int *devlist) {
	struct call *c = rec(F_INITALL);
	c->a[0] = ndev;
	for (int i = 0; i < ndev; i++) {
		if (i < 7) c->a[1 + i] = devlist[i];
		comm[i] = mk(ndev, i, devlist[i]);
	}
	return 0;
}

int ncclCommFinalize(void *comm) { rec(F_FINALIZE)->a[0] = (uintptr_t)comm; return 0; }
int ncclCommDestroy(void *comm) { rec(F_DESTROY)->a[0] = (uintptr_t)comm; return 0; }
/* An all-reduce of 777 elements waits, as one whose peer failed would,
 * until ncclCommAbort is called (from another thread), and then fails with
 * ncclRemoteError. */
static int abort_flag, aborts, in_async;
int ncclCommAbort(void *comm) {
	rec(F_ABORT)->a[0] = (uintptr_t)comm;
	__atomic_add_fetch(&aborts, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&abort_flag, 1, __ATOMIC_SEQ_CST);
	return 0;
}
/* With the asynchronous status set to SLOW_ASYNC, ncclCommGetAsyncError
 * stays in the library for 200 ms and fails with ncclInternalError if a
 * communicator was aborted meanwhile: a real library would have read freed
 * memory. */
enum { SLOW_ASYNC = 1000 };
int ncclCommGetAsyncError(void *comm, int *status) {
	(void)comm;
	if (async_status != SLOW_ASYNC) {
		*status = async_status;
		return 0;
	}
	int before = __atomic_load_n(&aborts, __ATOMIC_SEQ_CST);
	__atomic_store_n(&in_async, 1, __ATOMIC_SEQ_CST);
	usleep(200000);
	__atomic_store_n(&in_async, 0, __ATOMIC_SEQ_CST);
	*status = 0;
	return __atomic_load_n(&aborts, __ATOMIC_SEQ_CST) != before ? 3 : 0;
}
/* fake_state reports whether a slow ncclCommGetAsyncError is in the
 * library; with clear set it also forgets an abort no stuck call took. */
int fake_state(int clear) {
	if (clear) __atomic_store_n(&abort_flag, 0, __ATOMIC_SEQ_CST);
	return __atomic_load_n(&in_async, __ATOMIC_SEQ_CST);
}
int ncclCommCount(const void *comm, int *n) { *n = (int)((const struct comm *)comm)->nranks; return 0; }
int ncclCommCuDevice(const void *comm, int *d) { *d = (int)((const struct comm *)comm)->dev; return 0; }
int ncclCommUserRank(const void *comm, int *r) { *r = (int)((const struct comm *)comm)->rank; return 0; }

#define ARGS7(fn, a0, a1, a2, a3, a4, a5, a6) do { struct call *c = rec(fn); \
	c->a[0] = (uintptr_t)(a0); c->a[1] = (uintptr_t)(a1); c->a[2] = (uintptr_t)(a2); c->a[3] = (uintptr_t)(a3); \
	c->a[4] = (uintptr_t)(a4); c->a[5] = (uintptr_t)(a5); c->a[6] = (uintptr_t)(a6); } while (0)

int ncclAllReduce(const void *s, void *r, size_t n, int dt, int op, void *comm, void *st) {
	ARGS7(F_ALLREDUCE, s, r, n, dt, op, comm, st);
	if (n == 777) {
		while (!__atomic_load_n(&abort_flag, __ATOMIC_SEQ_CST)) usleep(1000);
		__atomic_store_n(&abort_flag, 0, __ATOMIC_SEQ_CST);
		return 6;
	}
	return n == 12345 ? 4 : 0;
}
int ncclBroadcast(const void *s, void *r, size_t n, int dt, int root, void *comm, void *st) {
	ARGS7(F_BROADCAST, s, r, n, dt, root, comm, st);
	return 0;
}
int ncclReduce(const void *s, void *r, size_t n, int dt, int op, int root, void *comm, void *st) {
	ARGS7(F_REDUCE, s, r, n, dt, op, root, comm);
	calls[ncalls - 1].a[7] = (uintptr_t)st;
	return 0;
}
int ncclAllGather(const void *s, void *r, size_t n, int dt, void *comm, void *st) {
	ARGS7(F_ALLGATHER, s, r, n, dt, comm, st, 0);
	return 0;
}
int ncclReduceScatter(const void *s, void *r, size_t n, int dt, int op, void *comm, void *st) {
	ARGS7(F_REDUCESCATTER, s, r, n, dt, op, comm, st);
	return 0;
}
int ncclSend(const void *s, size_t n, int dt, int peer, void *comm, void *st) {
	ARGS7(F_SEND, s, n, dt, peer, comm, st, 0);
	return 0;
}
int ncclRecv(void *r, size_t n, int dt, int peer, void *comm, void *st) {
	ARGS7(F_RECV, r, n, dt, peer, comm, st, 0);
	return 0;
}
int ncclGroupStart(void) { rec(F_GROUPSTART); return 0; }
int ncclGroupEnd(void) { rec(F_GROUPEND); return 0; }
int ncclCommRegister(const void *comm, void *buf, size_t size, void **handle) {
	ARGS7(F_REGISTER, comm, buf, size, 0, 0, 0, 0);
	*handle = (void *)(uintptr_t)0xabcdef;
	return 0;
}
int ncclCommDeregister(const void *comm, void *handle) {
	ARGS7(F_DEREGISTER, comm, handle, 0, 0, 0, 0, 0);
	return 0;
}
