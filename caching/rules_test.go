package caching

import (
	"errors"
	"math"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/fakegpu"
	"github.com/gpumem/gpumem/internal/oomhooks"
)

func TestRoundSize(t *testing.T) {
	single := func(n int) []Division { return []Division{{UpToMB: 0, Divisions: n}} }
	interval := []Division{{UpToMB: 256, Divisions: 1}, {UpToMB: 512, Divisions: 2}, {UpToMB: 1024, Divisions: 4}, {UpToMB: 0, Divisions: 8}}
	cases := []struct {
		divs       []Division
		size, want uint64
	}{
		{nil, 1, 512},
		{nil, 512, 512},
		{nil, 513, 1024},
		{nil, 1200, 1536},
		{nil, 3<<20 + 1, 3<<20 + 512},
		{single(4), 1200, 1536},   // size <= 512*divisions: 512-byte rounding, as PyTorch
		{single(4), 12000, 12288}, // 8..16 KiB in 4 steps: 8192, 10240, 12288, 14336
		{single(4), 8193, 10240},
		{single(4), 2048, 2048},                // powers of two stay
		{single(4), 14336, 14336},              // already on a step
		{single(4), 14337, 16384},              // past the last step: the next power of two
		{single(1), 1200, 1536},                // one division: 512-byte rounding, as PyTorch
		{single(2), 1000, 1024},                // size <= 512*divisions: plain rounding
		{single(2), 5 << 20, 6 << 20},          // steps of 2 MiB between 4 and 8 MiB
		{interval, 300 << 20, 300 << 20},       // 256 MiB interval: 1 division, 512-byte rounding
		{interval, 300<<20 + 1, 300<<20 + 512}, //
		{interval, 600 << 20, 768 << 20},       // 512 MiB interval: 2 divisions
		{interval, 1100 << 20, 1152 << 20},     // 1024 MiB interval: ">" overrides its 4 with 8, as in PyTorch
		{interval, 2100 << 20, 2304 << 20},     // ">": 8 divisions of 2 GiB
		{interval, 10 << 20, 10 << 20},         // below the first key: its value (1)
		{[]Division{{UpToMB: 2, Divisions: 4}}, 3<<20 + 1, 3584 << 10}, // the 2 MiB interval: steps of 512 KiB
	}
	for _, c := range cases {
		tab, err := divisionTable(c.divs)
		if err != nil {
			t.Fatal(err)
		}
		if got := roundSize(&tab, c.size); got != c.want {
			t.Errorf("roundSize(%v, %d) = %d, want %d", c.divs, c.size, got, c.want)
		}
	}
	for _, bad := range [][]Division{{{UpToMB: 0, Divisions: 3}}, {{UpToMB: 300, Divisions: 2}}, {{UpToMB: 512, Divisions: 2}, {UpToMB: 256, Divisions: 2}}, {{UpToMB: 0, Divisions: 8}, {UpToMB: 2048, Divisions: 2}}} {
		if _, err := divisionTable(bad); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("divisionTable(%v) = %v, want ErrInvalidValue", bad, err)
		}
	}
}

func TestSegmentSize(t *testing.T) {
	for _, c := range []struct{ size, want uint64 }{
		{512, 2 << 20}, {1 << 20, 2 << 20}, {1<<20 + 512, 20 << 20}, {10<<20 - 512, 20 << 20},
		{10 << 20, 10 << 20}, {11 << 20, 12 << 20}, {21<<20 + 512, 22 << 20},
	} {
		if got := segmentSize(c.size); got != c.want {
			t.Errorf("segmentSize(%d) = %d, want %d", c.size, got, c.want)
		}
	}
}

// op is one step of a rule test.
type op struct {
	alloc  uint64 // allocate this many bytes into slot name
	free   bool   // free slot name
	record int    // record the use of slot name on stream record (1-based)
	name   string
	stream int // stream index (0..3)
}

// ruleCase: options, operations, then the state after them.
type ruleCase struct {
	name     string
	opts     Options
	ops      []op
	segments map[string]int64 // "small"/"large": segment count
	reserved int64
	// sameAs: slots that must share an address (reuse), or differ.
	same, differ [][2]string
	allocated    int64
}

