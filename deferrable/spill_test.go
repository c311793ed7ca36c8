package deferrable_test

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/deferrable"
)

// Spilling: on out-of-memory, under the soft device limit, in the order of
// the policy (the built-in one or the user's), and with copies that fail.
func TestSpillOnOutOfMemory(t *testing.T) {
	g := newSim(t, 16*mib, false)
	res := deferrable.NewDeviceResource(g)
	defer res.Close()
	m := newManager(t, g, deferrable.Options{Resource: res, StagingBytes: 512 << 10})
	s := newStream(t, g)
	var bufs []*deferrable.Buffer
	for i := 0; i < 6; i++ {
		b, err := m.Alloc(2*mib, s)
		if err != nil {
			t.Fatal(err)
		}
		write(t, g, b, s, pattern(uint64(i), 2*mib))
		bufs = append(bufs, b)
	}
	// Another user of the same resource needs more than is free.
	if _, err := res.Allocate(10*mib, s); !errors.Is(err, gpumem.ErrOutOfMemory) {
		t.Fatalf("without the handler: %v, want out of memory", err)
	}
	res.SetOOMHandler(m.OOMHandler())
	p, err := res.Allocate(10*mib, s)
	if err != nil {
		t.Fatalf("with the handler: %v", err)
	}
	st := m.Stats()
	if st.OOMHandlerCalls == 0 || st.OOMSpilledBytes == 0 || st.Host.Buffers == 0 {
		t.Fatalf("the handler did not spill: %+v", st)
	}
	// The manager's own allocations spill too: ten more buffers in a full device.
	for i := 6; i < 16; i++ {
		b, err := m.Alloc(2*mib, s)
		if err != nil {
			t.Fatalf("alloc %d: %v", i, err)
		}
		write(t, g, b, s, pattern(uint64(i), 2*mib))
		bufs = append(bufs, b)
	}
	if err := res.Deallocate(p, s); err != nil {
		t.Fatal(err)
	}
	for i, b := range bufs {
		if !bytes.Equal(read(t, g, b, s), pattern(uint64(i), 2*mib)) {
			t.Fatalf("buffer %d changed", i)
		}
	}
	if m.Stats().AllocRetries == 0 && m.Stats().OOMHandlerCalls < 2 {
		t.Error("no allocation was retried after spilling")
	}
	// Everything locked: the allocation fails cleanly.
	var held []*deferrable.Buffer
	for _, b := range bufs {
		if b.Where() == deferrable.TierDevice {
			b.Acquire(s)
			held = append(held, b)
		}
	}
	if _, err := m.Alloc(16*mib, s); !errors.Is(err, gpumem.ErrOutOfMemory) {
		t.Fatalf("alloc with everything locked: %v", err)
	}
	for _, b := range held {
		b.Release()
	}
	closeChecked(t, m, g)
}

func TestSoftDeviceLimit(t *testing.T) {
	g := newSim(t, 1<<30, false)
	m := newManager(t, g, deferrable.Options{DeviceLimit: 16 * mib})
	defer func() { m.Close(); checkLeaks(t, g) }()
	s := newStream(t, g)
	var bufs []*deferrable.Buffer
	for i := 0; i < 10; i++ {
		b, err := m.Alloc(4*mib, s)
		if err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, b)
		if st := m.Stats(); st.Device.Bytes > 16*mib {
			t.Fatalf("after %d allocations %d device bytes, over the limit", i+1, st.Device.Bytes)
		}
	}
	for _, b := range bufs[:6] {
		if _, err := b.Acquire(s); err != nil {
			t.Fatal(err)
		}
		b.Release()
		if st := m.Stats(); st.Device.Bytes > 16*mib {
			t.Fatalf("%d device bytes after an unspill, over the limit", st.Device.Bytes)
		}
	}
	if st := m.Stats(); st.Device.PeakBytes > 16*mib || st.Host.Buffers != 6 {
		t.Fatalf("stats: %+v", st)
	}
}

func TestPriorityThenLeastRecentlyReleased(t *testing.T) {
	g := newSim(t, 1<<30, false)
	var mu sync.Mutex
	var order []uint64
	var registered, freed int
	m := newManager(t, g, deferrable.Options{Callbacks: deferrable.Callbacks{
		Register: func(deferrable.Info) { mu.Lock(); registered++; mu.Unlock() },
		Free:     func(deferrable.Info) { mu.Lock(); freed++; mu.Unlock() },
		Spill: func(info deferrable.Info, from deferrable.Tier) {
			mu.Lock()
			defer mu.Unlock()
			if from == deferrable.TierDevice && info.Tier == deferrable.TierHost {
				order = append(order, info.ID)
			}
		},
	}})
	s := newStream(t, g)
	bufs := make([]*deferrable.Buffer, 6)
	for i := range bufs {
		bufs[i], _ = m.Alloc(mib, s)
	}
	// Release in the order 3 1 5 0 4 2; give 4 and 1 a higher priority and 2 a lower one.
	for _, i := range []int{3, 1, 5, 0, 4, 2} {
		bufs[i].Acquire(s)
		bufs[i].Release()
	}
	bufs[4].SetPriority(1)
	bufs[1].SetPriority(1)
	bufs[2].SetPriority(-1)
	want := []int{2, 3, 5, 0, 1, 4}
	// One buffer at a time: each Spill takes exactly the next victim.
	for k := range want {
		if freed, err := m.Spill(1); freed != mib || err != nil {
			t.Fatalf("spill %d: %d %v", k, freed, err)
		}
	}
	mu.Lock()
	for k, i := range want {
		if k >= len(order) || order[k] != bufs[i].ID() {
			t.Fatalf("spill order %v, want buffers %v (ids from 1)", order, want)
		}
	}
	mu.Unlock()
	// Acquiring brings one back and makes it the most recent.
	bufs[3].Acquire(s)
	bufs[3].Release()
	closeChecked(t, m, g)
	if registered != 6 || freed != 6 {
		t.Errorf("callbacks: %d registered, %d freed, want 6 each", registered, freed)
	}
}

