package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
)

func u64(n uint64) *uint64 { return &n }

func TestParseValid(t *testing.T) {
	tests := []struct {
		in   string
		want Conf
	}{
		{"", Conf{}},
		{"   ", Conf{}},
		{"backend:caching", Conf{Backend: "caching"}},
		{"backend:asyncpool", Conf{Backend: "asyncpool"}},
		{"backend:managed", Conf{Backend: "managed"}},
		{"max_split_size_mb:21", Conf{MaxSplitSizeMB: 21}},
		{" max_split_size_mb : 512 , expandable_segments : True ", Conf{MaxSplitSizeMB: 512, ExpandableSegments: true}},
		{"expandable_segments:true", Conf{ExpandableSegments: true}},
		{"expandable_segments:False", Conf{}},
		{"expandable_segments:false", Conf{}},
		{"roundup_power2_divisions:4", Conf{RoundupPower2Divisions: []Division{{0, 4}}}},
		{"roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", Conf{RoundupPower2Divisions: []Division{{256, 1}, {512, 2}, {1024, 4}, {0, 8}}}},
		{"roundup_power2_divisions: [ 64 : 2 , > : 0 ]", Conf{RoundupPower2Divisions: []Division{{64, 2}, {0, 0}}}},
		{"roundup_power2_divisions:[1:8]", Conf{RoundupPower2Divisions: []Division{{1, 8}}}},
		{"garbage_collection_threshold:0.6", Conf{GarbageCollectionThreshold: 0.6}},
		{"per_process_memory_fraction:1", Conf{PerProcessMemoryFraction: 1}},
		{"per_process_memory_fraction:0.25", Conf{PerProcessMemoryFraction: 0.25}},
		{"release_threshold_mb:0", Conf{ReleaseThresholdMB: u64(0)}},
		{"release_threshold_mb:1024", Conf{ReleaseThresholdMB: u64(1024)}},
		{"throttle_ratio:0.8", Conf{ThrottleRatio: 0.8}},
		{"throttle_ratio:1", Conf{ThrottleRatio: 1}},
		{"capture_check:every_call", Conf{CaptureCheck: "every_call"}},
		{"expandable_segments:True,expandable_placement:best_fit", Conf{ExpandableSegments: true, ExpandablePlacement: "best_fit"}},
		{"expandable_placement:mapped_first", Conf{ExpandablePlacement: "mapped_first"}},
		{"expandable_segments:True,expandable_slack:0", Conf{ExpandableSegments: true, ExpandableSlack: new(float64)}},
		{"expandable_segments:True,expandable_handle_chunks:1", Conf{ExpandableSegments: true, ExpandableHandleChunks: 1}},
		{"expandable_handle_chunks:65536", Conf{ExpandableHandleChunks: 65536}},
		{"backend:asyncpool,release_threshold_mb:100,throttle_ratio:0.5",
			Conf{Backend: "asyncpool", ReleaseThresholdMB: u64(100), ThrottleRatio: 0.5}},
	}
	for _, tc := range tests {
		got, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if got.Raw != tc.in {
			t.Errorf("Parse(%q).Raw = %q", tc.in, got.Raw)
		}
		if !got.Equal(tc.want) {
			t.Errorf("Parse(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
		again, err := Parse(got.String())
		if err != nil || !again.Equal(got) {
			t.Errorf("Parse(%q).String() = %q re-parses to %+v, %v", tc.in, got.String(), again, err)
		}
	}
}

func TestParseInvalid(t *testing.T) {
	tests := []struct {
		in, key, value string
	}{
		{"backend:native", "backend", "native"},
		{"backend:", "backend", ""},
		{"max_split_size_mb:20", "max_split_size_mb", "20"},
		{"max_split_size_mb:10", "max_split_size_mb", "10"},
		{"max_split_size_mb:-5", "max_split_size_mb", "-5"},
		{"max_split_size_mb:1.5", "max_split_size_mb", "1.5"},
		{"max_split_size_mb:99999999999999999999", "max_split_size_mb", "99999999999999999999"},
		{"max_split_size_mb:18446744073709551615", "max_split_size_mb", "18446744073709551615"},
		{"roundup_power2_divisions:3", "roundup_power2_divisions", "3"},
		{"roundup_power2_divisions:0", "roundup_power2_divisions", "0"},
		{"roundup_power2_divisions:[256:3]", "roundup_power2_divisions", "[256:3]"},
		{"roundup_power2_divisions:[300:2]", "roundup_power2_divisions", "[300:2]"},
		{"roundup_power2_divisions:[512:2,256:1]", "roundup_power2_divisions", "[512:2,256:1]"},
		{"roundup_power2_divisions:[256:2,256:1]", "roundup_power2_divisions", "[256:2,256:1]"},
		{"roundup_power2_divisions:[>:2,256:1]", "roundup_power2_divisions", "[>:2,256:1]"},
		{"roundup_power2_divisions:[]", "roundup_power2_divisions", "[]"},
		{"roundup_power2_divisions:[256]", "roundup_power2_divisions", "[256]"},
		{"garbage_collection_threshold:1", "garbage_collection_threshold", "1"},
		{"garbage_collection_threshold:0", "garbage_collection_threshold", "0"},
		{"garbage_collection_threshold:NaN", "garbage_collection_threshold", "NaN"},
		{"garbage_collection_threshold:abc", "garbage_collection_threshold", "abc"},
		{"expandable_segments:yes", "expandable_segments", "yes"},
		{"expandable_segments:TRUE", "expandable_segments", "TRUE"},
		{"per_process_memory_fraction:0", "per_process_memory_fraction", "0"},
		{"per_process_memory_fraction:1.01", "per_process_memory_fraction", "1.01"},
		{"per_process_memory_fraction:Inf", "per_process_memory_fraction", "Inf"},
		{"release_threshold_mb:-1", "release_threshold_mb", "-1"},
		{"throttle_ratio:0", "throttle_ratio", "0"},
		{"throttle_ratio:2", "throttle_ratio", "2"},
		{"capture_check:sometimes", "capture_check", "sometimes"},
		{"expandable_placement:worst_fit", "expandable_placement", "worst_fit"},
		{"expandable_placement:Best_Fit", "expandable_placement", "Best_Fit"},
		{"expandable_slack:-0.01", "expandable_slack", "-0.01"},
		{"expandable_slack:1.5", "expandable_slack", "1.5"},
		{"expandable_slack:NaN", "expandable_slack", "NaN"},
		{"expandable_slack:", "expandable_slack", ""},
		{"expandable_handle_chunks:0", "expandable_handle_chunks", "0"},
		{"expandable_handle_chunks:65537", "expandable_handle_chunks", "65537"},
		{"expandable_handle_chunks:-1", "expandable_handle_chunks", "-1"},
		{"expandable_handle_chunks:4.5", "expandable_handle_chunks", "4.5"},
		{"max_split_size_mb:[1:2]", "max_split_size_mb", "[1:2]"},
		{"bogus_key:1", "bogus_key", "1"},
		{"Backend:caching", "Backend", "caching"},
		{"backend:caching,backend:managed", "backend", "managed"},
	}
	for _, tc := range tests {
		_, err := Parse(tc.in)
		if err == nil {
			t.Errorf("Parse(%q): no error", tc.in)
			continue
		}
		if !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("Parse(%q): %v does not match ErrInvalidValue", tc.in, err)
		}
		var ce *Error
		if !errors.As(err, &ce) || ce.Key != tc.key || ce.Value != tc.value {
			t.Errorf("Parse(%q): error %#v, want key %q value %q", tc.in, err, tc.key, tc.value)
		}
		if !strings.Contains(err.Error(), tc.key) {
			t.Errorf("Parse(%q): message %q does not name the key", tc.in, err)
		}
	}
}

func TestParseMalformed(t *testing.T) {
	for _, in := range []string{
		"backend", ":caching", "backend:caching,", ",backend:caching", "a:b,,c:d",
		"roundup_power2_divisions:[1:2", "roundup_power2_divisions:1:2]",
		"roundup_power2_divisions:[[1:2]]", "roundup_power2_divisions:[1:2]x",
	} {
		_, err := Parse(in)
		if !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("Parse(%q) = %v, want an ErrInvalidValue error", in, err)
		}
	}
}

