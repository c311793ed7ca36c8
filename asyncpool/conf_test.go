package asyncpool_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
	"github.com/gpumem/gpumem/config"
)

func TestOptionsFromConf(t *testing.T) {
	cases := []struct {
		conf    string
		want    func(o asyncpool.Options) bool
		wantErr string // a key the error must name
	}{
		{"", func(o asyncpool.Options) bool {
			return o.ReleaseThreshold == asyncpool.KeepAll && o.ThrottleRatio == asyncpool.DefaultThrottleRatio
		}, ""},
		{"backend:asyncpool,release_threshold_mb:64,throttle_ratio:0.5,per_process_memory_fraction:0.75", func(o asyncpool.Options) bool {
			return o.ReleaseThreshold == 64<<20 && o.ThrottleRatio == 0.5
		}, ""},
		{"release_threshold_mb:0", func(o asyncpool.Options) bool { return o.ReleaseThreshold == 0 }, ""},
		{"capture_check:every_call", func(o asyncpool.Options) bool { return o.CaptureCheck == asyncpool.CaptureCheckEveryCall }, ""},
		{"capture_check:hooks", func(o asyncpool.Options) bool { return o.CaptureCheck == asyncpool.CaptureCheckHooks }, ""},
		{"capture_check:tracked", func(o asyncpool.Options) bool { return o.CaptureCheck == asyncpool.CaptureCheckTracked }, ""},
		{"", func(o asyncpool.Options) bool { return o.CaptureCheck == asyncpool.CaptureCheckTracked }, ""},
		{"backend:caching,capture_check:hooks", nil, "backend"},
		{"backend:caching", nil, "backend"},
		{"backend:asyncpool,max_split_size_mb:64", nil, "max_split_size_mb"},
		{"backend:asyncpool,expandable_segments:True", nil, "expandable_segments"},
		{"backend:asyncpool,garbage_collection_threshold:0.5", nil, "garbage_collection_threshold"},
		{"backend:asyncpool,roundup_power2_divisions:4", nil, "roundup_power2_divisions"},
	}
	for _, c := range cases {
		conf, err := config.Parse(c.conf)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.conf, err)
		}
		o, err := asyncpool.OptionsFromConf(conf)
		if c.wantErr != "" {
			if !errors.Is(err, gpumem.ErrInvalidValue) || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q: error %v should name %s", c.conf, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.conf, err)
			continue
		}
		if !c.want(o) {
			t.Errorf("%q: options %+v", c.conf, o)
		}
	}
}
