// Statistics and history: per-tier figures, transfer counters and the history ring.
//
// See doc.go for an overview.

package deferrable

import (
	"time"

	"github.com/gpumem/gpumem"
)

// TierStats counts the buffers resident in one tier.
type TierStats struct {
	Buffers   int    `json:"buffers"`    // buffers resident now
	Bytes     uint64 `json:"bytes"`      // their bytes
	PeakBytes uint64 `json:"peak_bytes"` // the most bytes ever resident at once
}

// Transfer accumulates the moves of one direction between tiers.
type Transfer struct {
	Count    int64         `json:"count"`    // completed moves
	Bytes    uint64        `json:"bytes"`    // bytes moved by completed moves
	Duration time.Duration `json:"duration"` // host time of the completed moves' copies, through completion
	Failures int64         `json:"failures"` // moves that failed and left the buffer where it was
	// Fallbacks counts spills to the host that the pinned arena could not
	// place and that went to disk instead (counted there): not failures.
	Fallbacks int64 `json:"fallbacks"`
}

// BytesPerSecond is Bytes over Duration (0 when nothing was timed).
func (t Transfer) BytesPerSecond() float64 {
	if t.Duration <= 0 {
		return 0
	}
	return float64(t.Bytes) / t.Duration.Seconds()
}

// done counts a completed move of size bytes whose copies took dur.
func (t *Transfer) done(size uint64, dur time.Duration) {
	t.Count++
	t.Bytes += size
	t.Duration += dur
}

func (t *Transfer) add(o Transfer) {
	t.Count += o.Count
	t.Bytes += o.Bytes
	t.Duration += o.Duration
	t.Failures += o.Failures
	t.Fallbacks += o.Fallbacks
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
	Device TierStats `json:"device"` // buffers in device memory
	Host   TierStats `json:"host"`   // buffers in the pinned host arena
	Disk   TierStats `json:"disk"`   // buffers in the disk file

	PinnedBytes     uint64 `json:"pinned_bytes"`      // page-locked memory the host tier holds (slabs, used or not)
	PinnedSlabs     int    `json:"pinned_slabs"`      // its slabs
	PinnedPeakBytes uint64 `json:"pinned_peak_bytes"` // the most it ever held

	DeviceToHost Transfer `json:"device_to_host"` // spills into the pinned arena, one DMA each
	DeviceToDisk Transfer `json:"device_to_disk"` // spills straight to disk, through the staging ring
	HostToDisk   Transfer `json:"host_to_disk"`   // demotions from the arena to disk
	HostToDevice Transfer `json:"host_to_device"` // unspills from the arena, one DMA each
	DiskToDevice Transfer `json:"disk_to_device"` // unspills from disk, through the staging ring
	DiskToHost   Transfer `json:"disk_to_host"`   // MoveTo(TierHost) of a buffer on disk

	SyncLocks       int `json:"sync_locks"`       // Acquire holds not yet released
	AsyncLocks      int `json:"async_locks"`      // AcquireAsync holds not yet released
	PendingReleases int `json:"pending_releases"` // async releases whose event was not yet seen complete

	Allocs          int64  `json:"allocs"`            // buffers allocated
	Frees           int64  `json:"frees"`             // buffers freed (Free or Close)
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

// Stats returns the manager's figures. Async releases are checked for
// completion (EventQuery) before they are counted as pending.
func (m *Manager) Stats() Stats {
	if m == nil {
		return Stats{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.st
	st.Device, st.Host, st.Disk = m.tiers[TierDevice], m.tiers[TierHost], m.tiers[TierDisk]
	st.PinnedBytes, st.PinnedSlabs, st.PinnedPeakBytes = m.arena.stats()
	for b := range m.live {
		m.lockedLocked(b)
		st.SyncLocks += b.syncLocks
		for _, n := range b.held {
			st.AsyncLocks += n
		}
		for _, n := range b.pending {
			st.PendingReleases += n
		}
	}
	return st
}

// ResetTransferStats zeroes the transfer counters (for measuring one phase).
func (m *Manager) ResetTransferStats() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range []*Transfer{&m.st.DeviceToHost, &m.st.DeviceToDisk, &m.st.HostToDisk,
		&m.st.HostToDevice, &m.st.DiskToDevice, &m.st.DiskToHost} {
		*t = Transfer{}
	}
}

func (m *Manager) addTierLocked(t Tier, bytes uint64, n int) {
	ts := &m.tiers[t]
	ts.Buffers += n
	ts.Bytes += bytes
	if ts.Bytes > ts.PeakBytes {
		ts.PeakBytes = ts.Bytes
	}
}

func (m *Manager) subTierLocked(t Tier, bytes uint64, n int) {
	ts := &m.tiers[t]
	ts.Buffers -= n
	ts.Bytes -= bytes
}

// History returns the kept history, oldest first: allocations (alloc), frees
// (free_completed), spills and unspills, each with the device address that
// was given up or taken.
func (m *Manager) History() []gpumem.HistoryEntry {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hist.AppendTo(make([]gpumem.HistoryEntry, 0, m.hist.Len()))
}

// historyLocked records an entry of the manager's device in its history.
func (m *Manager) historyLocked(a gpumem.HistoryAction, s gpumem.Stream, p gpumem.Ptr, size uint64) {
	m.hist.Add(a, m.dev, s.Handle, p, size)
}
