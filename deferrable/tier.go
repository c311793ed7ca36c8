package deferrable

import (
	"fmt"
	"time"
)

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

// TierStats counts the buffers resident in one tier.
type TierStats struct {
	Buffers   int    `json:"buffers"`
	Bytes     uint64 `json:"bytes"`
	PeakBytes uint64 `json:"peak_bytes"`
}

// Transfer accumulates the moves of one direction between tiers.
type Transfer struct {
	Count    int64         `json:"count"`    // completed moves
	Bytes    uint64        `json:"bytes"`    // bytes moved by completed moves
	Duration time.Duration `json:"duration"` // host time of the completed moves' copies, through completion
	Failures int64         `json:"failures"` // moves that failed and left the buffer where it was
}

// BytesPerSecond is Bytes over Duration (0 when nothing was timed).
func (t Transfer) BytesPerSecond() float64 {
	if t.Duration <= 0 {
		return 0
	}
	return float64(t.Bytes) / t.Duration.Seconds()
}

func (t *Transfer) add(o Transfer) {
	t.Count += o.Count
	t.Bytes += o.Bytes
	t.Duration += o.Duration
	t.Failures += o.Failures
}

// Stats is a snapshot of a manager's state and counters.
//
// Durations are host wall-clock times of each move's copy, from its start
// until the last byte has arrived (the copy stream's event after it has
// completed, or the file write has returned): Transfer.BytesPerSecond is the
// bandwidth of the data movement. They leave out what surrounds the copy: the
// device allocation of an unspill, and giving device memory back after a
// spill.
type Stats struct {
	Device TierStats `json:"device"`
	Host   TierStats `json:"host"`
	Disk   TierStats `json:"disk"`

	PinnedBytes     uint64 `json:"pinned_bytes"`      // page-locked memory the host tier holds (slabs, used or not)
	PinnedSlabs     int    `json:"pinned_slabs"`      // its slabs
	PinnedPeakBytes uint64 `json:"pinned_peak_bytes"` // the most it ever held

	DeviceToHost Transfer `json:"device_to_host"`
	DeviceToDisk Transfer `json:"device_to_disk"`
	HostToDisk   Transfer `json:"host_to_disk"`
	HostToDevice Transfer `json:"host_to_device"`
	DiskToDevice Transfer `json:"disk_to_device"`
	DiskToHost   Transfer `json:"disk_to_host"`

	SyncLocks       int `json:"sync_locks"`       // Acquire holds not yet released
	AsyncLocks      int `json:"async_locks"`      // AcquireAsync holds not yet released
	PendingReleases int `json:"pending_releases"` // async releases whose event was not yet seen complete

	Allocs          int64  `json:"allocs"`
	Frees           int64  `json:"frees"`
	AllocRetries    int64  `json:"alloc_retries"`     // device allocations retried after spilling
	OOMHandlerCalls int64  `json:"oom_handler_calls"` // calls of the handler from OOMHandler
	OOMSpilledBytes uint64 `json:"oom_spilled_bytes"` // bytes those calls spilled
}

// Spilled sums the moves down (device to host, device to disk, host to disk).
func (s Stats) Spilled() Transfer {
	var t Transfer
	t.add(s.DeviceToHost)
	t.add(s.DeviceToDisk)
	t.add(s.HostToDisk)
	return t
}

// Unspilled sums the moves up (host or disk to device, disk to host).
func (s Stats) Unspilled() Transfer {
	var t Transfer
	t.add(s.HostToDevice)
	t.add(s.DiskToDevice)
	t.add(s.DiskToHost)
	return t
}
