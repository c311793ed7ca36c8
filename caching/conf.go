package caching

import (
	"fmt"
	"slices"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/config"
)

// OptionsFromConf builds Options from a parsed GPUMEM_ALLOC_CONF, starting
// from DefaultOptions. Keys of other allocators (release_threshold_mb,
// throttle_ratio) and a backend other than caching are errors naming the key.
func OptionsFromConf(c config.Conf) (Options, error) {
	o := DefaultOptions()
	bad := func(key, format string, args ...any) (Options, error) {
		return Options{}, fmt.Errorf("caching: %s: %s: %w", key, fmt.Sprintf(format, args...), gpumem.ErrInvalidValue)
	}
	if c.Backend != "" && c.Backend != config.BackendCaching {
		return bad("backend", "%q is not the caching allocator", c.Backend)
	}
	if c.ReleaseThresholdMB != nil {
		return bad("release_threshold_mb", "applies to the asyncpool allocator only")
	}
	if c.ThrottleRatio != 0 {
		return bad("throttle_ratio", "applies to the asyncpool allocator only")
	}
	if c.MaxSplitSizeMB > 0 {
		if c.MaxSplitSizeMB > maxRequest/mb {
			return bad("max_split_size_mb", "%d is too large", c.MaxSplitSizeMB)
		}
		o.MaxSplitSize = c.MaxSplitSizeMB * mb
	}
	o.RoundupPower2Divisions = slices.Clone(c.RoundupPower2Divisions)
	o.GarbageCollectionThreshold = c.GarbageCollectionThreshold
	o.ExpandableSegments = c.ExpandableSegments
	o.PerProcessMemoryFraction = c.PerProcessMemoryFraction
	if _, err := o.validate(); err != nil {
		return Options{}, err
	}
	return o, nil
}
