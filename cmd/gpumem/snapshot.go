package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/trace/torchsnapshot"
)

// snapshotHistoryCap is the most history entries one --snapshot file keeps
// (the most recent), as PyTorch's _record_memory_history(max_entries=...).
// A variable so that tests can lower it.
var snapshotHistoryCap = 1_000_000

// checkSnapshotPath checks, before any replay, that --snapshot's file can
// be written (see checkWritable).
func checkSnapshotPath(path string) error {
	if path == "" {
		return nil
	}
	if err := checkWritable(path); err != nil {
		return usagef("--snapshot: %v", err)
	}
	return nil
}

// snapshotFileFor is the file of one replay's snapshot: path itself when the
// run replays one trace through one allocator, else path with
// ".<trace>.<allocator>" before its extension.
func snapshotFileFor(path string, several bool, traceName, allocator string) string {
	if !several {
		return path
	}
	ext := filepath.Ext(path)
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r == '/' || r == os.PathSeparator {
				return '_'
			}
			return r
		}, s)
	}
	return strings.TrimSuffix(path, ext) + "." + clean(traceName) + "." + clean(allocator) + ext
}

// snapshotRecorder is an adaptor that records the memory history of the
// allocator beneath (alloc, free_requested and free_completed of every
// allocation, oom of every failure) and takes its snapshot just before
// closing it, since replay.Run closes the allocator at the end of the
// trace.
type snapshotRecorder struct {
	gpumem.Allocator
	mu    sync.Mutex
	sizes map[gpumem.Ptr]uint64
	hist  []gpumem.HistoryEntry
	snap  gpumem.Snapshot
	taken bool
}

func newSnapshotRecorder(up gpumem.Allocator) *snapshotRecorder {
	return &snapshotRecorder{Allocator: up, sizes: map[gpumem.Ptr]uint64{}}
}

// Upstream returns the recorded allocator, so that gpumem's *Of functions
// find what it implements.
func (r *snapshotRecorder) Upstream() gpumem.Allocator { return r.Allocator }

func (r *snapshotRecorder) record(a gpumem.HistoryAction, s gpumem.Stream, p gpumem.Ptr, size uint64) {
	if len(r.hist) == 2*snapshotHistoryCap {
		r.hist = append(r.hist[:0], r.hist[snapshotHistoryCap:]...)
	}
	r.hist = append(r.hist, gpumem.HistoryEntry{Time: time.Now(), Action: a, Device: s.Device, Stream: s.Handle, Addr: p, Size: size})
}

// Allocate allocates from the allocator beneath and records it.
func (r *snapshotRecorder) Allocate(size uint64, s gpumem.Stream) (gpumem.Ptr, error) {
	p, err := r.Allocator.Allocate(size, s)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		r.sizes[p] = size
		r.record(gpumem.ActionAlloc, s, p, size)
	} else if oom := (*gpumem.OutOfMemoryError)(nil); errors.As(err, &oom) {
		r.record(gpumem.ActionOOM, s, gpumem.Ptr(oom.Free), size)
	}
	return p, err
}

// Deallocate frees through the allocator beneath and records it.
func (r *snapshotRecorder) Deallocate(p gpumem.Ptr, s gpumem.Stream) error {
	err := r.Allocator.Deallocate(p, s)
	r.mu.Lock()
	defer r.mu.Unlock()
	if size, ok := r.sizes[p]; ok && err == nil {
		delete(r.sizes, p)
		r.record(gpumem.ActionFreeRequest, s, p, size)
		r.record(gpumem.ActionFreeComplete, s, p, size)
	}
	return err
}

// Close takes the snapshot of the allocator beneath, then closes it.
func (r *snapshotRecorder) Close() error {
	r.mu.Lock()
	if !r.taken {
		r.snap, r.taken = gpumem.SnapshotOf(r.Allocator)
		// The allocator's own history, when it keeps one, also has its
		// segment events: it is preferred to the recorded one.
		if len(r.snap.History) == 0 {
			if h, _ := gpumem.HistoryOf(r.Allocator); len(h) > 0 {
				r.snap.History = h
			} else {
				// record keeps up to twice the cap between trims.
				r.snap.History = r.hist[max(len(r.hist)-snapshotHistoryCap, 0):]
			}
		}
	}
	r.mu.Unlock()
	return r.Allocator.Close()
}

// write writes the snapshot taken at Close to path.
func (r *snapshotRecorder) write(path string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.taken {
		return fmt.Errorf("%T takes no snapshot: %w", r.Allocator, gpumem.ErrNotSupported)
	}
	return torchsnapshot.WriteFile(path, r.snap)
}
