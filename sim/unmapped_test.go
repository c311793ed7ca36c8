package sim_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

// Work on a reservation whose memory was unmapped fails with a message that
// says so; an address outside every reservation is named as before.
func TestUnmappedReservationNamed(t *testing.T) {
	g := newSim(t, sim.Config{})
	gran, _ := g.MemGranularity(0, false)
	va, err := g.MemAddressReserve(2*gran, 0)
	ok(t, err)
	h, err := g.MemCreate(0, gran)
	ok(t, err)
	ok(t, g.MemMap(va, gran, 0, h))
	ok(t, g.MemSetAccess(va, gran, 0, gpumem.AccessReadWrite))
	ok(t, g.MemsetAsync(va, 1, gran, gpumem.Stream{}))
	ok(t, g.DeviceSynchronize(0))
	ok(t, g.MemUnmap(va, gran))
	ok(t, g.MemRelease(h))
	err = g.MemsetAsync(va, 1, 16, gpumem.Stream{})
	if !errors.Is(err, gpumem.ErrInvalidValue) || !strings.Contains(err.Error(), "no physical memory is mapped") {
		t.Fatalf("memset on unmapped reserved memory: %v", err)
	}
	ok(t, g.MemAddressFree(va, 2*gran))
	err = g.MemsetAsync(va, 1, 16, gpumem.Stream{})
	if !errors.Is(err, gpumem.ErrInvalidValue) || !strings.Contains(err.Error(), "not in any allocation") {
		t.Fatalf("memset on freed reservation: %v", err)
	}
}
