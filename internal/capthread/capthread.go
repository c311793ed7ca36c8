// Package capthread keeps a goroutine on one OS thread for the length of a
// stream capture.
//
// CUDA and HIP require a capture begun in global or thread-local mode to be
// ended on the OS thread that began it (otherwise EndCapture fails with
// CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, 908). Go moves goroutines between
// threads freely, so a goroutine that begins and ends a capture may do so on
// two threads. The backends therefore wire the calling goroutine to its
// thread (runtime.LockOSThread) when such a capture begins and release it
// when the capture ends on that goroutine. Relaxed captures need nothing.
package capthread

import (
	"runtime"
	"sync"

	"github.com/gpumem/gpumem"
)

// WrongThread is the status both vendors return for an EndCapture on
// another thread (CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,
// hipErrorStreamCaptureWrongThread).
const WrongThread = 908

// Pins tracks the streams whose capture holds its goroutine on its thread.
// The zero Pins is ready to use.
type Pins struct {
	mu sync.Mutex
	m  map[uintptr]struct{} // stream handle -> begun with the thread locked
}

// Begin runs begin, which starts a capture of stream in mode, with the
// calling goroutine locked to its thread; the lock is kept if the capture
// began and mode is not relaxed.
func (p *Pins) Begin(stream uintptr, mode gpumem.CaptureMode, begin func() error) error {
	if mode == gpumem.CaptureModeRelaxed {
		return begin()
	}
	runtime.LockOSThread()
	if err := begin(); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	p.mu.Lock()
	if p.m == nil {
		p.m = map[uintptr]struct{}{}
	}
	p.m[stream] = struct{}{}
	p.mu.Unlock()
	return nil
}

// End is called after the vendor's EndCapture of stream returned status
// (0 for success) on the calling goroutine, and releases the lock that
// Begin took for the capture. A call from another thread (status
// WrongThread) comes from a goroutine that holds no lock of this capture:
// the lock stays with the goroutine that began it (the vendor drops the
// capture anyway; that goroutine's own EndCapture then fails, and releases
// it here).
func (p *Pins) End(stream uintptr, status int32) {
	if status == WrongThread {
		return
	}
	p.mu.Lock()
	_, held := p.m[stream]
	delete(p.m, stream)
	p.mu.Unlock()
	if held {
		runtime.UnlockOSThread()
	}
}

// Forget drops what is known of stream (destroyed while capturing: the
// capture is gone). The goroutine that began the capture keeps its lock
// until it exits, as the thread may still hold the vendor's capture state.
func (p *Pins) Forget(stream uintptr) {
	p.mu.Lock()
	delete(p.m, stream)
	p.mu.Unlock()
}
