package collective

import "encoding/binary"

// How ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId,
// int rank) receives its 128-byte id on amd64, by the System V AMD64 psABI
// (section 3.2.3, "Parameter Passing"): an aggregate larger than four
// eightbytes has class MEMORY and is passed on the stack, in eightbytes at
// increasing addresses from the first stack slot; MEMORY arguments take no
// register, so the integer arguments after it go on in the next free
// registers. comm is RDI, nranks RSI, rank RDX (config, for
// ncclCommInitRankConfig, RCX); RCX (or R8), R8 and R9 are unused, and the
// id is the first sixteen stack slots. bind passes argument words 7 and on
// in the stack slots, in order, so the words are
//
//	comm, nranks, rank, config-or-0, 0, 0, id[0:8], id[8:16], ..., id[120:128]
//
// (passing a word more than a function takes is harmless on this ABI).
const (
	initRankArgs       = 6 + UniqueIDBytes/8
	initRankConfigArgs = initRankArgs
	idABI              = "amd64: 16 eightbytes in the first stack slots, rank in RDX"
)

// initRankWords lays out the arguments of ncclCommInitRank (config 0) or
// ncclCommInitRankConfig. keep is what must stay alive until the call
// returns (nothing here: the id is copied into the words).
func initRankWords(comm uintptr, nranks, rank int, id *UniqueID, config uintptr) (args []uintptr, keep any) {
	args = make([]uintptr, initRankArgs)
	args[0], args[1], args[2], args[3] = comm, uintptr(nranks), uintptr(rank), config
	for i := 0; i < UniqueIDBytes/8; i++ {
		args[6+i] = uintptr(binary.LittleEndian.Uint64(id[8*i:]))
	}
	return args, nil
}
