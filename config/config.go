// Package config parses allocator configuration strings in PyTorch's
// PYTORCH_CUDA_ALLOC_CONF syntax, read from GPUMEM_ALLOC_CONF:
//
//	key:value,key:value,key:[a:b,c:d]
//
// Whitespace around keys, values and separators is ignored. An unknown key, a
// key given twice or a bad value is an error that names the key and the value
// and matches gpumem.ErrInvalidValue; nothing is silently ignored.
//
// # Keys
//
//	backend                       caching | asyncpool | managed (default: caching)
//	max_split_size_mb             integer > 20; blocks larger than this are never split (default: unlimited)
//	roundup_power2_divisions      N, or [256:1,512:2,1024:4,>:8] (default: off)
//	garbage_collection_threshold  0 < t < 1 (default: off)
//	expandable_segments           True | False (also true | false; default: False)
//	per_process_memory_fraction   0 < f <= 1 (default: no cap)
//	release_threshold_mb          integer >= 0, for asyncpool (default: the allocator's)
//	throttle_ratio                0 < r <= 1, for asyncpool (default: 0.8)
//	capture_check                 tracked | every_call | hooks, for asyncpool (default: tracked)
//	expandable_placement          mapped_first | best_fit, for caching with expandable segments (default: best_fit)
//	expandable_slack              0 <= f <= 1, for caching with expandable segments (default: 0.03)
//	expandable_handle_chunks      1 <= n <= 65536, for caching with expandable segments (default: 1)
//
// roundup_power2_divisions follows PyTorch: a single N (a power of two) rounds
// every size above 1 MiB up to one of N steps between consecutive powers of
// two; the list form gives the number of steps per size interval, each key a
// power-of-two size in MiB (ascending) or ">" for every larger size (last),
// each value a power of two or 0 to turn rounding off in that interval.
// DivisionsFor looks up the number of steps for a size as PyTorch does.
package config

import (
	"fmt"
	"math"
	"math/bits"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/gpumem/gpumem"
)

// EnvVar is the environment variable FromEnv reads.
const EnvVar = gpumem.AllocConfEnv

// Backend names accepted by the backend key.
const (
	BackendCaching   = "caching"
	BackendAsyncPool = "asyncpool"
	BackendManaged   = "managed"
)

// MinMaxSplitSizeMB is the exclusive lower bound of max_split_size_mb: as in
// PyTorch, the value must be greater than the 20 MiB large-segment size.
const MinMaxSplitSizeMB = 20

// maxDivisions bounds a roundup division count; more steps than this between
// two powers of two would be finer than the 512-byte rounding anyway.
const maxDivisions = 1 << 20

// MaxHandleChunks is the largest expandable_handle_chunks: the most chunks
// that one physical allocation of an expandable segment may cover.
const MaxHandleChunks = 1 << 16

// Division is one interval of roundup_power2_divisions.
type Division struct {
	// UpToMB is the interval's key: a power-of-two size in MiB. Sizes from
	// UpToMB MiB up to (not including) 2*UpToMB MiB use Divisions steps, as
	// in PyTorch. 0 is the ">" catch-all (or, alone, the single-value form).
	UpToMB uint64
	// Divisions is the number of rounding steps (a power of two; 0 turns
	// rounding off in the interval).
	Divisions int
}

// Conf is a parsed allocator configuration. The zero Conf is every default.
type Conf struct {
	Backend                    string     // "" (default: caching), "caching", "asyncpool" or "managed"
	MaxSplitSizeMB             uint64     // 0 = unlimited
	RoundupPower2Divisions     []Division // nil = off; a single N is one Division{UpToMB: 0, Divisions: N}
	GarbageCollectionThreshold float64    // 0 = off
	ExpandableSegments         bool
	PerProcessMemoryFraction   float64  // 0 = none
	ReleaseThresholdMB         *uint64  // nil = the allocator's default
	ThrottleRatio              float64  // 0 = default 0.8
	CaptureCheck               string   // "" = the allocator's default; "tracked", "every_call" or "hooks"
	ExpandablePlacement        string   // "" = the allocator's default; "mapped_first" or "best_fit"
	ExpandableSlack            *float64 // nil = the allocator's default; 0 <= f <= 1
	ExpandableHandleChunks     int      // 0 = the allocator's default; 1 <= n <= MaxHandleChunks
	Raw                        string   // the string parsed, as given
}

