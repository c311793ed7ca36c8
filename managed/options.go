package managed

import (
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/config"
)

// DefaultMaxDeviceFraction is the oversubscription guard's default share of
// a device's memory that the allocator's managed memory may reach.
const DefaultMaxDeviceFraction = 0.5

// DefaultSegmentSize is the size of the managed allocations that segments
// are carved from when Options.SegmentSize is 0: the smallest size that
// TestGPUManagedBlockSizes measured near full prefetch bandwidth on an
// H200 (2 MiB allocations prefetched at 13-28 GB/s, 20 MiB and larger near
// the 1 GiB rate); see doc.go for the figures.
const DefaultSegmentSize = 20 << 20

// DefaultPageSize is the managed-memory page size assumed when verifying
// residency: the large page of the CUDA and HIP drivers, and the
// simulator's page.
const DefaultPageSize = 2 << 20

// Options configure an Allocator. The zero value is usable: caching rules of
// the caching package's defaults, the guard at half of the smallest device,
// segments carved from managed allocations of DefaultSegmentSize.
type Options struct {
	// Force creates the allocator even when unified memory is not enabled
	// (Enable, GPUMEM_ENABLE_UNIFIED_MEMORY). Tools that name the managed
	// allocator explicitly set it.
	Force bool
	// MoveOnCopy is the seed's enabled_uvm_move_on_copy: CopyTo and Manage of
	// a buffer that is already managed move it (advice and a prefetch, same
	// address) instead of copying it into a new buffer.
	MoveOnCopy bool
	// MaxDeviceFraction in (0, 1] caps the managed memory the allocator holds
	// at this share of the smallest device's total memory. 0 means
	// DefaultMaxDeviceFraction. Ignored with AllowOversubscription.
	MaxDeviceFraction float64
	// AllowOversubscription lifts the guard: managed memory may then exceed
	// the device's memory and pages are evicted to the host by the driver.
	// Oversubscribing a shared GPU can stall every program on it; ask for it
	// only on a machine that is yours.
	AllowOversubscription bool
	// SegmentSize (a multiple of 2 MiB) makes the backend's managed
	// allocations at least this large: the caching pools' segments of up to
	// this size are carved from such chunks, and a chunk goes back to the
	// backend when its last segment does; larger segments get their own
	// managed allocation. 0 means DefaultSegmentSize. 2 MiB gives every
	// segment its own managed allocation (the caching package's sizes: 2 MiB,
	// 20 MiB, or the request rounded to 2 MiB). TestGPUManagedBlockSizes
	// measures the cost of each size on a real device.
	SegmentSize uint64
	// CoarseGrain applies HIP's coarse-grain advice (hipMemAdvise
	// hipMemAdviseSetCoarseGrain) to every new segment. HIP only: New fails
	// with ErrNotSupported on other backends.
	CoarseGrain bool
	// PrefetchOnAllocate prefetches each block handed out by Allocate (and
	// Alloc for a device) to its device on the caller's stream, so that
	// first use does not fault. Off by default, as the seed's allocator sets
	// hints only.
	PrefetchOnAllocate bool
	// PageSize is the managed page size assumed by VerifyResidency: only the
	// whole pages inside a buffer are checked, since buffers that share a
	// page share its advice. 0 means DefaultPageSize.
	PageSize uint64
	// Caching configures the pools (rounding, max_split_size, garbage
	// collection, memory fraction, history). Its Upstream, OnNewSegment and
	// ExpandableSegments are the managed allocator's own: set them and New
	// fails.
	Caching caching.Options
}

// DefaultOptions are the zero Options with the caching package's defaults.
func DefaultOptions() Options {
	return Options{Caching: caching.DefaultOptions()}
}

// OptionsFromConf builds Options from a parsed GPUMEM_ALLOC_CONF whose
// backend is managed (or unset): the caching allocator's pool keys and
// per_process_memory_fraction configure the pools. A key that does not apply
// to this allocator (expandable_segments: managed memory cannot be mapped by
// the virtual memory API; the asyncpool keys), or a backend other than
// managed, is a *config.Error naming it (see config.Conf.CheckFor).
func OptionsFromConf(c config.Conf) (Options, error) {
	if err := c.CheckFor(config.BackendManaged); err != nil {
		return Options{}, err
	}
	c.Backend = config.BackendCaching
	co, err := caching.OptionsFromConf(c)
	if err != nil {
		return Options{}, fmt.Errorf("managed: %w", err)
	}
	o := DefaultOptions()
	o.Caching = co
	return o, nil
}

func (o *Options) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("managed: %s: %w", fmt.Sprintf(format, args...), gpumem.ErrInvalidValue)
	}
	if f := o.MaxDeviceFraction; f < 0 || f > 1 || f != f {
		return bad("MaxDeviceFraction %v must be in [0, 1]", f)
	}
	if o.SegmentSize%unit != 0 {
		return bad("SegmentSize %d is not a multiple of 2 MiB", o.SegmentSize)
	}
	if o.SegmentSize > 1<<40 {
		return bad("SegmentSize %d is impossibly large", o.SegmentSize)
	}
	if o.PageSize != 0 && o.PageSize&(o.PageSize-1) != 0 {
		return bad("PageSize %d is not a power of two", o.PageSize)
	}
	if o.Caching.Upstream != nil || o.Caching.OnNewSegment != nil {
		return bad("Caching.Upstream and Caching.OnNewSegment belong to the managed allocator")
	}
	if o.Caching.ExpandableSegments {
		return bad("Caching.ExpandableSegments: managed memory cannot be mapped by the virtual memory API")
	}
	return nil
}
