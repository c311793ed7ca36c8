package sim

import (
	"fmt"

	"github.com/gpumem/gpumem"
)

// This file is the race and use-after-free detector: every op checks, as it
// runs, that the memory it touches is live and not freed by a concurrent
// stream, and records a Violation otherwise.

// Violation is a use of memory that the simulator found unsafe when the work
// ran: the memory had been freed (Free, FreeAsync reached, MemUnmap, Untag),
// or had been handed to another allocation since the work was queued.
type Violation struct {
	Op     string        // the method that queued the work ("MemcpyAsync", "Launch", "LaunchKernel")
	Stream gpumem.Stream // the stream it was queued on
	Addr   gpumem.Ptr
	Size   uint64
	What   string
}

// String formats the violation.
func (v Violation) String() string {
	return fmt.Sprintf("%s on %v touching [%#x, +%d): %s", v.Op, v.Stream, uint64(v.Addr), v.Size, v.What)
}

// Violations returns the unsafe memory uses found so far, oldest first.
func (g *GPU) Violations() []Violation {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Violation(nil), g.violations...)
}

// ClearViolations forgets the violations found so far.
func (g *GPU) ClearViolations() {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.violations = nil
	g.mu.Unlock()
}

func (g *GPU) violate(st *stream, o *op, a, size uint64, format string, args ...any) {
	name := opName(o.m)
	g.violations = append(g.violations, Violation{Op: name, Stream: st.handle(), Addr: gpumem.Ptr(a), Size: size, What: fmt.Sprintf(format, args...)})
}

// check runs the use-after-free detector for o; it reports whether the
// memory is still there to touch.
func (g *GPU) check(st *stream, o *op) bool {
	if o.fromGraph {
		return true // checked by resolveAtRun
	}
	ok := true
	for _, u := range o.uses {
		switch {
		case u.obj.freed:
			cur := g.innermost(u.addr, u.addr+u.size)
			now := "nothing"
			if cur != nil {
				now = cur.describe()
			}
			g.violate(st, o, u.addr, u.size, "use after free: %s was freed before this work ran; the range now belongs to %s (allocated at\n%s)", u.obj.describe(), now, u.obj.stack.String())
			ok = ok && cur != nil
		case u.obj.kind == objGraphAlloc && !u.obj.live:
			g.violate(st, o, u.addr, u.size, "%s is not allocated (its graph has not been launched, or it was freed)", u.obj.describe())
			ok = false
		}
	}
	return ok
}

// resolveAtRun resolves the memory of a replayed graph node; false (and a
// violation) when it is not usable memory any more.
func (g *GPU) resolveAtRun(st *stream, o *op, a, n uint64, kernel bool) bool {
	if !o.fromGraph || n == 0 {
		return true
	}
	uses, err := g.resolve(o.m, a, n, o.dev, kernel)
	if err != nil {
		g.violate(st, o, a, n, "graph node touches memory that is gone: %v", err)
		return false
	}
	for _, u := range uses {
		if u.obj.kind == objGraphAlloc && !u.obj.live {
			g.violate(st, o, u.addr, u.size, "graph node touches %s, which is not allocated", u.obj.describe())
			return false
		}
	}
	return true
}
