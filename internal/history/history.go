// Package history is the memory history every allocator keeps: a ring of
// the most recent gpumem.HistoryEntry values, stamped with one clock read
// each (internal/clock), and the merge of several rings into one timeline.
//
// A Ring is not safe for concurrent use: its owner holds its own lock around
// Add and AppendTo, as it does around the state the entries describe.
package history

import (
	"sort"
	"time"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/clock"
)

// MaxSize is the largest ring an allocator accepts: 4,194,304 entries,
// 256 MiB a device. The ring is allocated whole when the device is first
// used, so a larger size is a mistake to report, not memory to take.
const MaxSize = 1 << 22

// Ring keeps the last n entries. The zero Ring (or a Ring of size 0) keeps
// nothing, and Add on it costs a length check.
type Ring struct {
	buf  []gpumem.HistoryEntry
	next int
	full bool
}

// New returns a ring of n entries (none when n <= 0).
func New(n int) Ring {
	var r Ring
	if n > 0 {
		r.buf = make([]gpumem.HistoryEntry, n)
	}
	return r
}

// On reports whether the ring keeps anything.
func (r *Ring) On() bool { return len(r.buf) > 0 }

// Cap is the number of entries the ring keeps.
func (r *Ring) Cap() int { return len(r.buf) }

// Len is the number of entries held.
func (r *Ring) Len() int {
	if r.full {
		return len(r.buf)
	}
	return r.next
}

// Add records an entry stamped now.
func (r *Ring) Add(act gpumem.HistoryAction, dev int, stream uintptr, p gpumem.Ptr, size uint64) {
	if len(r.buf) == 0 {
		return
	}
	r.AddAt(clock.Now(), act, dev, stream, p, size)
}

// AddAt records an entry stamped t.
func (r *Ring) AddAt(t time.Time, act gpumem.HistoryAction, dev int, stream uintptr, p gpumem.Ptr, size uint64) {
	if len(r.buf) == 0 {
		return
	}
	r.buf[r.next] = gpumem.HistoryEntry{Time: t, Action: act, Device: dev, Stream: stream, Addr: p, Size: size}
	r.next++
	if r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
}

// AppendTo appends the entries held, oldest first, to out.
func (r *Ring) AppendTo(out []gpumem.HistoryEntry) []gpumem.HistoryEntry {
	if r.full {
		out = append(out, r.buf[r.next:]...)
	}
	return append(out, r.buf[:r.next]...)
}

// Merge returns the entries of several histories in one timeline, ordered
// by time (entries with equal times keep the order of their arguments, and
// each history's own order).
func Merge(hs ...[]gpumem.HistoryEntry) []gpumem.HistoryEntry {
	n := 0
	for _, h := range hs {
		n += len(h)
	}
	out := make([]gpumem.HistoryEntry, 0, n)
	for _, h := range hs {
		out = append(out, h...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out
}
