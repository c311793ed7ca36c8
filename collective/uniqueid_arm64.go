package collective

import "unsafe"

// How ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId,
// int rank) receives its 128-byte id on arm64, by the Procedure Call
// Standard for the Arm 64-bit Architecture (AAPCS64, section 6.8.2,
// "Parameter passing rules", stage B.4): a composite type larger than 16
// bytes is copied to memory the caller allocates and the argument is
// replaced by a pointer to the copy, which then takes the next general
// register (rule C.9 onwards). comm is X0, nranks X1, the pointer to the
// copy X2, rank X3 (config, for ncclCommInitRankConfig, X4):
//
//	comm, nranks, &copy, rank[, config]
//
// The callee may write the copy; it is the caller's and is dropped after
// the call.
const (
	initRankArgs       = 4
	initRankConfigArgs = 5
	idABI              = "arm64: a pointer to a caller's copy in X2, rank in X3"
)

// initRankWords lays out the arguments of ncclCommInitRank (config 0: four
// words) or ncclCommInitRankConfig (five). keep is the copy of the id,
// which must stay alive until the call returns.
func initRankWords(comm uintptr, nranks, rank int, id *UniqueID, config uintptr) (args []uintptr, keep any) {
	cp := new(UniqueID)
	*cp = *id
	escape(cp)
	args = []uintptr{comm, uintptr(nranks), uintptr(unsafe.Pointer(cp)), uintptr(rank)}
	if config != 0 {
		args = append(args, config)
	}
	return args, cp
}
