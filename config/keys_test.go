package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
)

// Every key set in a configuration is either read by the allocator or named
// in the error, with the allocators it applies to; the error is generated
// from the key table, the same for every allocator.
func TestCheckFor(t *testing.T) {
	cases := []struct {
		conf, allocator, badKey, appliesTo string
	}{
		{"", BackendCaching, "", ""},
		{"max_split_size_mb:64,expandable_segments:True", BackendCaching, "", ""},
		{"max_split_size_mb:64", BackendManaged, "", ""},
		{"max_split_size_mb:64", BackendAsyncPool, "max_split_size_mb", "caching, managed"},
		{"expandable_segments:True", BackendManaged, "expandable_segments", "caching"},
		{"throttle_ratio:0.5", BackendCaching, "throttle_ratio", "asyncpool"},
		{"expandable_placement:best_fit", BackendAsyncPool, "expandable_placement", "caching"},
		{"release_threshold_mb:0", BackendManaged, "release_threshold_mb", "asyncpool"},
		{"per_process_memory_fraction:0.5", BackendAsyncPool, "", ""},
		{"backend:asyncpool", BackendCaching, "backend", ""},
		{"backend:caching,garbage_collection_threshold:0.5", BackendCaching, "", ""},
	}
	for _, c := range cases {
		conf, err := Parse(c.conf)
		if err != nil {
			t.Fatalf("%q: %v", c.conf, err)
		}
		err = conf.CheckFor(c.allocator)
		if c.badKey == "" {
			if err != nil {
				t.Errorf("%q for %s: %v", c.conf, c.allocator, err)
			}
			continue
		}
		var ce *Error
		if !errors.As(err, &ce) || ce.Key != c.badKey || !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("%q for %s: %v, want an error naming %s", c.conf, c.allocator, err, c.badKey)
			continue
		}
		if c.appliesTo != "" && !strings.Contains(err.Error(), "it applies to "+c.appliesTo) {
			t.Errorf("%q for %s: %v does not say it applies to %s", c.conf, c.allocator, err, c.appliesTo)
		}
	}
}

// The table covers every key and every key round-trips through String.
func TestKeyTable(t *testing.T) {
	full := "backend:caching,max_split_size_mb:64,roundup_power2_divisions:[256:1,>:8]," +
		"garbage_collection_threshold:0.5,expandable_segments:True,per_process_memory_fraction:0.5," +
		"release_threshold_mb:3,throttle_ratio:0.25,capture_check:hooks,expandable_placement:best_fit,expandable_slack:0.03,expandable_handle_chunks:8"
	c, err := Parse(full)
	if err != nil {
		t.Fatal(err)
	}
	if c.String() != full {
		t.Errorf("String() = %q, want %q", c.String(), full)
	}
	for _, k := range KeyTable() {
		if _, set := k.get(c); !set {
			t.Errorf("key %s is not set by %q", k.Name, full)
		}
		if k.Doc == "" {
			t.Errorf("key %s has no doc", k.Name)
		}
	}
	if len(KeyTable()) != len(Keys()) {
		t.Errorf("%d keys, %d names", len(KeyTable()), len(Keys()))
	}
}
