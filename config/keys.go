package config

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Key is one configuration key: its name, the allocators it applies to, and
// how its value is read and written. The table of keys (KeyTable) is the one
// place that says which allocator reads which key, so that each allocator
// checks a configuration with Conf.CheckFor instead of listing the keys of
// the others, and the error for a key that does not apply is the same
// everywhere.
type Key struct {
	// Name is the key as written in GPUMEM_ALLOC_CONF.
	Name string
	// Allocators are the allocators that read the key (nil: every one).
	Allocators []string
	// Doc says what the key's values are and mean.
	Doc string

	list bool                          // the value may be a bracketed list
	set  func(c *Conf, v string) error // parses and stores a value
	get  func(c Conf) (string, bool)   // the canonical value, when set
}

// AppliesTo reports whether the allocator reads the key.
func (k Key) AppliesTo(allocator string) bool {
	if k.Allocators == nil {
		return true
	}
	for _, a := range k.Allocators {
		if a == allocator {
			return true
		}
	}
	return false
}

// The allocators that read the caching allocator's pool keys: the caching
// allocator, and managed memory, whose pools are the caching allocator's.
var cachingPools = []string{BackendCaching, BackendManaged}

var keyTable = []Key{
	{Name: "backend", Doc: "caching | asyncpool | managed (default: caching)",
		set: func(c *Conf, v string) error {
			switch v {
			case BackendCaching, BackendAsyncPool, BackendManaged:
				c.Backend = v
				return nil
			}
			return errors.New("want caching, asyncpool or managed")
		},
		get: func(c Conf) (string, bool) { return c.Backend, c.Backend != "" }},
	{Name: "max_split_size_mb", Allocators: cachingPools,
		Doc: "integer > 20; blocks larger than this are never split (default: unlimited)",
		set: func(c *Conf, v string) error {
			n, err := parseUint(v)
			if err != nil {
				return err
			}
			if n <= MinMaxSplitSizeMB {
				return fmt.Errorf("too small, must be > %d", MinMaxSplitSizeMB)
			}
			if n > math.MaxUint64>>20 {
				return errors.New("too large: the size in bytes overflows 64 bits")
			}
			c.MaxSplitSizeMB = n
			return nil
		},
		get: func(c Conf) (string, bool) {
			return strconv.FormatUint(c.MaxSplitSizeMB, 10), c.MaxSplitSizeMB != 0
		}},
	{Name: "roundup_power2_divisions", Allocators: cachingPools, list: true,
		Doc: "N, or [256:1,512:2,1024:4,>:8] (default: off)",
		set: func(c *Conf, v string) error {
			d, err := parseDivisions(v)
			if err != nil {
				return err
			}
			c.RoundupPower2Divisions = d
			return nil
		},
		get: func(c Conf) (string, bool) {
			d := c.RoundupPower2Divisions
			if len(d) == 1 && d[0].UpToMB == 0 && d[0].Divisions != 0 {
				return strconv.Itoa(d[0].Divisions), true
			}
			if len(d) == 0 {
				return "", false
			}
			items := make([]string, len(d))
			for i, x := range d {
				k := ">"
				if x.UpToMB != 0 {
					k = strconv.FormatUint(x.UpToMB, 10)
				}
				items[i] = k + ":" + strconv.Itoa(x.Divisions)
			}
			return "[" + strings.Join(items, ",") + "]", true
		}},
	{Name: "garbage_collection_threshold", Allocators: cachingPools,
		Doc: "0 < t < 1 (default: off)",
		set: func(c *Conf, v string) error {
			f, err := parseFloatIn(v, func(f float64) bool { return f > 0 && f < 1 }, "must be greater than 0 and less than 1")
			if err != nil {
				return err
			}
			c.GarbageCollectionThreshold = f
			return nil
		},
		get: func(c Conf) (string, bool) {
			return formatFloat(c.GarbageCollectionThreshold), c.GarbageCollectionThreshold != 0
		}},
	{Name: "expandable_segments", Allocators: []string{BackendCaching},
		Doc: "True | False (also true | false; default: False)",
		set: func(c *Conf, v string) error {
			switch v {
			case "True", "true":
				c.ExpandableSegments = true
			case "False", "false":
				c.ExpandableSegments = false
			default:
				return errors.New("want True or False")
			}
			return nil
		},
		get: func(c Conf) (string, bool) { return "True", c.ExpandableSegments }},
	{Name: "per_process_memory_fraction",
		Doc: "0 < f <= 1 (default: no cap)",
		set: func(c *Conf, v string) error {
			f, err := parseFloatIn(v, func(f float64) bool { return f > 0 && f <= 1 }, "must be greater than 0 and at most 1")
			if err != nil {
				return err
			}
			c.PerProcessMemoryFraction = f
			return nil
		},
		get: func(c Conf) (string, bool) {
			return formatFloat(c.PerProcessMemoryFraction), c.PerProcessMemoryFraction != 0
		}},
	{Name: "release_threshold_mb", Allocators: []string{BackendAsyncPool},
		Doc: "integer >= 0, for asyncpool (default: the allocator's)",
		set: func(c *Conf, v string) error {
			n, err := parseUint(v)
			if err != nil {
				return err
			}
			if n > math.MaxUint64>>20 {
				return errors.New("too large: the size in bytes overflows 64 bits")
			}
			c.ReleaseThresholdMB = &n
			return nil
		},
		get: func(c Conf) (string, bool) {
			if c.ReleaseThresholdMB == nil {
				return "", false
			}
			return strconv.FormatUint(*c.ReleaseThresholdMB, 10), true
		}},
	{Name: "throttle_ratio", Allocators: []string{BackendAsyncPool},
		Doc: "0 < r <= 1, for asyncpool (default: 0.8)",
		set: func(c *Conf, v string) error {
			f, err := parseFloatIn(v, func(f float64) bool { return f > 0 && f <= 1 }, "must be greater than 0 and at most 1")
			if err != nil {
				return err
			}
			c.ThrottleRatio = f
			return nil
		},
		get: func(c Conf) (string, bool) { return formatFloat(c.ThrottleRatio), c.ThrottleRatio != 0 }},
	choiceKey("capture_check", BackendAsyncPool, "for asyncpool (default: tracked)",
		func(c *Conf) *string { return &c.CaptureCheck }, "tracked", "every_call", "hooks"),
	choiceKey("expandable_placement", BackendCaching, "for caching with expandable segments (default: best_fit)",
		func(c *Conf) *string { return &c.ExpandablePlacement }, "mapped_first", "best_fit"),
	{Name: "expandable_slack", Allocators: []string{BackendCaching},
		Doc: "0 <= f <= 1, for caching with expandable segments (default: 0.03)",
		set: func(c *Conf, v string) error {
			f, err := parseFloatIn(v, func(f float64) bool { return f >= 0 && f <= 1 }, "must be at least 0 and at most 1")
			if err != nil {
				return err
			}
			c.ExpandableSlack = &f
			return nil
		},
		get: func(c Conf) (string, bool) {
			if c.ExpandableSlack == nil {
				return "", false
			}
			return formatFloat(*c.ExpandableSlack), true
		}},
	{Name: "expandable_handle_chunks", Allocators: []string{BackendCaching},
		Doc: "1 <= n <= 65536, for caching with expandable segments (default: 1)",
		set: func(c *Conf, v string) error {
			n, err := parseUint(v)
			if err != nil {
				return err
			}
			if n < 1 || n > MaxHandleChunks {
				return fmt.Errorf("must be at least 1 and at most %d", MaxHandleChunks)
			}
			c.ExpandableHandleChunks = int(n)
			return nil
		},
		get: func(c Conf) (string, bool) {
			return strconv.Itoa(c.ExpandableHandleChunks), c.ExpandableHandleChunks != 0
		}},
}

