package managed

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/config"
	"github.com/gpumem/gpumem/sim"
	"github.com/gpumem/gpumem/simtest"
)

func registered(t *testing.T) gpumem.AllocatorInfo {
	t.Helper()
	for _, info := range gpumem.Allocators() {
		if info.Name == config.BackendManaged {
			return info
		}
	}
	t.Fatal("managed is not registered")
	return gpumem.AllocatorInfo{}
}

func TestRegistered(t *testing.T) {
	g := simtest.New(t, sim.Config{})
	defer g.Close()
	saved := enabled.Load()
	defer enabled.Store(saved)
	t.Setenv(EnvEnable, "")
	Enable(false)
	info := registered(t)
	if info.New == nil || info.Doc == "" || info.Enabled == nil {
		t.Fatalf("registration %+v: want a constructor, a description and a switch", info)
	}

	// Off when not enabled and not named.
	on, reason := info.Enabled()
	if on || !strings.Contains(reason, EnvEnable+"=1") {
		t.Errorf("Enabled() = %v, %q: want off, naming %s=1", on, reason, EnvEnable)
	}
	if a, err := info.New(g, "max_split_size_mb:64"); !errors.Is(err, ErrNotEnabled) || a != nil {
		t.Errorf("built without being enabled or named: %v, %v", a, err)
	}

	// Named: forced on, with the pool keys read.
	for _, named := range []bool{false, true} {
		var a gpumem.Allocator
		var err error
		if named {
			a, err = gpumem.NewNamedAllocator(g, "managed", "max_split_size_mb:64")
		} else {
			a, err = gpumem.NewAllocator(g, "backend:managed,max_split_size_mb:64")
		}
		if err != nil {
			t.Fatal(err)
		}
		m, ok := a.(*Allocator)
		if !ok {
			t.Fatalf("built a %T", a)
		}
		if !m.opts.Force || m.opts.Caching.MaxSplitSize != 64*mib {
			t.Errorf("options %+v", m.opts)
		}
		if _, ok := gpumem.HistoryOf(a); !ok {
			t.Error("no history through gpumem.HistoryOf")
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// On when enabled.
	Enable(true)
	if on, _ := info.Enabled(); !on {
		t.Error("Enabled() off after Enable(true)")
	}
	a, err := info.New(g, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	// Keys that do not apply.
	for _, c := range []struct{ conf, key string }{
		{"backend:managed,expandable_segments:True", "expandable_segments"},
		{"backend:managed,throttle_ratio:0.5", "throttle_ratio"},
		{"backend:managed,release_threshold_mb:10", "release_threshold_mb"},
	} {
		a, err := gpumem.NewAllocator(g, c.conf)
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Key != c.key || !errors.Is(err, gpumem.ErrInvalidValue) || a != nil {
			t.Errorf("%s: allocator %v, error %v: want a *config.Error naming %s", c.conf, a, err, c.key)
		}
	}
}

func TestEnableSwitch(t *testing.T) {
	g := simtest.New(t, sim.Config{})
	defer g.Close()
	defer Enable(false)
	t.Setenv(EnvEnable, "")
	Enable(false)
	if _, err := New(g, Options{}); !errors.Is(err, ErrNotEnabled) || !errors.Is(err, gpumem.ErrNotSupported) {
		t.Fatalf("New while disabled: %v, want ErrNotEnabled", err)
	}
	enabled.Store(0) // back to the environment
	if Enabled() {
		t.Fatal("enabled with an empty environment")
	}
	t.Setenv(EnvEnable, "1")
	if !Enabled() {
		t.Fatalf("%s=1 did not enable", EnvEnable)
	}
	Enable(false)
	if Enabled() {
		t.Fatal("Enable(false) did not override the environment")
	}
	Enable(true)
	a, err := New(g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestOptionsFromConf(t *testing.T) {
	c, err := config.Parse("backend:managed,max_split_size_mb:64,garbage_collection_threshold:0.6")
	if err != nil {
		t.Fatal(err)
	}
	o, err := OptionsFromConf(c)
	if err != nil {
		t.Fatal(err)
	}
	if o.Caching.MaxSplitSize != 64*mib || o.Caching.GarbageCollectionThreshold != 0.6 {
		t.Fatalf("options %+v", o.Caching)
	}
	for _, s := range []string{"backend:caching", "expandable_segments:True", "release_threshold_mb:10"} {
		c, err := config.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := OptionsFromConf(c); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("%s: %v", s, err)
		}
	}
}
