package replay_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/replay"
	"github.com/gpumem/gpumem/sim"
	"github.com/gpumem/gpumem/trace"
)

// passesTrace leaves allocation 4 live at its end: a later pass must free
// it first, or its floor would grow pass after pass.
const passesTrace = `a 1 3145728 0
a 2 5242880 0
f 1 0
a 3 1048576 1
f 2 0
f 3 1
a 4 7340032 0
`

// passesRig returns passesTrace and a simulator closed at the test's end.
func passesRig(t *testing.T) (*trace.Trace, *sim.GPU) {
	t.Helper()
	tr, err := trace.Read(strings.NewReader(passesTrace))
	if err != nil {
		t.Fatal(err)
	}
	g, err := sim.New(sim.Config{NoStacks: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return tr, g
}

func replayPasses(t *testing.T, passes int) replay.Result {
	t.Helper()
	tr, g := passesRig(t)
	a, err := caching.New(g, caching.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	res, err := replay.Run(g, tr, a, replay.Options{Passes: passes})
	if err != nil {
		t.Fatal(err)
	}
	if leaks := g.Leaks(); len(leaks) != 0 {
		t.Fatalf("the replay leaked: %v", leaks)
	}
	return res
}

// Three passes through the caching allocator: every pass replays every
// pair; the first fills the cache, the later ones are served from it with
// no device call; each pass's floor and footprint are the first's (what a
// pass leaves live is freed before the next).
func TestPassesSettle(t *testing.T) {
	one := replayPasses(t, 1)
	if len(one.Passes) != 0 {
		t.Fatalf("one pass reported per-pass figures: %+v", one.Passes)
	}
	res := replayPasses(t, 3)
	if res.Pairs != 3*one.Pairs || res.PeakRequested != one.PeakRequested || res.PeakReserved != one.PeakReserved {
		t.Fatalf("three passes: %d pairs, floor %d, peak %d; one pass: %d, %d, %d",
			res.Pairs, res.PeakRequested, res.PeakReserved, one.Pairs, one.PeakRequested, one.PeakReserved)
	}
	if len(res.Passes) != 3 {
		t.Fatalf("%d passes reported", len(res.Passes))
	}
	if p := res.Passes[0]; p.DeviceAllocs != one.DeviceAllocs || p.DeviceAllocs == 0 {
		t.Errorf("pass 1 made %d device allocations, the single pass %d", p.DeviceAllocs, one.DeviceAllocs)
	}
	var allocs int64
	for i, p := range res.Passes {
		allocs += p.DeviceAllocs
		if i > 0 && (p.DeviceAllocs != 0 || p.DeviceFrees != 0 || p.DeviceSyncs != 0) {
			t.Errorf("pass %d made %d device allocations, %d frees and %d syncs: the cache should serve it", i+1, p.DeviceAllocs, p.DeviceFrees, p.DeviceSyncs)
		}
		if p.PeakReserved != one.PeakReserved {
			t.Errorf("pass %d peaked at %d reserved bytes, one pass at %d", i+1, p.PeakReserved, one.PeakReserved)
		}
		if p.NsPerPair <= 0 {
			t.Errorf("pass %d: %v ns per pair", i+1, p.NsPerPair)
		}
	}
	if allocs != res.DeviceAllocs {
		t.Errorf("passes made %d device allocations, the replay %d", allocs, res.DeviceAllocs)
	}
	if res.LiveAtEnd != 1 {
		t.Errorf("%d allocations live at the end, want the last pass's 1", res.LiveAtEnd)
	}
}

func TestPassesRefused(t *testing.T) {
	tr, g := passesRig(t)
	for _, n := range []int{-1, replay.MaxPasses + 1} {
		a, err := caching.New(g, caching.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := replay.Run(g, tr, a, replay.Options{Passes: n}); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("%d passes: %v, want ErrInvalidValue", n, err)
		}
	}
}

// device_syncs counts the allocator's synchronizations of the whole device,
// over the replay and pass by pass: with expandable segments, a growth past
// the high-water mark that takes free chunks from another stream's segment
// unmaps them and synchronizes once; one that moves free chunks of its own
// segment leaves them mapped where they were and synchronizes nothing.
func TestPassesCountDeviceSyncs(t *testing.T) {
	for _, c := range []struct {
		name  string
		first int // the stream of the first allocation, whose chunks move
		syncs int64
	}{{"own segment", 0, 0}, {"another stream's segment", 1, 1}} {
		t.Run(c.name, func(t *testing.T) { checkPassSyncs(t, c.first, c.syncs) })
	}
}

func checkPassSyncs(t *testing.T, first int, want int64) {
	const mib = 1 << 20
	tr, err := trace.Read(strings.NewReader(strings.Join([]string{
		fmt.Sprintf("a 1 41943040 %d", first), // chunks 0-1 of the large pool's 20 MiB
		"a 2 20971520 0",                      // the high-water mark is 60 MiB
		fmt.Sprintf("f 1 %d", first),          // chunks 0-1 free and mapped
		"a 3 62914560 0",                      // three chunks more: moves 0-1, creates one
		"f 2 0",
		"f 3 0",
	}, "\n") + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, passes := range []int{1, 3} {
		g, err := sim.New(sim.Config{NoStacks: true})
		if err != nil {
			t.Fatal(err)
		}
		a, err := caching.New(g, caching.Options{ExpandableSegments: true, ReleaseBeforeGrow: true})
		if err != nil {
			t.Fatal(err)
		}
		res, err := replay.Run(g, tr, a, replay.Options{Passes: passes})
		g.Close()
		if err != nil {
			t.Fatal(err)
		}
		if res.PeakReserved != 80*mib {
			t.Errorf("%d passes: peak reserved %d MiB, want 80 (chunks moved, not added)", passes, res.PeakReserved/mib)
		}
		if passes == 1 {
			if res.DeviceSyncs != want {
				t.Errorf("one pass: %d device syncs, want %d", res.DeviceSyncs, want)
			}
			continue
		}
		var syncs int64
		for _, p := range res.Passes {
			syncs += p.DeviceSyncs
		}
		if res.Passes[0].DeviceSyncs != want || syncs != res.DeviceSyncs {
			t.Errorf("passes made %+v device syncs, the replay %d; want %d in the first", res.Passes, res.DeviceSyncs, want)
		}
	}
}
