package collective

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
	"github.com/gpumem/gpumem/caching"
)

// TestStreamOrder: a copy queued before the collective on a rank's stream
// is what the collective reads, and a copy queued after it reads its
// result, in free-running and in Manual mode (where only synchronizing
// drives the streams).
func TestStreamOrder(t *testing.T) {
	for _, manual := range []bool{false, true} {
		t.Run(fmt.Sprintf("manual=%v", manual), func(t *testing.T) {
			const n = 4
			m := newMachine(t, n, manual)
			cs := m.comms(t)
			dt := Float32
			sz := uint64(4)
			stage, buf, after := make([]gpumem.Ptr, n), make([]gpumem.Ptr, n), make([]gpumem.Ptr, n)
			for r := range n {
				stage[r], buf[r], after[r] = m.alloc(t, r, count*sz), m.alloc(t, r, count*sz), m.alloc(t, r, count*sz)
				m.put(t, stage[r], inputs(dt, r, count))
			}
			for r, c := range cs {
				s := m.streams[r]
				if err := m.g.MemsetAsync(buf[r], 0xff, count*sz, s); err != nil { // NaNs, overwritten next
					t.Fatal(err)
				}
				if err := m.g.MemcpyAsync(buf[r], stage[r], count*sz, s); err != nil {
					t.Fatal(err)
				}
				if err := c.AllReduce(buf[r], buf[r], count, dt, Sum, s); err != nil {
					t.Fatal(err)
				}
				if err := m.g.MemcpyAsync(after[r], buf[r], count*sz, s); err != nil {
					t.Fatal(err)
				}
				if err := m.g.MemsetAsync(buf[r], 0, count*sz, s); err != nil {
					t.Fatal(err)
				}
			}
			// Synchronize the last rank first: in Manual mode that drives
			// every other rank's stream up to the collective.
			for r := n - 1; r >= 0; r-- {
				if err := m.g.StreamSynchronize(m.streams[r]); err != nil {
					t.Fatal(err)
				}
			}
			for r := range n {
				checkElems(t, fmt.Sprintf("rank %d after", r), dt, m.get(t, after[r], count*sz), func(i int) float64 { return expect(dt, Sum, n, i) })
				checkElems(t, fmt.Sprintf("rank %d buffer", r), dt, m.get(t, buf[r], count*sz), func(int) float64 { return 0 })
			}
		})
	}
}

// TestLegacyStream: collectives on the devices' default streams.
func TestLegacyStream(t *testing.T) {
	const n = 2
	m := newMachine(t, n, false)
	cs := m.comms(t)
	buf := make([]gpumem.Ptr, n)
	for r := range n {
		buf[r] = m.alloc(t, r, count*8)
		m.put(t, buf[r], inputs(Int64, r, count))
	}
	for r, c := range cs {
		if err := c.AllReduce(buf[r], buf[r], count, Int64, Min, gpumem.Stream{Device: r}); err != nil {
			t.Fatal(err)
		}
	}
	for r := range n {
		if err := m.g.DeviceSynchronize(r); err != nil {
			t.Fatal(err)
		}
		checkElems(t, fmt.Sprint("rank ", r), Int64, m.get(t, buf[r], count*8), func(i int) float64 { return expect(Int64, Min, n, i) })
	}
}

// ring sends each rank's buffer to the next rank and receives the previous
// rank's, all in one group.
func ring(cs []*Comm, send, recv []gpumem.Ptr, m *machine) error {
	n := len(cs)
	return Group(m.g, func() error {
		for r, c := range cs {
			if err := c.Send(send[r], count, Int32, (r+1)%n, m.streams[r]); err != nil {
				return err
			}
			if err := c.Recv(recv[r], count, Int32, (r+n-1)%n, m.streams[r]); err != nil {
				return err
			}
		}
		return nil
	})
}

// ringChecked runs ring over every rank of m, waits for it, and checks that
// each rank received its predecessor's inputs.
func ringChecked(t *testing.T, m *machine, cs []*Comm) {
	t.Helper()
	n := len(cs)
	send, recv := make([]gpumem.Ptr, n), make([]gpumem.Ptr, n)
	for r := range n {
		send[r], recv[r] = m.alloc(t, r, count*4), m.alloc(t, r, count*4)
		m.put(t, send[r], inputs(Int32, r, count))
	}
	if err := ring(cs, send, recv, m); err != nil {
		t.Fatal(err)
	}
	m.sync(t)
	for r := range n {
		prev := (r + n - 1) % n
		checkElems(t, fmt.Sprint("rank ", r), Int32, m.get(t, recv[r], count*4), func(i int) float64 { return value(Int32, prev, i) })
	}
}