// Error is a configuration error: the key, the value and what is wrong. It
// matches gpumem.ErrInvalidValue.
type Error = gpumem.ConfError

// Keys lists the accepted keys in canonical order.
func Keys() []string {
	out := make([]string, len(keyTable))
	for i, k := range keyTable {
		out[i] = k.Name
	}
	return out
}

// FromEnv parses GPUMEM_ALLOC_CONF; unset or empty gives the zero Conf.
func FromEnv() (Conf, error) {
	c, err := Parse(os.Getenv(EnvVar))
	if err != nil {
		return Conf{}, gpumem.ConfFrom(err, EnvVar)
	}
	return c, nil
}

// Parse parses a configuration string. The empty string (or only spaces)
// gives the zero Conf.
func Parse(s string) (Conf, error) {
	c := Conf{Raw: s}
	entries, err := gpumem.SplitAllocConf(s)
	if err != nil {
		return Conf{}, err
	}
	for _, e := range entries {
		if err := c.set(e.Key, e.Value); err != nil {
			return Conf{}, err
		}
	}
	return c, nil
}

func (c *Conf) set(key, val string) error {
	k, ok := lookupKey(key)
	if !ok {
		return &Error{Key: key, Value: val, Reason: "unknown key (known: " + strings.Join(Keys(), ", ") + ")"}
	}
	if !k.list && strings.ContainsAny(val, "[]") {
		return &Error{Key: key, Value: val, Reason: "a list is only accepted by roundup_power2_divisions"}
	}
	if err := k.set(c, val); err != nil {
		return &Error{Key: key, Value: val, Reason: err.Error()}
	}
	return nil
}

func parseUint(s string) (uint64, error) {
	if s == "" {
		return 0, fmt.Errorf("missing value")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("not a non-negative integer")
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("integer out of range")
	}
	return n, nil
}

func parseFloat(s string) (float64, error) {
	if s == "" {
		return 0, fmt.Errorf("missing value")
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("not a number")
	}
	return f, nil
}

func parseDivisionCount(s string, allowZero bool) (int, error) {
	n, err := parseUint(s)
	if err != nil {
		return 0, err
	}
	if n == 0 && allowZero {
		return 0, nil
	}
	if n == 0 || n&(n-1) != 0 {
		return 0, fmt.Errorf("divisions %s must be a power of two", s)
	}
	if n > maxDivisions {
		return 0, fmt.Errorf("divisions %s too large (at most %d)", s, maxDivisions)
	}
	return int(n), nil
}

func parseDivisions(val string) ([]Division, error) {
	if !strings.HasPrefix(val, "[") {
		n, err := parseDivisionCount(val, false)
		if err != nil {
			return nil, err
		}
		return []Division{{UpToMB: 0, Divisions: n}}, nil
	}
	if !strings.HasSuffix(val, "]") {
		return nil, fmt.Errorf("text after ']'")
	}
	inner := strings.TrimSpace(val[1 : len(val)-1])
	if inner == "" {
		return nil, fmt.Errorf("empty list")
	}
	var out []Division
	var last uint64
	for _, item := range strings.Split(inner, ",") {
		k, v, ok := strings.Cut(item, ":")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok {
			return nil, fmt.Errorf("list entry %q lacks ':'", strings.TrimSpace(item))
		}
		if len(out) > 0 && out[len(out)-1].UpToMB == 0 {
			return nil, fmt.Errorf("'>' must be the last entry")
		}
		n, err := parseDivisionCount(v, true)
		if err != nil {
			return nil, err
		}
		if k == ">" {
			out = append(out, Division{UpToMB: 0, Divisions: n})
			continue
		}
		mb, err := parseUint(k)
		if err != nil {
			return nil, fmt.Errorf("interval %q: %v", k, err)
		}
		if mb == 0 || mb&(mb-1) != 0 {
			return nil, fmt.Errorf("interval %s must be a power of two (MiB)", k)
		}
		if mb > 1<<(Intervals-1) {
			return nil, fmt.Errorf("interval %s too large (at most %d MiB)", k, 1<<(Intervals-1))
		}
		if mb <= last {
			return nil, fmt.Errorf("interval %s not above the previous one (%d); keys must ascend", k, last)
		}
		last = mb
		out = append(out, Division{UpToMB: mb, Divisions: n})
	}
	return out, nil
}

