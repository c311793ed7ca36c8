package gpumem

import (
	"errors"
	"strings"
	"testing"
)

// stubAlloc is the least allocator: it records the conf it was built with.
type stubAlloc struct {
	Allocator
	conf string
}

func TestAllocatorRegistry(t *testing.T) {
	allocMu.Lock()
	saved := allocReg
	allocReg = map[string]AllocatorInfo{}
	allocMu.Unlock()
	t.Cleanup(func() { allocMu.Lock(); allocReg = saved; allocMu.Unlock() })

	mk := func(name string) AllocatorInfo {
		return AllocatorInfo{Name: name, New: func(b Backend, conf string) (Allocator, error) {
			return &stubAlloc{conf: conf}, nil
		}}
	}
	RegisterAllocator(mk("caching"))
	RegisterAllocator(mk("asyncpool"))
	var b Backend = struct{ Backend }{}

	a, err := NewAllocator(b, "")
	if err != nil || a.(*stubAlloc).conf != "" {
		t.Fatalf("default: %v %+v", err, a)
	}
	a, err = NewAllocator(b, "backend:asyncpool,throttle_ratio:0.5")
	if err != nil || a.(*stubAlloc).conf != "backend:asyncpool,throttle_ratio:0.5" {
		t.Fatalf("by key: %v %+v", err, a)
	}
	a, err = NewNamedAllocator(b, "asyncpool", "throttle_ratio:0.5")
	if err != nil || a.(*stubAlloc).conf != "backend:asyncpool,throttle_ratio:0.5" {
		t.Fatalf("by name: %v %+v", err, a)
	}
	if _, err = NewNamedAllocator(b, "asyncpool", "backend:caching"); !errors.Is(err, ErrInvalidValue) {
		t.Fatalf("conflicting backend key: %v", err)
	}
	_, err = NewAllocator(b, "backend:managed")
	var ce *ConfError
	if !errors.As(err, &ce) || ce.Key != "backend" || !strings.Contains(err.Error(), "asyncpool, caching") {
		t.Fatalf("unknown allocator: %v", err)
	}
	// A character that would not show is quoted, so that the message says
	// why "caching" is not caching.
	if _, err = NewAllocator(b, "backend:caching\u200b"); !errors.Is(err, ErrInvalidValue) || !strings.Contains(err.Error(), `backend:"caching\u200b"`) {
		t.Fatalf("an invisible character in the name: %v", err)
	}
	if _, err = NewAllocator(b, "backend:caching,,"); !errors.Is(err, ErrInvalidValue) {
		t.Fatalf("bad syntax: %v", err)
	}
	if _, err = NewAllocator(nil, ""); !errors.Is(err, ErrInvalidValue) {
		t.Fatalf("nil backend: %v", err)
	}
	t.Setenv(AllocConfEnv, "backend:asyncpool")
	if a, err = NewAllocatorFromEnv(b); err != nil || a.(*stubAlloc).conf != "backend:asyncpool" {
		t.Fatalf("from env: %v %+v", err, a)
	}
	if names := allocatorNames(); strings.Join(names, ",") != "asyncpool,caching" {
		t.Fatalf("names %v", names)
	}
}

func TestSplitAllocConf(t *testing.T) {
	got, err := SplitAllocConf(" a : 1 , b:[x:1,y:2] ")
	if err != nil || len(got) != 2 || got[0] != (ConfEntry{"a", "1"}) || got[1] != (ConfEntry{"b", "[x:1,y:2]"}) {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{"a", ":1", "a:1,a:2", "a:[[1]]", "a:1]", "a:[1", "a:1,,b:2"} {
		var ce *ConfError
		if _, err := SplitAllocConf(bad); !errors.As(err, &ce) || !errors.Is(err, ErrInvalidValue) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

type wrap struct {
	Allocator
	up Allocator
}

func (w wrap) Upstream() Allocator { return w.up }

type keeper struct{ stubAlloc }

func (keeper) History() []HistoryEntry { return []HistoryEntry{{Size: 7}} }
func (keeper) Snapshot() Snapshot      { return Snapshot{Segments: []SegmentInfo{{TotalSize: 9}}} }
func (keeper) Setup(dev int) error     { return errors.New("set up") }

// Optional abilities are found through a chain of adaptors.
func TestOptionalThroughAdaptors(t *testing.T) {
	base := &keeper{}
	var a Allocator = wrap{up: wrap{up: base}}
	if h, ok := HistoryOf(a); !ok || h[0].Size != 7 {
		t.Errorf("history %v %v", h, ok)
	}
	if s, ok := SnapshotOf(a); !ok || s.Segments[0].TotalSize != 9 {
		t.Errorf("snapshot %v %v", s, ok)
	}
	if err := SetupOf(a, 0); err == nil {
		t.Error("setup did not reach the allocator")
	}
	plain := wrap{up: &stubAlloc{}}
	if _, ok := HistoryOf(plain); ok {
		t.Error("history found where none is kept")
	}
	if _, ok := SnapshotOf(plain); ok {
		t.Error("snapshot found where none is taken")
	}
	if err := SetupOf(plain, 0); err != nil {
		t.Errorf("setup with none: %v", err)
	}
}

func TestMemoryStatsArithmetic(t *testing.T) {
	var x, y MemoryStats
	x.ReservedBytes.Add(StatLarge, 100)
	x.ReservedBytes.Add(StatLarge, -40)
	y.ReservedBytes.Add(StatSmall, 10)
	y.NumOOMs = 2
	y.LargestFreeBlock, y.Fragmentation = 5, 0.5
	x.Add(y)
	r := x.ReservedBytes[StatAll]
	if r.Current != 70 || r.Peak != 110 || r.Allocated != 110 || r.Freed != 40 || x.NumOOMs != 2 ||
		x.LargestFreeBlock != 5 || x.Fragmentation != 0.5 {
		t.Fatalf("sum %+v", x)
	}
	x.ResetPeaks()
	if x.ReservedBytes[StatAll].Peak != 70 || x.ReservedBytes[StatLarge].Peak != 60 || x.ReservedBytes[StatSmall].Peak != 10 {
		t.Fatalf("after reset %+v", x.ReservedBytes)
	}
}

// The sleep figures add like the other counters.
func TestMemoryStatsAddSleep(t *testing.T) {
	x := MemoryStats{AsleepBytes: 1, AsleepSavedBytes: 2, AsleepDiscardedBytes: 3, NumSleeps: 4, NumWakes: 5}
	x.Add(x)
	if x.AsleepBytes != 2 || x.AsleepSavedBytes != 4 || x.AsleepDiscardedBytes != 6 || x.NumSleeps != 8 || x.NumWakes != 10 {
		t.Fatalf("sum %+v", x)
	}
}