func TestCustomPolicy(t *testing.T) {
	g := newSim(t, 1<<30, false)
	m := newManager(t, g, deferrable.Options{Policy: largestFirst{}})
	defer func() { m.Close(); checkLeaks(t, g) }()
	s := newStream(t, g)
	small, _ := m.Alloc(mib, s)
	large, _ := m.Alloc(3*mib, s)
	if freed, _ := m.Spill(1); freed != 3*mib {
		t.Fatalf("spilled %d, want the large buffer", freed)
	}
	where(t, large, deferrable.TierHost)
	where(t, small, deferrable.TierDevice)
}

type largestFirst struct{}

func (largestFirst) Victims(c []deferrable.Candidate, need uint64) []deferrable.Candidate {
	best := 0
	for i := range c {
		if c[i].Size > c[best].Size {
			best = i
		}
	}
	return c[best : best+1]
}

func TestInjectedCopyFailuresLoseNoData(t *testing.T) {
	g := newSim(t, 1<<30, false)
	dir := t.TempDir()
	m := newManager(t, g, deferrable.Options{DiskDir: dir, StagingBytes: mib})
	s := newStream(t, g)
	b, _ := m.Alloc(4*mib+5, s)
	want := pattern(3, b.Size())
	write(t, g, b, s, want)
	check := func(tier deferrable.Tier) {
		t.Helper()
		where(t, b, tier)
		if tier == deferrable.TierDevice {
			if !bytes.Equal(read(t, g, b, s), want) {
				t.Fatal("data lost")
			}
		}
	}
	// The host tier cannot pin memory: the buffer stays on the device, whole.
	g.InjectFault("MallocHost", 1, nil)
	if err := b.MoveTo(deferrable.TierHost); err == nil {
		t.Fatal("move succeeded without pinned memory")
	}
	check(deferrable.TierDevice)
	// Device to host fails at the DMA, or while waiting for it: the buffer
	// stays on the device, whole.
	g.InjectFault("MemcpyAsync", 1, nil)
	if err := b.MoveTo(deferrable.TierHost); err == nil {
		t.Fatal("move succeeded through a failing copy")
	}
	check(deferrable.TierDevice)
	g.InjectFault("EventSynchronize", 1, nil)
	if err := b.MoveTo(deferrable.TierHost); err == nil {
		t.Fatal("move succeeded through a failing wait")
	}
	check(deferrable.TierDevice)
	g.InjectFault("MemcpyAsync", 1, nil)
	if freed, err := m.Spill(1 << 40); freed != 0 || err == nil {
		t.Fatalf("Spill through a failing copy: %d %v", freed, err)
	}
	check(deferrable.TierDevice)
	g.InjectFault("MemcpyAsync", 2, nil)
	if err := b.MoveTo(deferrable.TierDisk); err == nil {
		t.Fatal("move to disk succeeded through a failing copy")
	}
	check(deferrable.TierDevice)
	// Host to device fails: the buffer stays on the host, whole.
	if err := b.MoveTo(deferrable.TierHost); err != nil {
		t.Fatal(err)
	}
	g.InjectFault("MemcpyAsync", 1, nil)
	if _, err := b.Acquire(s); err == nil {
		t.Fatal("acquire succeeded through a failing copy")
	}
	check(deferrable.TierHost)
	if err := b.MoveTo(deferrable.TierDisk); err != nil {
		t.Fatal(err)
	}
	g.InjectFault("MemcpyAsync", 1, nil)
	if _, err := b.Acquire(s); err == nil {
		t.Fatal("acquire from disk succeeded through a failing copy")
	}
	check(deferrable.TierDisk)
	// Device allocation fails.
	g.InjectFault("Malloc", 1, nil)
	if _, err := b.Acquire(s); err == nil {
		t.Fatal("acquire succeeded through a failing allocation")
	}
	check(deferrable.TierDisk)
	if !bytes.Equal(read(t, g, b, s), want) {
		t.Fatal("data lost")
	}
	check(deferrable.TierDevice)
	st := m.Stats()
	if st.Spilled().Failures < 3 || st.Unspilled().Failures < 3 {
		t.Errorf("failures not counted: %+v", st)
	}
	closeChecked(t, m, g)
}

// TestWorkingSetThreeTimesTheDevice runs a workload whose buffers add up to
// three times the device's memory: every round each goroutine adds its round
// number to every byte of its buffers through Acquire/Release.