// TestGroupRing: a ring of sends and receives from one goroutine driving
// four ranks, in one group, in free-running and Manual mode.
func TestGroupRing(t *testing.T) {
	for _, manual := range []bool{false, true} {
		t.Run(fmt.Sprintf("manual=%v", manual), func(t *testing.T) {
			const n = 4
			m := newMachine(t, n, manual)
			cs := m.comms(t)
			ringChecked(t, m, cs)
		})
	}
}

// TestGroupPanicEndsTheGroup: a function that panics inside Group still
// ends the group (the panic goes on to the caller): the collectives made
// after it on the same thread run, instead of being queued in a group that
// never ends.
func TestGroupPanicEndsTheGroup(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const n = 4
	m := newMachine(t, n, false)
	cs := m.comms(t)
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("the panic reached the caller as %v, want boom", r)
			}
		}()
		_ = Group(m.g, func() error { panic("boom") })
	}()
	ringChecked(t, m, cs)
}

// TestInitRankGoroutines: one rank per goroutine, joined by an id, each
// with its own group for its send and receive, then an all-reduce.
func TestInitRankGoroutines(t *testing.T) {
	const n = 4
	m := newMachine(t, n, false)
	id, err := NewUniqueID(m.g)
	if err != nil {
		t.Fatal(err)
	}
	send, recv := make([]gpumem.Ptr, n), make([]gpumem.Ptr, n)
	for r := range n {
		send[r], recv[r] = m.alloc(t, r, count*4), m.alloc(t, r, count*4)
		m.put(t, send[r], inputs(Int32, r, count))
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = func() error {
				c, err := InitRank(m.g, r, n, id, r)
				if err != nil {
					return err
				}
				defer c.Close()
				if c.Rank() != r || c.Count() != n || c.Device() != r {
					return fmt.Errorf("comm %v", c)
				}
				s := m.streams[r]
				err = Group(m.g, func() error {
					if err := c.Send(send[r], count, Int32, (r+1)%n, s); err != nil {
						return err
					}
					return c.Recv(recv[r], count, Int32, (r+n-1)%n, s)
				})
				if err != nil {
					return err
				}
				if err := c.AllReduce(recv[r], recv[r], count, Int32, Sum, s); err != nil {
					return err
				}
				return m.g.StreamSynchronize(s)
			}()
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for r := range n {
		checkElems(t, fmt.Sprint("rank ", r), Int32, m.get(t, recv[r], count*4), func(i int) float64 { return expect(Int32, Sum, n, i) })
	}
	// An id makes one communicator: it is not pending any more.
	if _, err := InitRank(m.g, 0, n, UniqueID{}, 0); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("InitRank with a foreign id: %v", err)
	}
}

// TestBadInput: what Go can tell is wrong fails before any work is queued.
func TestBadInput(t *testing.T) {
	const n = 2
	m := newMachine(t, n, false)
	cs := m.comms(t)
	c, s := cs[0], m.streams[0]
	p := m.alloc(t, 0, 1024)
	inval := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("%s: %v, want ErrInvalidValue", what, err)
		}
	}
	inval("negative count", c.AllReduce(p, p, -1, Float32, Sum, s))
	inval("unknown type", c.AllReduce(p, p, 4, DataType(12), Sum, s))
	inval("unknown op", c.AllReduce(p, p, 4, Float32, Op(5), s))
	inval("root", c.Broadcast(p, p, 4, Float32, 2, s))
	inval("negative root", c.Reduce(p, p, 4, Float32, Sum, -1, s))
	inval("peer", c.Send(p, 4, Float32, 5, s))
	inval("stream of another device", c.AllReduce(p, p, 4, Float32, Sum, m.streams[1]))
	inval("null send", c.AllReduce(0, p, 4, Float32, Sum, s))
	inval("null recv", c.AllGather(p, 0, 4, Float32, s))
	inval("null root recv", c.Reduce(p, 0, 4, Float32, Sum, 0, s))
	inval("overflow", c.AllReduce(p, p, 1<<61, Float64, Sum, s))
	inval("gather overflow", c.AllGather(p, p, 1<<59, Float64, s))
	inval("wrap", c.AllReduce(gpumem.Ptr(^uint64(0)-8), p, 4, Float32, Sum, s))
	inval("InitAll twice a device", func() error { _, err := InitAll(m.g, []int{0, 0}); return err }())
	inval("InitAll no device", func() error { _, err := InitAll(m.g, []int{0, 7}); return err }())
	inval("InitAll empty", func() error { _, err := InitAll(m.g, nil); return err }())
	inval("InitRank rank", func() error { _, err := InitRank(m.g, 0, 2, UniqueID{}, 2); return err }())
	inval("InitRank nranks", func() error { _, err := InitRank(m.g, 0, 0, UniqueID{}, 0); return err }())
	inval("Group nil", Group(m.g, nil))
	if _, err := InitAll(nil, []int{0}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("nil backend: %v", err)
	}
	var nilComm *Comm
	inval("nil comm", nilComm.AllReduce(p, p, 1, Float32, Sum, s))
	// Memory the simulator does not know is refused when queued.
	if err := c.AllReduce(gpumem.Ptr(0x1000), p, 4, Float32, Sum, s); err == nil {
		t.Error("unknown memory accepted")
	}
	if err := c.AsyncError(); err == nil {
		t.Error("AsyncError is nil after a rank failed to queue")
	}
}

