package config

import (
	"errors"
	"testing"

	"github.com/gpumem/gpumem"
)

// FuzzParse checks that Parse never panics, that every failure matches
// ErrInvalidValue, and that a value that parses re-parses from its String to
// an equal Conf whose String is the same.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "backend:caching", "max_split_size_mb:512,expandable_segments:True",
		"roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", "roundup_power2_divisions:4",
		"garbage_collection_threshold:0.6,per_process_memory_fraction:0.5",
		"backend:asyncpool,release_threshold_mb:0,throttle_ratio:0.8", "max_split_size_mb:20",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := Parse(s)
		if err != nil {
			if !errors.Is(err, gpumem.ErrInvalidValue) {
				t.Fatalf("Parse(%q): %v does not match ErrInvalidValue", s, err)
			}
			return
		}
		r := c.String()
		c2, err := Parse(r)
		if err != nil {
			t.Fatalf("Parse(%q) ok, but its String %q fails: %v", s, r, err)
		}
		if !c2.Equal(c) {
			t.Fatalf("Parse(%q) = %+v; re-parsed from %q = %+v", s, c, r, c2)
		}
		if c2.String() != r {
			t.Fatalf("String not canonical: %q then %q", r, c2.String())
		}
	})
}
