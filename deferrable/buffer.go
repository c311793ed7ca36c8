// The Buffer: its identity, tier and priority, and the waits on a move in flight.
//
// See doc.go for an overview.

package deferrable

import (
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/extent"
)

// Buffer is a deferrable buffer: device memory that the manager may move to
// the host or to disk while nobody holds it. Its device address is reachable
// only while it is held (Acquire, AcquireAsync, LockAndLaunch); an address
// must not be used after the hold is released, because the next Acquire may
// return another one.
type Buffer struct {
	m    *Manager
	id   uint64
	size uint64

	// Guarded by m.mu. While moving is set, the fields describing where the
	// bytes are (tier, dptr, hblk, ext) belong to the goroutine moving it.
	tier     Tier
	moving   bool
	freed    bool
	priority int
	lastUsed uint64
	dptr     gpumem.Ptr    // TierDevice
	hblk     hostBlock     // TierHost
	ext      extent.Extent // TierDisk

	syncLocks   int                            // Acquire holds
	syncStreams []gpumem.Stream                // streams of the current Acquire holds
	held        map[gpumem.Stream]int          // AcquireAsync holds not yet released, per stream
	pending     map[gpumem.Stream]int          // async releases waiting for fences[s]
	fences      map[gpumem.Stream]gpumem.Event // last recorded use on each stream
	ready       bool                           // readyEv marks an allocation or unspill that Acquire must order after
	readyEv     gpumem.Event                   // recorded on the copy stream
}

// ID is the buffer's number, unique within its manager.
func (b *Buffer) ID() uint64 {
	if b == nil {
		return 0
	}
	return b.id
}

// Size is the buffer's size in bytes.
func (b *Buffer) Size() uint64 {
	if b == nil {
		return 0
	}
	return b.size
}

func (b *Buffer) infoLocked() Info {
	return Info{ID: b.id, Size: b.size, Priority: b.priority, Tier: b.tier}
}

func (b *Buffer) valid(op string) error {
	if b == nil || b.m == nil {
		return fmt.Errorf("deferrable: %s: nil buffer: %w", op, gpumem.ErrInvalidValue)
	}
	return nil
}

// usableLocked says why the buffer cannot be used, if it cannot.
func (b *Buffer) usableLocked(op string) error {
	if b.m.closed {
		return fmt.Errorf("deferrable: %s: %w", op, gpumem.ErrClosed)
	}
	if b.freed {
		return fmt.Errorf("deferrable: %s: buffer %d was freed: %w", op, b.id, gpumem.ErrInvalidValue)
	}
	return nil
}

// lockUsable checks b, locks its manager and checks that b can be used;
// on success the manager is returned locked, on failure unlocked.
func (b *Buffer) lockUsable(op string) (*Manager, error) {
	if err := b.valid(op); err != nil {
		return nil, err
	}
	m := b.m
	m.mu.Lock()
	if err := b.usableLocked(op); err != nil {
		m.mu.Unlock()
		return nil, err
	}
	return m, nil
}

// waitLocked waits until no goroutine is moving b, then checks it is usable.
func (b *Buffer) waitLocked(op string) error {
	for {
		if err := b.usableLocked(op); err != nil {
			return err
		}
		if !b.moving {
			return nil
		}
		b.m.cond.Wait()
	}
}

// Where reports the buffer's tier; for a freed buffer, the tier it was freed
// from. A buffer being moved reports where it was until the move completes.
func (b *Buffer) Where() Tier {
	if b == nil || b.m == nil {
		return TierDevice
	}
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	return b.tier
}

// Priority returns the buffer's spill priority.
func (b *Buffer) Priority() int {
	if b == nil || b.m == nil {
		return 0
	}
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	return b.priority
}

// SetPriority sets the buffer's spill priority: buffers of lower priority are
// spilled first (with the default policy). The default is 0.
func (b *Buffer) SetPriority(p int) error {
	if err := b.valid("set priority"); err != nil {
		return err
	}
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	if err := b.usableLocked("set priority"); err != nil {
		return err
	}
	b.priority = p
	return nil
}