// TestMismatch: ranks that disagree fail instead of hanging, and the
// communicator reports it.
func TestMismatch(t *testing.T) {
	const n = 2
	m := newMachine(t, n, false)
	cs := m.comms(t)
	p0, p1 := m.alloc(t, 0, 64), m.alloc(t, 1, 64)
	if err := cs[0].AllReduce(p0, p0, 4, Float32, Sum, m.streams[0]); err != nil {
		t.Fatal(err)
	}
	if err := cs[1].AllReduce(p1, p1, 8, Float32, Sum, m.streams[1]); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Fatalf("mismatched count: %v", err)
	}
	m.sync(t) // rank 0's op was released
	for _, c := range cs {
		if err := c.AsyncError(); err == nil {
			t.Errorf("%v: AsyncError nil after a mismatch", c)
		}
	}
	if err := cs[0].AllReduce(p0, p0, 4, Float32, Sum, m.streams[0]); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("call on a failed communicator: %v", err)
	}
}

// TestAbort: a collective whose peer never comes is released by Abort; the
// communicator is closed after it, and the other rank is told.
func TestAbort(t *testing.T) {
	const n = 2
	m := newMachine(t, n, false)
	cs := m.comms(t)
	p0 := m.alloc(t, 0, 64)
	m.put(t, p0, encode(Float32, []float64{1, 2, 3, 4}))
	if err := cs[0].AllReduce(p0, p0, 4, Float32, Sum, m.streams[0]); err != nil {
		t.Fatal(err)
	}
	if done, _ := m.g.StreamQuery(m.streams[0]); done {
		t.Fatal("the all-reduce completed with one rank of two")
	}
	if err := cs[0].Abort(); err != nil {
		t.Fatal(err)
	}
	if err := m.g.StreamSynchronize(m.streams[0]); err != nil {
		t.Fatal(err)
	}
	checkElems(t, "aborted buffer", Float32, m.get(t, p0, 16), func(i int) float64 { return float64(i + 1) })
	if err := cs[0].AllReduce(p0, p0, 4, Float32, Sum, m.streams[0]); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("after Abort: %v", err)
	}
	if err := cs[0].AsyncError(); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("AsyncError after Abort: %v", err)
	}
	if err := cs[1].AsyncError(); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("the other rank's AsyncError: %v", err)
	}
	if err := cs[0].Abort(); err != nil {
		t.Errorf("second Abort: %v", err)
	}
}

// TestClosed: calls after Close fail with ErrClosed.
func TestClosed(t *testing.T) {
	m := newMachine(t, 2, false)
	cs, err := InitAll(m.g, []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	p := m.alloc(t, 0, 64)
	reg, err := cs[0].Register(p, 64)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	}
	if err := reg.Close(); err != nil {
		t.Errorf("Close of a registration after its communicator's: %v", err)
	}
	c := cs[0]
	for what, err := range map[string]error{
		"AllReduce":  c.AllReduce(p, p, 1, Float32, Sum, m.streams[0]),
		"AsyncError": c.AsyncError(),
		"Finalize":   c.Finalize(),
		"Register":   func() error { _, err := c.Register(p, 8); return err }(),
	} {
		if !errors.Is(err, gpumem.ErrClosed) {
			t.Errorf("%s after Close: %v", what, err)
		}
	}
}

