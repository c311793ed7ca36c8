package sim

import (
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// The simulator speaks the CUDA driver's status codes: their numbers, names
// and sentinels come from CUDA's status table (symtab.Statuses[symtab.CUDA]),
// the table the CUDA backend reads.
var cudaStatuses = symtab.Statuses[symtab.CUDA]

// errorName returns CUDA's name for a status code, as cuGetErrorName does, or
// "" for a code CUDA does not define here.
func errorName(code int) string { return cudaStatuses.Name(code) }

// vendorErr is the *gpumem.Error a real driver would return for code. The
// simulator reports the codes a shut-down driver returns (not initialised,
// deinitialised) only once it is closed, so they match ErrClosed.
func vendorErr(m symtab.Op, code int) *gpumem.Error {
	return &gpumem.Error{Backend: "sim", Op: opSymbol(m), Code: code, Name: cudaStatuses.Name(code), Err: cudaStatuses.Sentinel(code, true)}
}

// errf returns the vendor error for code wrapped with a sentence that says
// what was wrong; errors.As still finds the *gpumem.Error.
func errf(m symtab.Op, code int, format string, args ...any) error {
	return fmt.Errorf("sim: %s: %s: %w", opName(m), fmt.Sprintf(format, args...), vendorErr(m, code))
}

// errNil is the error of method op on a nil *GPU (what a failed New
// returns).
func errNil(op string) error {
	return fmt.Errorf("sim: %s on a nil GPU: %w", op, gpumem.ErrInvalidValue)
}