func TestTooSmallMessage(t *testing.T) {
	_, err := Parse("max_split_size_mb:16")
	if err == nil || !strings.Contains(err.Error(), "too small, must be > 20") || !strings.Contains(err.Error(), "16") {
		t.Fatalf("error %v lacks PyTorch's wording or the value", err)
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv(EnvVar, "backend:asyncpool,throttle_ratio:0.5")
	c, err := FromEnv()
	if err != nil || c.Backend != "asyncpool" || c.ThrottleRatio != 0.5 {
		t.Fatalf("FromEnv() = %+v, %v", c, err)
	}
	t.Setenv(EnvVar, "throttle_ratio:5")
	if _, err := FromEnv(); !errors.Is(err, gpumem.ErrInvalidValue) || !strings.Contains(err.Error(), EnvVar) {
		t.Fatalf("FromEnv() with a bad value: %v", err)
	}
	t.Setenv(EnvVar, "")
	if c, err := FromEnv(); err != nil || !c.Equal(Conf{}) {
		t.Fatalf("FromEnv() with nothing set = %+v, %v", c, err)
	}
}

func TestString(t *testing.T) {
	c := Conf{
		Backend: "caching", MaxSplitSizeMB: 128, ExpandableSegments: true,
		RoundupPower2Divisions:     []Division{{256, 1}, {0, 8}},
		GarbageCollectionThreshold: 0.7, PerProcessMemoryFraction: 0.5,
		ReleaseThresholdMB: u64(0), ThrottleRatio: 0.9,
	}
	want := "backend:caching,max_split_size_mb:128,roundup_power2_divisions:[256:1,>:8]," +
		"garbage_collection_threshold:0.7,expandable_segments:True,per_process_memory_fraction:0.5," +
		"release_threshold_mb:0,throttle_ratio:0.9"
	if got := c.String(); got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	if got := (Conf{RoundupPower2Divisions: []Division{{0, 0}}}).String(); got != "roundup_power2_divisions:[>:0]" {
		t.Fatalf("String() of [>:0] = %q", got)
	}
	if (Conf{}).String() != "" {
		t.Fatalf("zero Conf renders as %q", Conf{}.String())
	}
}

func TestDivisionsFor(t *testing.T) {
	const mib = 1 << 20
	c, err := Parse("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]")
	if err != nil {
		t.Fatal(err)
	}
	// PyTorch: the first key also covers smaller sizes; ">" fills from the
	// last key's interval (1024 MiB) on, overriding its 4.
	for _, tc := range []struct {
		size uint64
		want int
	}{
		{1, 1}, {3 * mib, 1}, {256 * mib, 1}, {511 * mib, 1}, {512 * mib, 2},
		{1023 * mib, 2}, {1024 * mib, 8}, {4096 * mib, 8}, {1 << 50, 8},
	} {
		if got := c.DivisionsFor(tc.size); got != tc.want {
			t.Errorf("DivisionsFor(%d MiB) = %d, want %d", tc.size/mib, got, tc.want)
		}
	}
	single, _ := Parse("roundup_power2_divisions:4")
	for _, s := range []uint64{1, 5 * mib, 1 << 40} {
		if got := single.DivisionsFor(s); got != 4 {
			t.Errorf("single: DivisionsFor(%d) = %d", s, got)
		}
	}
	if got := (Conf{}).DivisionsFor(5 * mib); got != 0 {
		t.Errorf("unset: DivisionsFor = %d", got)
	}
}

func TestHelpers(t *testing.T) {
	if (Conf{}).BackendOrDefault() != BackendCaching {
		t.Error("default backend is not caching")
	}
	if (Conf{Backend: "managed"}).BackendOrDefault() != "managed" {
		t.Error("BackendOrDefault ignores the key")
	}
	if got := (Conf{MaxSplitSizeMB: 64}).MaxSplitSizeBytes(); got != 64<<20 {
		t.Errorf("MaxSplitSizeBytes = %d", got)
	}
}