// Intervals is PyTorch's kRoundUpPowerOfTwoIntervals: the power-of-two
// size intervals from 1 MiB up that roundup_power2_divisions distinguishes.
const Intervals = 16

// DivisionsFor returns the number of roundup steps roundup_power2_divisions
// gives to an allocation of size bytes, exactly as PyTorch's
// roundup_power2_divisions(size): sizes in [2^k MiB, 2^(k+1) MiB) use
// interval k (sizes under 1 MiB use interval 0, sizes of 2^15 MiB and up the
// last). 0 means no rounding beyond the allocator's own.
func (c Conf) DivisionsFor(size uint64) int {
	if len(c.RoundupPower2Divisions) == 0 {
		return 0
	}
	t := DivisionTable(c.RoundupPower2Divisions)
	idx := 0
	if mb := size >> 20; mb > 0 {
		idx = bits.Len64(mb) - 1
	}
	if idx >= Intervals {
		idx = Intervals - 1
	}
	return t[idx]
}

// DivisionTable expands a division list into PyTorch's per-interval table
// (index k: sizes from 2^k MiB), with PyTorch's rules: the first key also
// covers every smaller interval, and ">" fills from the last key's interval
// on, that interval included. It does not validate the list (Parse does).
func DivisionTable(divs []Division) [Intervals]int {
	var t [Intervals]int
	last := 0
	first := true
	for _, d := range divs {
		if d.UpToMB == 0 {
			for i := last; i < Intervals; i++ {
				t[i] = d.Divisions
			}
			continue
		}
		idx := min(bits.Len64(d.UpToMB)-1, Intervals-1)
		if first {
			for i := 0; i < idx; i++ {
				t[i] = d.Divisions
			}
			first = false
		}
		t[idx] = d.Divisions
		last = idx
	}
	return t
}

// MaxSplitSizeBytes is max_split_size_mb in bytes, or 0 for unlimited.
func (c Conf) MaxSplitSizeBytes() uint64 { return c.MaxSplitSizeMB << 20 }

// BackendOrDefault is the backend key, or "caching" when unset.
func (c Conf) BackendOrDefault() string {
	if c.Backend == "" {
		return BackendCaching
	}
	return c.Backend
}

// Equal reports whether two configurations set the same values (Raw is not compared).
func (c Conf) Equal(o Conf) bool {
	if c.Backend != o.Backend || c.MaxSplitSizeMB != o.MaxSplitSizeMB ||
		c.GarbageCollectionThreshold != o.GarbageCollectionThreshold ||
		c.ExpandableSegments != o.ExpandableSegments ||
		c.PerProcessMemoryFraction != o.PerProcessMemoryFraction ||
		c.ThrottleRatio != o.ThrottleRatio || c.CaptureCheck != o.CaptureCheck ||
		c.ExpandablePlacement != o.ExpandablePlacement || c.ExpandableHandleChunks != o.ExpandableHandleChunks {
		return false
	}
	if (c.ExpandableSlack == nil) != (o.ExpandableSlack == nil) ||
		(c.ExpandableSlack != nil && *c.ExpandableSlack != *o.ExpandableSlack) {
		return false
	}
	if (c.ReleaseThresholdMB == nil) != (o.ReleaseThresholdMB == nil) ||
		(c.ReleaseThresholdMB != nil && *c.ReleaseThresholdMB != *o.ReleaseThresholdMB) {
		return false
	}
	return slices.Equal(c.RoundupPower2Divisions, o.RoundupPower2Divisions)
}

// String renders the configuration canonically: keys in the order of Keys,
// only those set, no spaces. Parse(c.String()) gives a Conf equal to c.
func (c Conf) String() string {
	var parts []string
	for _, k := range keyTable {
		if v, ok := k.get(c); ok {
			parts = append(parts, k.Name+":"+v)
		}
	}
	return strings.Join(parts, ",")
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
