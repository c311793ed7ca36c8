package config_test

import (
	"errors"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/config"
	"github.com/gpumem/gpumem/internal/fakegpu"
)

func TestBuilder(t *testing.T) {
	boom := errors.New("boom")
	var gotConf config.Conf
	options := func(c config.Conf) (string, error) {
		gotConf = c
		if c.MaxSplitSizeMB == 64 {
			return "", boom
		}
		return c.String(), nil
	}
	var gotOpts string
	build := func(b gpumem.Backend, o string) (*fakegpu.Pass, error) {
		gotOpts = o
		if o == "" {
			return nil, boom
		}
		return fakegpu.NewPass(b, "pass"), nil
	}
	newFromConf := config.Builder(options, build)
	g := fakegpu.New(1 << 30)

	a, err := newFromConf(g, "expandable_segments:True")
	if err != nil || a == nil || !gotConf.ExpandableSegments || gotOpts != "expandable_segments:True" {
		t.Fatalf("build: %v, %v; conf %+v, options %q", a, err, gotConf, gotOpts)
	}
	if a, err := newFromConf(g, "frobnicate:1"); a != nil || !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("bad configuration: %v, %v", a, err)
	}
	if a, err := newFromConf(g, "max_split_size_mb:64"); a != nil || !errors.Is(err, boom) {
		t.Errorf("options refused: %v, %v", a, err)
	}
	// A failed build is a nil interface, not one holding a nil *Pass.
	if a, err := newFromConf(g, ""); a != nil || !errors.Is(err, boom) {
		t.Errorf("build refused: %v (nil: %v), %v", a, a == nil, err)
	}
}
