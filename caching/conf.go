package caching

import (
	"fmt"
	"slices"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/config"
)

// OptionsFromConf builds Options from a parsed GPUMEM_ALLOC_CONF, starting
// from DefaultOptions. A key that does not apply to the caching allocator
// (release_threshold_mb, throttle_ratio) or a backend other than caching is
// config's error naming the key (Conf.CheckFor), which matches
// gpumem.ErrInvalidValue.
func OptionsFromConf(c config.Conf) (Options, error) {
	if err := c.CheckFor(config.BackendCaching); err != nil {
		return Options{}, err
	}
	o := DefaultOptions()
	bad := func(key, format string, args ...any) (Options, error) {
		return Options{}, fmt.Errorf("caching: %s: %s: %w", key, fmt.Sprintf(format, args...), gpumem.ErrInvalidValue)
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
	if c.ExpandablePlacement != "" && !c.ExpandableSegments {
		return bad("expandable_placement", "%s applies only with expandable_segments:True", c.ExpandablePlacement)
	}
	if c.ExpandablePlacement != "" {
		o.ExpandableBestFit = c.ExpandablePlacement == "best_fit"
	}
	if c.ExpandableSlack != nil {
		if !c.ExpandableSegments {
			return bad("expandable_slack", "%v applies only with expandable_segments:True", *c.ExpandableSlack)
		}
		o.ExpandableSlack = *c.ExpandableSlack
	}
	if c.ExpandableHandleChunks != 0 {
		if !c.ExpandableSegments {
			return bad("expandable_handle_chunks", "%d applies only with expandable_segments:True", c.ExpandableHandleChunks)
		}
		o.ExpandableHandleChunks = c.ExpandableHandleChunks
	}
	o.PerProcessMemoryFraction = c.PerProcessMemoryFraction
	if _, err := o.validate(); err != nil {
		return Options{}, err
	}
	return o, nil
}