// parseFloatIn parses v as parseFloat does and checks it with ok: a value
// that fails is the error msg.
func parseFloatIn(v string, ok func(float64) bool, msg string) (float64, error) {
	f, err := parseFloat(v)
	if err != nil {
		return 0, err
	}
	if !ok(f) {
		return 0, errors.New(msg)
	}
	return f, nil
}

// choiceKey is a key of one allocator whose value is one of values, kept
// in the string field returns; doc follows the list of values.
func choiceKey(name, allocator, doc string, field func(*Conf) *string, values ...string) Key {
	return Key{Name: name, Allocators: []string{allocator},
		Doc: strings.Join(values, " | ") + ", " + doc,
		set: func(c *Conf, v string) error {
			if !slices.Contains(values, v) {
				return errors.New("must be " + strings.Join(values[:len(values)-1], ", ") + " or " + values[len(values)-1])
			}
			*field(c) = v
			return nil
		},
		get: func(c Conf) (string, bool) { v := *field(&c); return v, v != "" }}
}

// KeyTable returns the table of keys, in canonical order.
func KeyTable() []Key { return append([]Key(nil), keyTable...) }

func lookupKey(name string) (Key, bool) {
	for _, k := range keyTable {
		if k.Name == name {
			return k, true
		}
	}
	return Key{}, false
}

// CheckFor returns an error naming the first key set in c that the
// allocator does not read, or a backend key naming another allocator; nil
// when every key set applies. The error is an *Error (it matches
// gpumem.ErrInvalidValue) that names the allocators the key applies to.
func (c Conf) CheckFor(allocator string) error {
	if c.Backend != "" && c.Backend != allocator {
		return &Error{Key: "backend", Value: c.Backend, Reason: fmt.Sprintf("is not the %s allocator", allocator)}
	}
	for _, k := range keyTable {
		v, set := k.get(c)
		if set && !k.AppliesTo(allocator) {
			return &Error{Key: k.Name, Value: v,
				Reason: fmt.Sprintf("does not apply to the %s allocator (it applies to %s)", allocator, strings.Join(k.Allocators, ", "))}
		}
	}
	return nil
}
