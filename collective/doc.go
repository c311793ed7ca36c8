// Package collective is NCCL's and RCCL's collectives without cgo: unique
// ids, communicators of one process driving several devices (InitAll) or
// of one rank per process (InitRank), all-reduce, all-gather,
// reduce-scatter, broadcast, reduce, send and receive, groups, abort and
// asynchronous errors, on gpumem streams and on buffers from any allocator.
//
// On the CUDA backend the package loads libnccl.so.2 (GPUMEM_NCCL_LIBRARY
// names another file), on the HIP backend librccl.so.1
// (GPUMEM_RCCL_LIBRARY): the two libraries share their names, signatures
// and enum values, so one table (Table) serves both, with the header it
// follows cited in table.go. The library is opened once per process, at
// the first call that needs it, through package bind; every call that
// needs a device makes the device's context current in the same transition
// into C, so communicators are made and used from any goroutine.
//
// On the simulator (package sim) the same API runs an engine written in
// Go: collectives across the simulated devices of one *sim.GPU, each
// rank's call queued on its stream and run when every rank's stream has
// reached it (sim.Rendezvous), with the simulator's use-after-free
// detector checking every buffer; so code that calls collectives is tested
// with no GPU. It reduces every type but the 8-bit floats, in rank order.
// It is more lenient than NCCL in one way: one goroutine may issue the
// calls of several ranks without a Group, since queueing never blocks.
//
// # Rules the package enforces
//
// Go checks what it can before the library is called: counts are not
// negative and buffer sizes do not overflow; the data type and reduction
// are known; roots and peers are ranks of the communicator; the stream is
// of the communicator's device; buffers a call reads or writes on this
// rank are not null. Those are errors matching gpumem.ErrInvalidValue; a
// closed or aborted communicator gives gpumem.ErrClosed; a library status
// is a *bind.Error (ncclInvalidArgument and ncclInvalidUsage match
// ErrInvalidValue) with, where the library has ncclGetLastError, its
// message. A Comm's methods are safe for concurrent use: calls into the
// library are serialised (NCCL's communicators are not thread-safe), but
// AsyncError and Abort do not wait for a call in progress, so a watchdog
// goroutine can abort a communicator whose call is stuck on a failed rank.
//
// # Groups
//
// NCCL's group state belongs to the OS thread. Group(b, fn) runs fn between
// ncclGroupStart and ncclGroupEnd with the goroutine locked to its thread;
// the calls fn makes on that goroutine form the group. The simulator groups
// by thread the same way (on Linux; elsewhere a group takes the calls of
// every goroutine while it is open).
//
// # Passing the unique id
//
// ncclCommInitRank takes its 128-byte ncclUniqueId by value. On amd64 the
// System V ABI passes it in the first sixteen stack slots with the rank in
// the third register; on arm64 AAPCS64 passes a pointer to a caller's
// copy. uniqueid_amd64.go and uniqueid_arm64.go lay the words out;
// TestUniqueIDByValueC checks them against C functions of the same
// parameter lists (testdata/idbyval.c) built by a C compiler.
package collective
