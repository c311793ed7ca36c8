// Tiers, and the descriptions of buffers given to callbacks and policies.
//
// See doc.go for an overview.

package deferrable

import "fmt"

// Tier is where a buffer's bytes live.
type Tier int

// Tiers, fastest first.
const (
	TierDevice Tier = iota // device memory of the manager's device
	TierHost               // page-locked host memory of the manager's pinned arena
	TierDisk               // a private, unlinked file under Options.DiskDir
	numTiers
)

// String names the tier ("device", "host", "disk").
func (t Tier) String() string {
	switch t {
	case TierDevice:
		return "device"
	case TierHost:
		return "host"
	case TierDisk:
		return "disk"
	}
	return fmt.Sprintf("tier(%d)", int(t))
}

// Info describes a buffer to callbacks and policies.
type Info struct {
	ID       uint64 // unique within the manager, from 1
	Size     uint64 // bytes
	Priority int    // lower is spilled first
	Tier     Tier   // where the bytes are after the event being reported
}

// Callbacks are told of each buffer's life. Every field may be nil. They are
// called after the event, with no lock of the manager held, on the goroutine
// that caused the event; they may call the manager, but a callback that blocks
// delays that goroutine (an allocation, an Acquire, an OOM handler).
type Callbacks struct {
	Register func(Info)                 // a buffer was allocated
	Free     func(Info)                 // a buffer was freed (Free or Close)
	Spill    func(info Info, from Tier) // a buffer moved down, from `from` to info.Tier
	Unspill  func(info Info, from Tier) // a buffer moved up, from `from` to info.Tier
}
