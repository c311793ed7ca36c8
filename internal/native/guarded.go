package native

import (
	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/ccall"
	"github.com/gpumem/gpumem/internal/guard"
	"github.com/gpumem/gpumem/internal/symtab"
)

var _ guard.Backend = (*Backend)(nil)

// GuardedCalls reports whether the capture-status query that guards
// MallocFromPoolAsyncUncaptured and FreeAsyncUncaptured resolved.
func (b *Backend) GuardedCalls() bool {
	return b.fns[symtab.StreamIsCapturing] != 0
}

// MallocFromPoolAsyncUncaptured is MallocFromPoolAsync made only if s is not
// being captured: the device made current, the capture status asked and the
// allocation made in one transition. A capturing stream gets its status back
// and nothing is allocated.
func (b *Backend) MallocFromPoolAsyncUncaptured(size uint64, p gpumem.MemPool, s gpumem.Stream) (gpumem.Ptr, gpumem.CaptureStatus, error) {
	if size == 0 {
		return 0, 0, b.zeroSize(symtab.MallocFromPoolAsync)
	}
	if err := b.deadPool(p); err != nil {
		return 0, 0, err
	}
	c := getCell()
	st, err := b.guarded(s, symtab.MallocFromPoolAsync, c.addr(0), uintptr(size), p.Handle, s.Handle)
	out := c[0]
	putCell(c)
	if err != nil || st != gpumem.CaptureNone {
		return 0, st, err
	}
	return gpumem.Ptr(out), st, nil
}

// FreeAsyncUncaptured is FreeAsync made only if s is not being captured, in
// one transition as MallocFromPoolAsyncUncaptured.
func (b *Backend) FreeAsyncUncaptured(p gpumem.Ptr, s gpumem.Stream) (gpumem.CaptureStatus, error) {
	return b.guarded(s, symtab.FreeAsync, uintptr(p), s.Handle, 0, 0)
}

// guarded calls op(a1, a2, a3, a4) on s's device unless s is being captured
// (cuStreamIsCapturing or hipStreamIsCapturing answers a status other than
// none, which is returned).
func (b *Backend) guarded(s gpumem.Stream, op symtab.Op, a1, a2, a3, a4 uintptr) (gpumem.CaptureStatus, error) {
	if err := b.deadStream(s); err != nil {
		return 0, err
	}
	fn, err := b.target(s.Device, op)
	if err != nil {
		return 0, err
	}
	q := b.fns[symtab.StreamIsCapturing]
	if q == 0 {
		return 0, b.notSupported(symtab.StreamIsCapturing)
	}
	r, stage := ccall.CallGuard6(b.pre, b.cur[s.Device], q, s.Handle, fn, a1, a2, a3, a4, 0, 0)
	switch stage {
	case 0:
		if int32(r) != 0 {
			return gpumem.CaptureNone, b.Status(op, r)
		}
		return gpumem.CaptureNone, nil
	case ccall.StagePre:
		return 0, b.Status(symtab.SetCurrent, r)
	case ccall.StageGuard:
		return 0, b.Status(symtab.StreamIsCapturing, r)
	}
	// CUstreamCaptureStatus / hipStreamCaptureStatus: ACTIVE 1, INVALIDATED 2.
	return gpumem.CaptureStatus(int32(r)), nil
}
