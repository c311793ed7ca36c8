package blas

import (
	"fmt"

	"github.com/gpumem/gpumem"
)

// DefaultWorkspaceStreams is how many streams' workspaces a handle keeps
// when WithWorkspaceStreams is not given.
const DefaultWorkspaceStreams = 4

// workspaces are a handle's workspaces, one per stream it has queued calls
// on: a workspace used by a kernel still running on one stream is never
// handed to a kernel on another (the libraries' kernels write their
// workspace), so no ordering between the streams is needed. At most max
// are kept; the least recently used beyond that goes back to its
// allocator, ordered on its own stream. All under the Handle's mutex.
type workspaces struct {
	r    gpumem.Resource // nil: the library's own workspace
	size uint64
	max  int
	kept []kept // least recently used first
}

type kept struct {
	s gpumem.Stream
	p gpumem.Ptr
}

func (w *workspaces) enabled() bool { return w.r != nil }

// find returns the index of s's workspace, or -1.
func (w *workspaces) find(s gpumem.Stream) int {
	for i := range w.kept {
		if w.kept[i].s == s {
			return i
		}
	}
	return -1
}

// get returns s's workspace, allocating it on s when there is none; fresh
// says it was allocated now and is not yet kept.
func (w *workspaces) get(s gpumem.Stream) (p gpumem.Ptr, fresh bool, err error) {
	if i := w.find(s); i >= 0 {
		return w.kept[i].p, false, nil
	}
	p, err = w.r.Allocate(w.size, s)
	if err != nil {
		return 0, false, err
	}
	return p, true, nil
}

// use marks s's workspace (p, kept already or fresh) as the one in use,
// last in the list, and gives back the least recently used beyond max. A
// workspace its allocator refuses to take back stays kept, over max, and
// is tried again by the next eviction and by Close.
func (w *workspaces) use(s gpumem.Stream, p gpumem.Ptr) {
	if i := w.find(s); i >= 0 {
		w.kept = append(w.kept[:i], w.kept[i+1:]...)
	}
	w.kept = append(w.kept, kept{s: s, p: p})
	// The least recently used is first; s, last, is never given back
	// (max >= 1, so over max the first is not s).
	for len(w.kept) > w.max {
		if w.release(0) != nil {
			return
		}
	}
}

// release gives the workspace at index i back to its allocator, ordered on
// its stream, and forgets it; on failure it stays.
func (w *workspaces) release(i int) error {
	k := w.kept[i]
	if err := w.r.Deallocate(k.p, k.s); err != nil {
		return fmt.Errorf("gpumem: blas: workspace of %v: %w", k.s, err)
	}
	w.kept = append(w.kept[:i], w.kept[i+1:]...)
	return nil
}

// releaseAll gives back every workspace; those refused stay, and the first
// refusal is returned.
func (w *workspaces) releaseAll() error {
	var first error
	for i := 0; i < len(w.kept); {
		if err := w.release(i); err != nil {
			if first == nil {
				first = err
			}
			i++
		}
	}
	return first
}