func runRule(t *testing.T, c ruleCase, backend gpumem.Backend, streams [4]gpumem.Stream) {
	a, err := New(backend, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ptrs := map[string]gpumem.Ptr{}
	seen := map[string]gpumem.Ptr{}
	for _, o := range c.ops {
		s := streams[o.stream]
		switch {
		case o.alloc > 0:
			p, err := a.Allocate(o.alloc, s)
			if err != nil {
				t.Fatalf("allocate %s: %v", o.name, err)
			}
			ptrs[o.name], seen[o.name] = p, p
		case o.record > 0:
			if err := a.RecordStream(ptrs[o.name], streams[o.record-1]); err != nil {
				t.Fatal(err)
			}
		case o.free:
			if err := a.Deallocate(ptrs[o.name], s); err != nil {
				t.Fatalf("free %s: %v", o.name, err)
			}
		}
		checkInvariants(t, a)
	}
	st := a.Stats(0)
	if c.segments != nil {
		if got := st.Segment[gpumem.StatSmall].Current; got != c.segments["small"] {
			t.Errorf("small segments = %d, want %d", got, c.segments["small"])
		}
		if got := st.Segment[gpumem.StatLarge].Current; got != c.segments["large"] {
			t.Errorf("large segments = %d, want %d", got, c.segments["large"])
		}
	}
	if c.reserved != 0 && st.ReservedBytes[0].Current != c.reserved {
		t.Errorf("reserved = %d, want %d", st.ReservedBytes[0].Current, c.reserved)
	}
	if c.allocated != 0 && st.AllocatedBytes[0].Current != c.allocated {
		t.Errorf("allocated = %d, want %d", st.AllocatedBytes[0].Current, c.allocated)
	}
	for _, p := range c.same {
		if seen[p[0]] != seen[p[1]] {
			t.Errorf("%s at %#x and %s at %#x: want the same address", p[0], seen[p[0]], p[1], seen[p[1]])
		}
	}
	for _, p := range c.differ {
		if seen[p[0]] == seen[p[1]] {
			t.Errorf("%s and %s share %#x: want different memory", p[0], p[1], seen[p[0]])
		}
	}
}

func alloc(name string, size uint64, stream int) op {
	return op{alloc: size, name: name, stream: stream}
}
func free(name string, stream int) op { return op{free: true, name: name, stream: stream} }

var ruleCases = []ruleCase{
	{name: "small request takes a 2 MiB small segment",
		ops: []op{alloc("a", 1000, 0)}, segments: map[string]int64{"small": 1}, reserved: 2 << 20, allocated: 1024},
	{name: "1 MiB is still small",
		ops: []op{alloc("a", 1<<20, 0)}, segments: map[string]int64{"small": 1}, reserved: 2 << 20},
	{name: "medium request takes a 20 MiB large segment",
		ops: []op{alloc("a", 1<<20+1, 0)}, segments: map[string]int64{"large": 1}, reserved: 20 << 20},
	{name: "large request takes its size rounded to 2 MiB",
		ops: []op{alloc("a", 11<<20, 0)}, segments: map[string]int64{"large": 1}, reserved: 12 << 20},
	{name: "small blocks split a small segment",
		ops:      []op{alloc("a", 1000, 0), alloc("b", 1000, 0)},
		segments: map[string]int64{"small": 1}, reserved: 2 << 20, differ: [][2]string{{"a", "b"}}},
	{name: "large split only above 1 MiB remainder: 19 MiB leaves 1 MiB unsplit",
		ops:      []op{alloc("a", 19<<20, 0), alloc("b", 512, 0)},
		segments: map[string]int64{"large": 1, "small": 1}, allocated: 20<<20 + 512},
	{name: "large split with more than 1 MiB remainder",
		ops:      []op{alloc("a", 5<<20, 0), alloc("b", 5<<20, 0)},
		segments: map[string]int64{"large": 1}, reserved: 20 << 20, allocated: 10 << 20},
	{name: "free merges with neighbours: the whole segment is reused",
		ops:      []op{alloc("a", 5<<20, 0), alloc("b", 5<<20, 0), free("a", 0), free("b", 0), alloc("c", 18<<20, 0)},
		segments: map[string]int64{"large": 1}, reserved: 20 << 20, same: [][2]string{{"a", "c"}}},
	{name: "best fit takes the smallest block that fits",
		ops: []op{alloc("a", 12<<20, 0), alloc("b", 16<<20, 0), free("a", 0), free("b", 0),
			alloc("c", 11<<20, 0)},
		same: [][2]string{{"a", "c"}}},
	{name: "streams own their blocks (PyTorch mode)",
		ops:      []op{alloc("a", 1000, 0), free("a", 0), alloc("b", 1000, 1)},
		segments: map[string]int64{"small": 2}, differ: [][2]string{{"a", "b"}}},
	{name: "cross-stream reuse takes another stream's free block",
		opts:     Options{CrossStreamReuse: true},
		ops:      []op{alloc("a", 5<<20, 0), free("a", 0), alloc("b", 5<<20, 1)},
		segments: map[string]int64{"large": 1}, same: [][2]string{{"a", "b"}}},
	{name: "max_split_size: oversize blocks are not split",
		opts:     Options{MaxSplitSize: 40 << 20},
		ops:      []op{alloc("a", 60<<20, 0), free("a", 0), alloc("b", 41<<20, 0)},
		segments: map[string]int64{"large": 1}, same: [][2]string{{"a", "b"}}, allocated: 60 << 20},
	{name: "max_split_size: oversize block reused only under request + 20 MiB",
		opts:     Options{MaxSplitSize: 40 << 20},
		ops:      []op{alloc("a", 80<<20, 0), free("a", 0), alloc("b", 50<<20, 0)},
		segments: map[string]int64{"large": 2}, differ: [][2]string{{"a", "b"}}},
	{name: "max_split_size: no oversize block for a small request",
		opts:     Options{MaxSplitSize: 40 << 20},
		ops:      []op{alloc("a", 60<<20, 0), free("a", 0), alloc("b", 5<<20, 0)},
		segments: map[string]int64{"large": 2}, differ: [][2]string{{"a", "b"}}},
	{name: "roundup_power2_divisions rounds before choosing the pool",
		opts:      Options{RoundupPower2Divisions: []Division{{UpToMB: 0, Divisions: 4}}},
		ops:       []op{alloc("a", 12000, 0)},
		allocated: 12288},
}

func TestRulesFake(t *testing.T) {
	for _, c := range ruleCases {
		t.Run(c.name, func(t *testing.T) { runRule(t, c, fakegpu.New(1<<34), fakeStreams()) })
	}
}

func TestOutOfMemoryRetry(t *testing.T) {
	f := fakegpu.New(64 << 20)
	a, err := New(f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s := gpumem.Stream{Handle: 1}
	var ps []gpumem.Ptr
	for i := 0; i < 3; i++ { // three 20 MiB segments, 60 of 64 MiB
		p, err := a.Allocate(2<<20, s)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
		q, _ := a.Allocate(17<<20, s)
		ps = append(ps, q)
	}
	for _, p := range ps {
		_ = a.Deallocate(p, s)
	}
	// 40 MiB fits only once the cached segments are returned.
	p, err := a.Allocate(40<<20, s)
	if err != nil {
		t.Fatalf("allocate after retry: %v", err)
	}
	st := a.Stats(0)
	if st.NumAllocRetries != 1 || st.NumDeviceFree == 0 {
		t.Errorf("retries %d, device frees %d: want 1 retry that freed segments", st.NumAllocRetries, st.NumDeviceFree)
	}
	var observed *gpumem.OutOfMemoryError
	a.AddOOMObserver(func(e *gpumem.OutOfMemoryError) { observed = e })
	handlerCalls := 0
	a.SetOOMHandler(func(dev int, req uint64, attempt int) bool {
		handlerCalls++
		if attempt == 0 {
			_ = a.Deallocate(p, s) // frees 40 MiB: the retry succeeds
			return true
		}
		return false
	})
	q, err := a.Allocate(50<<20, s)
	if err != nil || handlerCalls != 1 {
		t.Fatalf("allocation after the handler freed memory: %v (handler called %d times)", err, handlerCalls)
	}
	_, err = a.Allocate(60<<20, s)
	var oom *gpumem.OutOfMemoryError
	if !errors.Is(err, gpumem.ErrOutOfMemory) || !errors.As(err, &oom) {
		t.Fatalf("want an *OutOfMemoryError, got %v", err)
	}
	if observed != oom || oom.Requested != 60<<20 || oom.Capacity != 64<<20 || oom.Allocated != 50<<20 || oom.Hint == "" {
		t.Errorf("OOM error %+v (observed %v)", oom, observed)
	}
	if a.Stats(0).NumOOMs != 1 {
		t.Errorf("num_ooms = %d", a.Stats(0).NumOOMs)
	}
	_ = a.Deallocate(q, s)
	checkInvariants(t, a)
}

func TestMemoryFraction(t *testing.T) {
	a, err := New(fakegpu.New(100<<20), Options{PerProcessMemoryFraction: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s := gpumem.Stream{Handle: 1}
	if _, err := a.Allocate(40<<20, s); err != nil {
		t.Fatal(err)
	}
	_, err = a.Allocate(12<<20, s)
	var oom *gpumem.OutOfMemoryError
	if !errors.As(err, &oom) || oom.Limit != 50<<20 {
		t.Fatalf("want an OOM at the 50 MiB cap, got %v", err)
	}
	if r := a.Stats(0).ReservedBytes[0].Peak; r > 50<<20 {
		t.Errorf("reserved peak %d above the cap", r)
	}
}

func TestGarbageCollection(t *testing.T) {
	a, err := New(fakegpu.New(100<<20), Options{GarbageCollectionThreshold: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s := gpumem.Stream{Handle: 1}
	// Cached segments of 12, 14 and 30 MiB (plus 2 MiB small) put reserved
	// over the 50 MiB threshold; a 40 MiB request that none fits collects
	// the old ones before asking the device.
	small, _ := a.Allocate(1000, s)
	_ = a.Deallocate(small, s)
	var ps []gpumem.Ptr
	for _, sz := range []uint64{12 << 20, 14 << 20, 30 << 20} {
		p, err := a.Allocate(sz, s)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	for _, p := range ps {
		_ = a.Deallocate(p, s)
	}
	for i := 0; i < 5; i++ { // age them: searches that do not use them
		p, _ := a.Allocate(1000, s)
		_ = a.Deallocate(p, s)
	}
	before := a.Stats(0).NumDeviceFree
	if _, err := a.Allocate(40<<20, s); err != nil {
		t.Fatal(err)
	}
	st := a.Stats(0)
	if st.NumDeviceFree-before < 1 || st.ReservedBytes[0].Current > 50<<20 || st.NumAllocRetries != 0 {
		t.Errorf("gc freed %d segments, reserved %d", st.NumDeviceFree-before, st.ReservedBytes[0].Current)
	}
	checkInvariants(t, a)
}

func TestBadInput(t *testing.T) {
	a, err := New(fakegpu.New(1<<30), DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	s := gpumem.Stream{Handle: 1}
	check := func(what string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Errorf("%s: got %v, want %v", what, err, want)
		}
	}
	_, err = a.Allocate(0, s)
	check("zero size", err, gpumem.ErrInvalidValue)
	_, err = a.Allocate(math.MaxUint64, s)
	check("2^64-1 bytes", err, gpumem.ErrInvalidValue)
	_, err = a.Allocate(1<<62+1, s)
	check("above 2^62", err, gpumem.ErrInvalidValue)
	_, err = a.Allocate(2<<30, s)
	check("above capacity", err, gpumem.ErrOutOfMemory)
	_, err = a.Allocate(1, gpumem.Stream{Device: 7})
	check("unknown device", err, gpumem.ErrInvalidValue)
	p, err := a.Allocate(100, s)
	if err != nil {
		t.Fatal(err)
	}
	check("foreign pointer", a.Deallocate(p+512, s), gpumem.ErrInvalidValue)
	check("record foreign", a.RecordStream(12345, s), gpumem.ErrInvalidValue)
	if n, err := a.Size(p); err != nil || n != 100 {
		t.Errorf("Size = %d, %v", n, err)
	}
	check("first free", a.Deallocate(p, s), nil)
	check("double free", a.Deallocate(p, s), gpumem.ErrInvalidValue)
	_, err = a.Size(p)
	check("size of freed", err, gpumem.ErrInvalidValue)
	check("release unknown pool", a.ReleasePool(99), gpumem.ErrInvalidValue)
	check("end capture never begun", a.EndCapture(s), gpumem.ErrInvalidValue)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = a.Allocate(100, s)
	check("allocate after close", err, gpumem.ErrClosed)
	check("free after close", a.Deallocate(p, s), gpumem.ErrClosed)
	check("record after close", a.RecordStream(p, s), gpumem.ErrClosed)
	check("empty cache after close", a.EmptyCache(), gpumem.ErrClosed)
	_, err = a.BeginCapture(s, 0)
	check("capture after close", err, gpumem.ErrClosed)
	check("second close", a.Close(), nil)
	for _, o := range []Options{{MaxSplitSize: 1 << 20}, {GarbageCollectionThreshold: 1.5}, {PerProcessMemoryFraction: -1},
		{HistorySize: -1}, {HistorySize: 1 << 40}, {RoundupPower2Divisions: []Division{{UpToMB: 0, Divisions: 3}}},
		{RoundupPower2Divisions: []Division{{UpToMB: 0, Divisions: 1 << 55}}},
		{ExpandableSegments: true, ExpandableLargeChunk: 1<<64 - 512}, {ExpandableSegments: true, ExpandableSmallChunk: 1<<64 - 512}} {
		if _, err := New(fakegpu.New(1<<30), o); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("New(%+v) = %v, want ErrInvalidValue", o, err)
		}
	}
	if _, err := New(nil, Options{}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("New(nil) = %v", err)
	}
}

// A cache-hit allocation+free pair makes no heap allocation, and no backend
// call but the one question each asks about its stream (StreamCaptureInfo:
// is it live, is the backend open), which moves no memory and waits for
// nothing.
func TestCacheHitIsFree(t *testing.T) {
	f := fakegpu.New(1 << 30)
	a, err := New(f, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s := gpumem.Stream{Handle: 1}
	for _, size := range []uint64{4096, 3 << 20} {
		p, _ := a.Allocate(size, s)
		_ = a.Deallocate(p, s)
		before, total := len(f.Ops()), f.TotalCalls()
		allocs := testing.AllocsPerRun(1000, func() {
			p, err := a.Allocate(size, s)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Deallocate(p, s); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("size %d: %v heap allocations per pair, want 0", size, allocs)
		}
		// The stream is checked in process (gpumem.StreamChecker): a
		// cache hit makes no call to the backend.
		if after := f.TotalCalls(); after != total || len(f.Ops()) != before {
			t.Errorf("size %d: %d backend calls during cache hits, want 0", size, after-total)
		}
	}
}

func TestExpandableFallback(t *testing.T) {
	f := fakegpu.New(1<<30, fakegpu.WithoutVMM())
	var logged []string
	a, err := New(f, Options{ExpandableSegments: true, Logf: func(format string, args ...any) { logged = append(logged, format) }})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	on, why := a.ExpandableActive()
	if on || why == "" || len(logged) != 1 {
		t.Fatalf("ExpandableActive = %v %q, %d messages", on, why, len(logged))
	}
	if _, err := a.Allocate(5<<20, gpumem.Stream{Handle: 1}); err != nil {
		t.Fatal(err)
	}
	if a.Stats(0).Segment[0].Current != 1 {
		t.Error("fallback did not use a regular segment")
	}
}

func TestExpandableMapUnmap(t *testing.T) {
	f := fakegpu.New(1 << 30)
	a, err := New(f, Options{ExpandableSegments: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if on, _ := a.ExpandableActive(); !on {
		t.Fatal("expandable segments not active")
	}
	s := gpumem.Stream{Handle: 1}
	p1, _ := a.Allocate(30<<20, s) // two 20 MiB chunks
	p2, _ := a.Allocate(30<<20, s) // grows in place: p2 follows p1
	if p2 != p1+30<<20 {
		t.Errorf("p2 = %#x, want p1 + 30 MiB = %#x", p2, p1+30<<20)
	}
	if r := a.Stats(0).ReservedBytes[0].Current; r != 60<<20 {
		t.Errorf("reserved %d, want 60 MiB (three chunks)", r)
	}
	checkInvariants(t, a)
	_ = a.Deallocate(p1, s)
	_ = a.EmptyCache() // p1's first chunk is wholly free: unmapped; the second is shared with p2
	if r := a.Stats(0).ReservedBytes[0].Current; r != 40<<20 {
		t.Errorf("after EmptyCache reserved %d, want 40 MiB", r)
	}
	checkInvariants(t, a)
	_ = a.Deallocate(p2, s)
	_ = a.EmptyCache()
	if r := a.Stats(0).ReservedBytes[0].Current; r != 0 || f.Mappings() != 0 || f.Handles() != 0 {
		t.Errorf("after freeing all: reserved %d, %d mapped, %d handles", r, f.Mappings(), f.Handles())
	}
	checkInvariants(t, a)
}

func TestCapturePools(t *testing.T) {
	f := fakegpu.New(1 << 30)
	a, err := New(f, Options{CrossStreamReuse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s := gpumem.Stream{Handle: 1}
	p0, _ := a.Allocate(4096, s)
	_ = a.Deallocate(p0, s)
	id, err := a.BeginCapture(s, 0)
	if err != nil {
		t.Fatal(err)
	}
	p1, _ := a.Allocate(4096, s) // from the private pool, not the cached p0
	if p1 == p0 {
		t.Fatal("capture allocation reused the default pool")
	}
	_ = a.Deallocate(p1, s)
	p2, _ := a.Allocate(4096, s) // private pool memory is reused inside the capture
	if p2 != p1 {
		t.Errorf("private pool not reused: %#x vs %#x", p2, p1)
	}
	if err := a.EndCapture(s); err != nil {
		t.Fatal(err)
	}
	p3, _ := a.Allocate(4096, s)
	if p3 != p0 {
		t.Errorf("after capture: %#x, want the default pool's %#x", p3, p0)
	}
	// A second graph shares the pool.
	if _, err := a.BeginCapture(s, id); err != nil {
		t.Fatal(err)
	}
	_ = a.EndCapture(s)
	segs := a.Stats(0).Segment[0].Current
	_ = a.ReleasePool(id) // one user left
	_ = a.Deallocate(p2, s)
	if a.Stats(0).Segment[0].Current != segs {
		t.Error("pool released while a graph still holds it")
	}
	_ = a.ReleasePool(id)
	if a.Stats(0).Segment[0].Current != segs-1 {
		t.Errorf("segments %d, want %d after releasing the pool", a.Stats(0).Segment[0].Current, segs-1)
	}
	_ = a.Deallocate(p3, s)
	checkInvariants(t, a)
}

// An OOM handler that keeps asking for a retry is asked at most
// oomhooks.MaxAttempts times; the allocation then fails.
func TestOOMRetryIsBounded(t *testing.T) {
	a, err := New(fakegpu.New(64<<20), DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	calls := 0
	a.SetOOMHandler(func(dev int, size uint64, attempt int) bool {
		if attempt != calls {
			t.Errorf("attempt %d at call %d", attempt, calls)
		}
		calls++
		return true
	})
	if _, err := a.Allocate(100<<20, gpumem.Stream{Handle: 1}); !errors.Is(err, gpumem.ErrOutOfMemory) {
		t.Fatalf("Allocate beyond capacity: %v", err)
	}
	if calls != oomhooks.MaxAttempts {
		t.Errorf("handler asked %d times, want %d", calls, oomhooks.MaxAttempts)
	}
	if n := a.Stats(0).NumOOMs; n != 1 {
		t.Errorf("%d OOMs counted, want 1", n)
	}
}

// The registry builds a caching allocator from a configuration string and
// rejects the keys of other allocators.
func TestRegistered(t *testing.T) {
	f := fakegpu.New(1 << 30)
	a, err := gpumem.NewAllocator(f, "max_split_size_mb:64")
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := a.(*Allocator); !ok || c.opts.MaxSplitSize != 64<<20 {
		t.Errorf("built %T", a)
	}
	_ = a.Close()
	if _, err := gpumem.NewNamedAllocator(f, "caching", "throttle_ratio:0.5"); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("an asyncpool key: %v", err)
	}
}
