/* Stand-ins for ncclCommInitRank and ncclCommInitRankConfig with nccl.h's
 * parameter lists, compiled by a C compiler for the test's architecture, so
 * that TestUniqueIDByValueC can check that the 128-byte ncclUniqueId the
 * collective package passes by value arrives intact, with the arguments
 * around it, on this architecture's C ABI. */
#include <stdint.h>

typedef struct { char internal[128]; } ncclUniqueId;

struct received {
	int64_t calls, nranks, rank;
	uint64_t hash; /* FNV-1a of the 128 bytes */
	int64_t first, last;
	uint64_t config;
};

static struct received got;

static uint64_t fnv(const ncclUniqueId *id) {
	uint64_t h = 1469598103934665603ULL;
	for (int i = 0; i < 128; i++) {
		h ^= (unsigned char)id->internal[i];
		h *= 1099511628211ULL;
	}
	return h;
}

static void record(void **comm, int nranks, const ncclUniqueId *id, int rank, void *config) {
	got.calls++;
	got.nranks = nranks;
	got.rank = rank;
	got.hash = fnv(id);
	got.first = (unsigned char)id->internal[0];
	got.last = (unsigned char)id->internal[127];
	got.config = (uint64_t)(uintptr_t)config;
	*comm = (void *)(uintptr_t)0x5eed;
}

int ncclCommInitRank(void **comm, int nranks, ncclUniqueId id, int rank) {
	record(comm, nranks, &id, rank, 0);
	return 0;
}

int ncclCommInitRankConfig(void **comm, int nranks, ncclUniqueId id, int rank, void *config) {
	record(comm, nranks, &id, rank, config);
	return 0;
}

void idbyval_received(struct received *out) { *out = got; }
