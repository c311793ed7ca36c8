package sim

import "fmt"

// Memory that is reserved but not mapped: an address inside a live
// address reservation (MemAddressReserve) where no physical memory is
// mapped, as after MemUnmap, or while an allocator that releases its
// memory and keeps its addresses (the caching allocator's Sleep) is
// asleep. Using it is undefined on a GPU; the simulator says so: an
// enqueue fails with CUDA_ERROR_INVALID_VALUE, and a kernel that touches it
// is stopped with an illegal address, a Violation, with this description.

// unmappedWhy describes address a when it lies in a live reservation with
// nothing mapped there, or returns "" when it does not. Lock held.
func (g *GPU) unmappedWhy(a uint64) string {
	r := g.reserves.floor(a)
	if r == nil || r.freed || a >= r.end() {
		return ""
	}
	return fmt.Sprintf("%#x is reserved (the address reservation [%#x, +%d)) but no physical memory is mapped there: "+
		"it was unmapped, as while an allocator that released its memory (Sleep) is asleep; using it is undefined", a, r.start, r.size)
}

// notAllocated describes an address in no allocation, reserved or not.
// Lock held.
func (g *GPU) notAllocated(a uint64) string {
	if why := g.unmappedWhy(a); why != "" {
		return why
	}
	return fmt.Sprintf("%#x is not in any allocation", a)
}
