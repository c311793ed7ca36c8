package asyncpool

import (
	"math"

	"github.com/gpumem/gpumem/config"
)

// OptionsFromConf builds Options from a parsed GPUMEM_ALLOC_CONF, starting
// from DefaultOptions. It reads release_threshold_mb, throttle_ratio and
// capture_check;
// per_process_memory_fraction, a cap on the bytes handed out, is the shared
// limit adaptor's (adaptor.NewLimitFraction), which the registered
// constructor (gpumem.NewAllocator with backend:asyncpool) puts over the
// allocator: a caller of OptionsFromConf and New wraps it the same way. A key that does not apply to this allocator
// (the caching allocator's pool keys: max_split_size_mb,
// roundup_power2_divisions, garbage_collection_threshold,
// expandable_segments; the driver's pool does its own splitting), or a
// backend other than asyncpool, is a *config.Error naming it (see
// config.Conf.CheckFor), so that nothing is silently ignored.
func OptionsFromConf(c config.Conf) (Options, error) {
	o := DefaultOptions()
	if err := c.CheckFor(config.BackendAsyncPool); err != nil {
		return o, err
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
	for _, m := range []CaptureCheck{CaptureCheckTracked, CaptureCheckEveryCall, CaptureCheckHooks} {
		if c.CaptureCheck == m.String() {
			o.CaptureCheck = m
		}
	}
	if err := o.normalize(); err != nil {
		return o, err
	}
	return o, nil
}