// TestConcurrent: every rank's goroutine issues in-place all-reduces while
// others query the communicators; run with -race.
func TestConcurrent(t *testing.T) {
	const n, rounds = 4, 5
	m := newMachine(t, n, false)
	cs := m.comms(t)
	buf := make([]gpumem.Ptr, n)
	for r := range n {
		buf[r] = m.alloc(t, r, count*8)
		m.put(t, buf[r], encode(Float64, make1s(count)))
	}
	var wg sync.WaitGroup
	for r, c := range cs {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range rounds {
				if err := c.AllReduce(buf[r], buf[r], count, Float64, Sum, m.streams[r]); err != nil {
					t.Error(err)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 20 {
				if err := c.AsyncError(); err != nil || c.Count() != n {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	m.sync(t)
	want := 1.0
	for range rounds {
		want *= n
	}
	for r := range n {
		checkElems(t, fmt.Sprint("rank ", r), Float64, m.get(t, buf[r], count*8), func(int) float64 { return want })
	}
}

func make1s(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = 1
	}
	return v
}

// TestAllocators: buffers from the caching and the asyncpool allocators,
// allocated on the ranks' streams.
func TestAllocators(t *testing.T) {
	const n = 2
	m := newMachine(t, n, false)
	cs := m.comms(t)
	ca, err := caching.New(m.g, caching.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	ap, err := asyncpool.New(m.g, asyncpool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ap.Close()
	for _, a := range []gpumem.Allocator{ca, ap} {
		send, recv := make([]gpumem.Ptr, n), make([]gpumem.Ptr, n)
		for r := range n {
			if send[r], err = a.Allocate(count*4, m.streams[r]); err != nil {
				t.Fatal(err)
			}
			if recv[r], err = a.Allocate(n*count*4, m.streams[r]); err != nil {
				t.Fatal(err)
			}
			if err := m.g.MemcpyAsync(send[r], mustHost(t, m, inputs(Uint32, r, count)), count*4, m.streams[r]); err != nil {
				t.Fatal(err)
			}
		}
		for r, c := range cs {
			if err := c.AllGather(send[r], recv[r], count, Uint32, m.streams[r]); err != nil {
				t.Fatal(err)
			}
		}
		m.sync(t)
		for r := range n {
			checkElems(t, fmt.Sprintf("%T rank %d", a, r), Uint32, m.get(t, recv[r], n*count*4), func(i int) float64 { return value(Uint32, i/count, i%count) })
			_ = a.Deallocate(send[r], m.streams[r])
			_ = a.Deallocate(recv[r], m.streams[r])
		}
	}
}

// mustHost copies b into pinned host memory.
func mustHost(t *testing.T, m *machine, b []byte) gpumem.Ptr {
	t.Helper()
	p, err := m.g.MallocHost(uint64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.g.FreeHost(p) })
	m.put(t, p, b)
	return p
}

// TestNilComm: every method of a nil *Comm is an error, not a panic.
func TestNilComm(t *testing.T) {
	var c *Comm
	for name, f := range map[string]func() error{
		"AsyncError": c.AsyncError, "Abort": c.Abort, "Finalize": c.Finalize, "Close": c.Close,
		"Register": func() error { _, err := c.Register(0x1000, 64); return err },
		"AllReduce": func() error {
			return c.AllReduce(0x1000, 0x1000, 1, Float32, Sum, gpumem.Stream{})
		},
	} {
		if err := f(); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("%s of a nil Comm: %v, want ErrInvalidValue", name, err)
		}
	}
}

// TestUnreducibleTypeFailsTheRendezvous: a reduction refused for its data
// type on one rank fails the others' matching call too (through
// AsyncError), instead of leaving their streams waiting for ever.
func TestUnreducibleTypeFailsTheRendezvous(t *testing.T) {
	m := newMachine(t, 2, false)
	cs := m.comms(t)
	b0, b1 := m.alloc(t, 0, 16), m.alloc(t, 1, 16)
	if err := cs[0].AllReduce(b0, b0, 4, Float32, Sum, m.streams[0]); err != nil {
		t.Fatal(err)
	}
	err := cs[1].AllReduce(b1, b1, 4, Float8E4M3, Sum, m.streams[1])
	if !errors.Is(err, gpumem.ErrNotSupported) || !strings.Contains(err.Error(), "collective:") {
		t.Errorf("an all-reduce of Float8E4M3: %v, want ErrNotSupported from the collective package", err)
	}
	done := make(chan error, 1)
	go func() { done <- m.g.StreamSynchronize(m.streams[0]) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cs[0].Abort()
		<-done
		t.Fatal("rank 0's stream still waits for the refused rank's part")
	}
	if err := cs[0].AsyncError(); err == nil {
		t.Error("rank 0's communicator reports no failure")
	}
}
