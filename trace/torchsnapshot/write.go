package torchsnapshot

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/pickle"
)

// pytorchActions are the history actions PyTorch's snapshot knows; Write
// leaves out the others (gpumem's spill and unspill).
var pytorchActions = map[gpumem.HistoryAction]bool{
	gpumem.ActionAlloc: true, gpumem.ActionFreeRequest: true, gpumem.ActionFreeComplete: true,
	gpumem.ActionSegmentAlloc: true, gpumem.ActionSegmentFree: true, gpumem.ActionSegmentMap: true,
	gpumem.ActionSegmentUnmap: true, gpumem.ActionOOM: true, "snapshot": true,
}

// Write writes snap as PyTorch's memory snapshot (what
// torch.cuda.memory._snapshot returns and _dump_snapshot pickles), for
// pytorch.org/memory_viz and python -m torch.cuda._memory_viz to open: a
// pickle (protocol 4, plain data only) of the dict
//
//	{"segments": [{"device", "address", "total_size", "allocated_size",
//	               "active_size", "requested_size", "stream", "segment_type",
//	               "segment_pool_id", "is_expandable", "frames", "blocks":
//	               [{"address", "size", "requested_size", "state", "frames"}]}],
//	 "device_traces": [[{"action", "addr", "size", "stream", "time_us", "frames"}]],
//	 "allocator_settings": {}}
//
// with the keys of torch/csrc/cuda/memory_snapshot.cpp. device_traces holds
// one list per device, from device 0 to the highest device of a segment or
// a history entry, built from snap.History (oldest first; an "oom" entry has
// device_free, its Addr, in place of addr, as PyTorch's). Actions PyTorch
// does not know (spill, unspill) are left out. Frames are empty lists: gpumem
// records no stack traces. segment_pool_id is (0, PrivatePool). Stream
// handles are written as integers, times as microseconds since the epoch.
//
// Read reads what Write writes. A failing writer's error is returned
// wrapped.
func Write(w io.Writer, snap gpumem.Snapshot) error {
	if err := pickle.Encode(w, snapshotValue(snap)); err != nil {
		return fmt.Errorf("torchsnapshot: write: %w", err)
	}
	return nil
}

// WriteAllocator writes a's snapshot (gpumem.SnapshotOf) with Write. When
// the snapshot carries no history, a's history (gpumem.HistoryOf) fills
// device_traces. An allocator, and every allocator beneath its adaptors,
// that cannot take a snapshot is an error matching gpumem.ErrNotSupported.
//
// device_traces are empty unless the allocator keeps a history: the caching
// and async-pool allocators keep Options.HistorySize entries per device (0,
// none, by default), the managed allocator those of its pools.
func WriteAllocator(w io.Writer, a gpumem.Allocator) error {
	snap, ok := gpumem.SnapshotOf(a)
	if !ok {
		return fmt.Errorf("torchsnapshot: %T takes no snapshot: %w", a, gpumem.ErrNotSupported)
	}
	if len(snap.History) == 0 {
		snap.History, _ = gpumem.HistoryOf(a)
	}
	return Write(w, snap)
}

// WriteFile writes snap with Write to the file at path, created or
// truncated.
func WriteFile(path string, snap gpumem.Snapshot) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("torchsnapshot: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("torchsnapshot: %w", cerr)
		}
	}()
	// Write buffers (pickle.Encode writes through its own buffer).
	if err := Write(f, snap); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func dict(kv ...any) *pickle.Dict {
	d := &pickle.Dict{Keys: make([]any, 0, len(kv)/2), Values: make([]any, 0, len(kv)/2)}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Keys = append(d.Keys, kv[i])
		d.Values = append(d.Values, kv[i+1])
	}
	return d
}

// snapshotValue builds the snapshot's dict.
func snapshotValue(snap gpumem.Snapshot) *pickle.Dict {
	devices := 1
	segs := make([]any, 0, len(snap.Segments))
	for _, s := range snap.Segments {
		devices = max(devices, s.Device+1)
		blocks := make([]any, 0, len(s.Blocks))
		for _, b := range s.Blocks {
			blocks = append(blocks, dict(
				"address", uint64(b.Addr), "size", b.Size, "requested_size", b.RequestedSize,
				"state", b.State, "frames", []any{}))
		}
		segs = append(segs, dict(
			"device", int64(s.Device), "address", uint64(s.Addr), "total_size", s.TotalSize,
			"allocated_size", s.AllocatedSize, "active_size", s.ActiveSize,
			"requested_size", s.RequestedSize, "stream", uint64(s.Stream),
			"segment_type", s.SegmentType, "segment_pool_id", pickle.Tuple{int64(0), s.PrivatePool},
			"is_expandable", s.Expandable, "frames", []any{}, "blocks", blocks))
	}
	traces := make([][]any, devices)
	for _, h := range snap.History {
		if h.Device < 0 || !pytorchActions[h.Action] {
			continue
		}
		if h.Device >= len(traces) {
			traces = append(traces, make([][]any, h.Device+1-len(traces))...)
		}
		addrKey := "addr"
		if h.Action == gpumem.ActionOOM {
			addrKey = "device_free"
		}
		traces[h.Device] = append(traces[h.Device], dict(
			"action", string(h.Action), addrKey, uint64(h.Addr), "size", h.Size,
			"stream", uint64(h.Stream), "time_us", timeUS(h.Time), "frames", []any{}))
	}
	dt := make([]any, len(traces))
	for i, t := range traces {
		if t == nil {
			t = []any{}
		}
		dt[i] = t
	}
	return dict("segments", segs, "device_traces", dt, "allocator_settings", dict())
}

// timeUS is t in microseconds since the epoch; 0 for the zero time.
func timeUS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}
