package asyncpool

import (
	"fmt"
	"math"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/config"
)

// OptionsFromConf builds Options from a parsed GPUMEM_ALLOC_CONF, starting
// from DefaultOptions. It reads release_threshold_mb, throttle_ratio and
// per_process_memory_fraction; a key that only the caching allocator
// understands (max_split_size_mb, roundup_power2_divisions,
// garbage_collection_threshold, expandable_segments) is an error naming it,
// as is a backend other than asyncpool, so that nothing is silently ignored.
func OptionsFromConf(c config.Conf) (Options, error) {
	o := DefaultOptions()
	if c.Backend != "" && c.Backend != config.BackendAsyncPool {
		return o, fmt.Errorf("asyncpool: configuration names backend %q, not %q: %w", c.Backend, config.BackendAsyncPool, gpumem.ErrInvalidValue)
	}
	inapplicable := func(key string) error {
		return fmt.Errorf("asyncpool: %s does not apply to the asyncpool allocator (the driver's pool does its own splitting): %w", key, gpumem.ErrInvalidValue)
	}
	switch {
	case c.MaxSplitSizeMB != 0:
		return o, inapplicable("max_split_size_mb")
	case len(c.RoundupPower2Divisions) != 0:
		return o, inapplicable("roundup_power2_divisions")
	case c.GarbageCollectionThreshold != 0:
		return o, inapplicable("garbage_collection_threshold")
	case c.ExpandableSegments:
		return o, inapplicable("expandable_segments")
	}
	if c.ReleaseThresholdMB != nil {
		mb := *c.ReleaseThresholdMB
		if mb > math.MaxUint64>>20 {
			o.ReleaseThreshold = KeepAll
		} else {
			o.ReleaseThreshold = mb << 20
		}
	}
	if c.ThrottleRatio != 0 {
		o.ThrottleRatio = c.ThrottleRatio
	}
	o.MemoryFraction = c.PerProcessMemoryFraction
	if err := o.normalize(); err != nil {
		return o, err
	}
	return o, nil
}
