package asyncpool

import (
	"fmt"
	"math"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/history"
)

// KeepAll is the release threshold that keeps every byte the pool has
// reserved across synchronizations (CUDA's recommended setting for an
// allocator: memory goes back to the device only when trimmed).
const KeepAll = math.MaxUint64

// DefaultThrottleRatio is the utilisation above which the free stream is
// joined into the allocation stream before an allocation (the seed's 80 %).
const DefaultThrottleRatio = 0.8

// DefaultHistorySize is a good HistorySize for debugging: 4096 entries per
// device. DefaultOptions keep no history, as the caching allocator's and
// PyTorch's defaults: each entry costs a clock read on the allocation and
// free paths (hundreds of nanoseconds on some virtual machines).
const DefaultHistorySize = 4096

// CaptureCheck says how the allocator learns that a stream is being captured
// into a graph.
type CaptureCheck int

const (
	// CaptureCheckEveryCall asks the vendor library on every Allocate and
	// Deallocate (in the same transition as the call on the CUDA and HIP
	// backends). It sees every capture, one begun outside gpumem included,
	// at the cost of a capture query per call.
	CaptureCheckEveryCall CaptureCheck = iota
	// CaptureCheckHooks trusts BeginCapture and EndCapture: the backend is
	// asked only while a capture begun through BeginCapture is open on the
	// device. Captures begun elsewhere are not seen; use it only when every
	// capture goes through the hooks.
	CaptureCheckHooks
	// CaptureCheckTracked trusts the backend's own record of the captures
	// begun through it (StreamBeginCapture of the CUDA and HIP backends,
	// any instance in the process, until its StreamEndCapture): while none
	// is open, no query is made; while one is, every call asks, as
	// CaptureCheckEveryCall. This is how PyTorch's and PaddlePaddle's
	// asynchronous allocators learn of captures (from the framework that
	// begins them, not from the driver). A capture begun outside gpumem,
	// by another binding of the vendor library in the same process, is not
	// seen: such a program chooses CaptureCheckEveryCall. A backend that
	// keeps no such record (one without guarded calls) is asked on every
	// call.
	CaptureCheckTracked
)

// String names the mode.
func (c CaptureCheck) String() string {
	switch c {
	case CaptureCheckEveryCall:
		return "every_call"
	case CaptureCheckHooks:
		return "hooks"
	case CaptureCheckTracked:
		return "tracked"
	}
	return fmt.Sprintf("capture_check(%d)", int(c))
}

// Options configure an Allocator. Start from DefaultOptions: in the zero
// value the release threshold is 0 (unused memory goes back to the device at
// every synchronization) and history is off.
type Options struct {
	// OwnPool makes the allocator create a pool of its own on each device
	// (MemPoolCreate) instead of using the device's default pool, which it
	// shares with every other user of the default pool in the process. An
	// own pool is destroyed by Close; the default pool's attributes are
	// restored by Close.
	OwnPool bool

	// ReleaseThreshold is the number of reserved but unused bytes the pool
	// keeps across a synchronization (PoolReleaseThreshold). KeepAll keeps
	// everything; EmptyCache trims regardless.
	ReleaseThreshold uint64

	// The pool's reuse policies (all on by default, as in CUDA):
	// DisableFollowEventDependencies stops reuse of memory freed on another
	// stream that the allocating stream has waited on by an event (the free
	// stream joins rely on it); DisableOpportunisticReuse stops reuse of
	// memory whose free has completed on another stream without such a wait;
	// DisableInternalDependencies stops the driver from inserting waits of
	// its own to reuse memory.
	DisableFollowEventDependencies bool
	DisableOpportunisticReuse      bool
	DisableInternalDependencies    bool

	// ThrottleRatio: when (allocated + pending release) / device capacity
	// exceeds it, the free stream is joined into the allocating stream before
	// the allocation so that pending frees land first. 0 means
	// DefaultThrottleRatio; a value of 1 or more never throttles.
	ThrottleRatio float64

	// PeerAccess lists devices whose streams may use memory of every device's
	// pool: each pool grants them read-write access (MemPoolSetAccess) when
	// the allocator first uses it. EnablePeer adds one later.
	PeerAccess []int

	// CaptureCheck selects how graph captures are detected.
	CaptureCheck CaptureCheck

	// HistorySize is the number of memory-history entries kept per device
	// (a ring); 0 keeps none.
	HistorySize int
}

// DefaultOptions returns the recommended configuration: the device's default
// pool, keep all memory, every reuse policy on, throttle at 80 %, no cap,
// captures learnt from the backend (CaptureCheckTracked), no history.
func DefaultOptions() Options {
	return Options{
		ReleaseThreshold: KeepAll,
		ThrottleRatio:    DefaultThrottleRatio,
		CaptureCheck:     CaptureCheckTracked,
	}
}

func (o *Options) normalize() error {
	if o.ThrottleRatio == 0 {
		o.ThrottleRatio = DefaultThrottleRatio
	}
	if math.IsNaN(o.ThrottleRatio) || o.ThrottleRatio < 0 {
		return fmt.Errorf("asyncpool: throttle ratio %v must be positive: %w", o.ThrottleRatio, gpumem.ErrInvalidValue)
	}
	if o.HistorySize < 0 || o.HistorySize > history.MaxSize {
		return fmt.Errorf("asyncpool: history size %d is not in [0, %d]: %w", o.HistorySize, history.MaxSize, gpumem.ErrInvalidValue)
	}
	switch o.CaptureCheck {
	case CaptureCheckEveryCall, CaptureCheckHooks, CaptureCheckTracked:
	default:
		return fmt.Errorf("asyncpool: unknown capture check %d: %w", int(o.CaptureCheck), gpumem.ErrInvalidValue)
	}
	for _, p := range o.PeerAccess {
		if p < 0 {
			return fmt.Errorf("asyncpool: peer device %d is negative: %w", p, gpumem.ErrInvalidValue)
		}
	}
	o.PeerAccess = append([]int(nil), o.PeerAccess...)
	return nil
}
