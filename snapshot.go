package gpumem

import "time"

// HistoryAction names what a history entry records.
type HistoryAction string

// History actions, as in PyTorch's memory history.
const (
	ActionAlloc        HistoryAction = "alloc"
	ActionFreeRequest  HistoryAction = "free_requested"
	ActionFreeComplete HistoryAction = "free_completed"
	ActionSegmentAlloc HistoryAction = "segment_alloc"
	ActionSegmentFree  HistoryAction = "segment_free"
	ActionSegmentMap   HistoryAction = "segment_map"
	ActionSegmentUnmap HistoryAction = "segment_unmap"
	ActionOOM          HistoryAction = "oom"
	ActionSpill        HistoryAction = "spill"
	ActionUnspill      HistoryAction = "unspill"
)

// HistoryEntry is one event of an allocator's memory history.
type HistoryEntry struct {
	Time   time.Time     `json:"time"`
	Action HistoryAction `json:"action"`
	Device int           `json:"device"`
	Stream uintptr       `json:"stream"`
	Addr   Ptr           `json:"addr"`
	Size   uint64        `json:"size"`
}

// BlockInfo is one block of a segment in a snapshot.
type BlockInfo struct {
	Addr          Ptr    `json:"addr"`
	Size          uint64 `json:"size"`
	RequestedSize uint64 `json:"requested_size"`
	State         string `json:"state"` // "active_allocated", "active_pending_free", "inactive"
}

// SegmentInfo is one segment (device allocation) in a snapshot.
type SegmentInfo struct {
	Device        int         `json:"device"`
	Stream        uintptr     `json:"stream"`
	Addr          Ptr         `json:"address"`
	TotalSize     uint64      `json:"total_size"`
	AllocatedSize uint64      `json:"allocated_size"`
	ActiveSize    uint64      `json:"active_size"`
	RequestedSize uint64      `json:"requested_size"`
	SegmentType   string      `json:"segment_type"` // "small" or "large"
	Expandable    bool        `json:"is_expandable"`
	PrivatePool   uint64      `json:"private_pool,omitempty"`
	Blocks        []BlockInfo `json:"blocks"`
}

// Snapshot is the state of an allocator's memory, as PyTorch's memory snapshot.
type Snapshot struct {
	Segments []SegmentInfo       `json:"segments"`
	History  []HistoryEntry      `json:"history,omitempty"`
	Stats    map[int]MemoryStats `json:"stats,omitempty"` // per device
}
