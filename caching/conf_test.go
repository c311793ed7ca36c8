package caching

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/config"
)

func TestOptionsFromConf(t *testing.T) {
	c, err := config.Parse("max_split_size_mb:64,roundup_power2_divisions:[256:1,512:2,1024:4,>:8],garbage_collection_threshold:0.7,expandable_segments:True,per_process_memory_fraction:0.5")
	if err != nil {
		t.Fatal(err)
	}
	o, err := OptionsFromConf(c)
	if err != nil {
		t.Fatal(err)
	}
	if o.MaxSplitSize != 64<<20 || o.GarbageCollectionThreshold != 0.7 || !o.ExpandableSegments ||
		o.PerProcessMemoryFraction != 0.5 || len(o.RoundupPower2Divisions) != 4 || !o.CrossStreamReuse {
		t.Errorf("options %+v", o)
	}
	tab, _ := divisionTable(o.RoundupPower2Divisions)
	if got := roundSize(&tab, 600<<20); got != 768<<20 {
		t.Errorf("600 MiB rounds to %d under the parsed divisions", got)
	}
	slack := 0.01
	for _, bad := range []struct {
		conf config.Conf
		key  string
	}{
		{config.Conf{Backend: "asyncpool"}, "backend"},
		{config.Conf{ThrottleRatio: 0.5}, "throttle_ratio"},
		{config.Conf{ReleaseThresholdMB: new(uint64)}, "release_threshold_mb"},
		{config.Conf{MaxSplitSizeMB: 10}, "max_split_size_mb"},
		{config.Conf{GarbageCollectionThreshold: 2}, "garbage_collection_threshold"},
		{config.Conf{PerProcessMemoryFraction: 3}, "per_process_memory_fraction"},
		{config.Conf{RoundupPower2Divisions: []config.Division{{UpToMB: 0, Divisions: 6}}}, "roundup_power2_divisions"},
		{config.Conf{ExpandablePlacement: "best_fit"}, "expandable_placement"}, // without expandable segments
		{config.Conf{ExpandableSlack: &slack}, "expandable_slack"},             // without expandable segments
		{config.Conf{ExpandableHandleChunks: 2}, "expandable_handle_chunks"},   // without expandable segments
		{config.Conf{ExpandableSegments: true, ExpandableHandleChunks: 1 << 17}, "expandable_handle_chunks"},
	} {
		_, err := OptionsFromConf(bad.conf)
		if !errors.Is(err, gpumem.ErrInvalidValue) || !strings.Contains(err.Error(), bad.key) {
			t.Errorf("%+v: %v, want an error naming %s", bad.conf, err, bad.key)
		}
	}
}

func TestOptionsFromConfExpandablePlacement(t *testing.T) {
	for conf, want := range map[string]struct {
		bestFit bool
		slack   float64
		handle  int
	}{
		"expandable_segments:True":                                                         {true, DefaultExpandableSlack, 0},
		"expandable_segments:True,expandable_placement:mapped_first":                       {false, DefaultExpandableSlack, 0},
		"expandable_segments:True,expandable_placement:best_fit":                           {true, DefaultExpandableSlack, 0},
		"expandable_segments:True,expandable_slack:0":                                      {true, 0, 0},
		"expandable_segments:True,expandable_slack:0.25,expandable_placement:mapped_first": {false, 0.25, 0},
		"expandable_segments:True,expandable_handle_chunks:1":                              {true, DefaultExpandableSlack, 1},
		"expandable_segments:True,expandable_handle_chunks:16":                             {true, DefaultExpandableSlack, 16},
	} {
		c, err := config.Parse(conf)
		if err != nil {
			t.Fatal(err)
		}
		o, err := OptionsFromConf(c)
		if err != nil {
			t.Fatalf("%s: %v", conf, err)
		}
		if o.ExpandableBestFit != want.bestFit || o.ExpandableSlack != want.slack || o.ExpandableHandleChunks != want.handle || !o.ExpandableSegments {
			t.Errorf("%s: ExpandableBestFit %v, ExpandableSlack %v, ExpandableHandleChunks %d, ExpandableSegments %v; want %v, %v, %d, true",
				conf, o.ExpandableBestFit, o.ExpandableSlack, o.ExpandableHandleChunks, o.ExpandableSegments, want.bestFit, want.slack, want.handle)
		}
	}
}
