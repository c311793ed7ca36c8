package caching

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumem/gpumem"
)

// gatedVMM holds every MemUnmap until its gate opens, can refuse to map a
// handle that is mapped elsewhere (a backend without aliases), and can
// fail the unmaps of one address.
type gatedVMM struct {
	gpumem.Backend
	mu        sync.Mutex
	gate      chan struct{} // nil: open
	oneMap    bool
	mappedAt  map[gpumem.MemHandle]int
	handleAt  map[gpumem.Ptr]gpumem.MemHandle
	failAt    gpumem.Ptr // MemUnmap of a range holding it fails while set
	failed    int
	aliasMaps int // maps of a handle mapped elsewhere at the time
}

func newGatedVMM(b gpumem.Backend) *gatedVMM {
	return &gatedVMM{Backend: b, mappedAt: map[gpumem.MemHandle]int{}, handleAt: map[gpumem.Ptr]gpumem.MemHandle{}}
}

func (g *gatedVMM) close(ch chan struct{}) {
	g.mu.Lock()
	g.gate = nil
	g.mu.Unlock()
	close(ch)
}

func (g *gatedVMM) MemMap(p gpumem.Ptr, size, off uint64, h gpumem.MemHandle) error {
	g.mu.Lock()
	if g.mappedAt[h] > 0 {
		if g.oneMap {
			g.mu.Unlock()
			return fmt.Errorf("test: handle mapped elsewhere: %w", gpumem.ErrInvalidValue)
		}
		g.aliasMaps++
	}
	g.mu.Unlock()
	if err := g.Backend.MemMap(p, size, off, h); err != nil {
		return err
	}
	g.mu.Lock()
	g.mappedAt[h]++
	g.handleAt[p] = h
	g.mu.Unlock()
	return nil
}

func (g *gatedVMM) MemUnmap(p gpumem.Ptr, size uint64) error {
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate != nil {
		<-gate
	}
	g.mu.Lock()
	if g.failAt != 0 && g.failAt >= p && g.failAt < p.Add(size) {
		g.failed++
		g.mu.Unlock()
		return fmt.Errorf("test: unmap refused: %w", gpumem.ErrInvalidValue)
	}
	g.mu.Unlock()
	if err := g.Backend.MemUnmap(p, size); err != nil {
		return err
	}
	g.mu.Lock()
	for a := range g.handleAt {
		if a >= p && a < p.Add(size) {
			g.mappedAt[g.handleAt[a]]--
			delete(g.handleAt, a)
		}
	}
	g.mu.Unlock()
	return nil
}

// newGatedFixture is newExpandableFixture over a gatedVMM, logging to logs.
func newGatedFixture(t *testing.T, logs *strings.Builder) (*expandableFixture, *gatedVMM) {
	g, ss := newSim(t, 4<<30, false)
	v := newGatedVMM(g)
	var mu sync.Mutex
	a, err := New(v, Options{ExpandableSegments: true, ReleaseBeforeGrow: true, Logf: func(f string, args ...any) {
		mu.Lock()
		fmt.Fprintf(logs, f+"\n", args...)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		checkInvariants(t, a)
		if err := a.Close(); err != nil {
			t.Error(err)
		}
		closeSim(t, g, ss)
	})
	return &expandableFixture{t: t, a: a, c: &vmmCounter{Backend: v}, s: ss[0]}, v
}

// allocWithin allocates on another goroutine and fails the test if the
// allocation has not returned within a minute (it would be waiting for
// an unmap that cannot run).
func (f *expandableFixture) allocWithin(size uint64) gpumem.Ptr {
	f.t.Helper()
	ch := make(chan gpumem.Ptr, 1)
	go func() {
		p, err := f.a.Allocate(size, f.s)
		if err != nil {
			f.t.Error(err)
		}
		ch <- p
	}()
	select {
	case p := <-ch:
		if p != 0 {
			if err := f.a.b.MemsetAsync(p, 0xcd, size, f.s); err != nil {
				f.t.Errorf("writing %d bytes at %#x: %v", size, uintptr(p), err)
			}
		}
		return p
	case <-time.After(time.Minute):
		f.t.Fatal("the allocation waited for an unmap that is held back")
		return 0
	}
}

// A move's unmap runs off the allocating goroutine: the allocation returns
// while the unmap of the old addresses is held back, its chunks mapped at
// their new addresses alongside the old mappings; an allocation that needs
// the old addresses mapped again waits for the unmap (the simulator
// refuses a mapping over one still there); Close waits for everything.
func TestExpandableMoveUnmapsInBackground(t *testing.T) {
	var logs strings.Builder
	f, v := newGatedFixture(t, &logs)
	a := f.alloc(2 * chunk20) // chunks 0-1
	b := f.alloc(chunk20)     // chunk 2; the high-water mark is 3 chunks
	f.free(a)
	gate := make(chan struct{})
	v.mu.Lock()
	v.gate = gate
	v.mu.Unlock()
	d := f.allocWithin(3 * chunk20) // moves chunks 0-1 while their unmap is held back
	if d == 0 {
		t.Fatal("no allocation")
	}
	v.mu.Lock()
	aliases := v.aliasMaps
	v.mu.Unlock()
	if aliases != 2 {
		t.Errorf("%d handles were mapped at their new address before the old one went, want the 2 moved", aliases)
	}
	if r := f.reserved(); r != 4*chunk20 {
		t.Errorf("reserved %d, want 4 chunks: moved chunks count once", r)
	}
	f.free(b)
	f.free(d)
	go func() {
		time.Sleep(50 * time.Millisecond) // most likely after the allocation below waits
		v.close(gate)
	}()
	// Every chunk again, from the first: chunks 0-1 are mapped anew once
	// their old mappings are gone.
	all := f.allocWithin(6 * chunk20)
	if all != a {
		t.Errorf("six chunks at %#x, want the start of the segment %#x", uintptr(all), uintptr(a))
	}
	f.free(all)
	if logs.Len() != 0 {
		t.Errorf("logged: %s", logs.String())
	}
}

// A backend that maps a handle at one address only: the move's map fails
// while the old mapping is there, and is made again once the unmap has run.
func TestExpandableMoveWithoutAliases(t *testing.T) {
	var logs strings.Builder
	f, v := newGatedFixture(t, &logs)
	v.oneMap = true
	a := f.alloc(2 * chunk20)
	b := f.alloc(chunk20)
	f.free(a)
	gate := make(chan struct{})
	v.mu.Lock()
	v.gate = gate
	v.mu.Unlock()
	go func() {
		time.Sleep(50 * time.Millisecond)
		v.close(gate)
	}()
	d := f.allocWithin(3 * chunk20)
	if d == 0 {
		t.Fatal("no allocation")
	}
	if r := f.reserved(); r != 4*chunk20 {
		t.Errorf("reserved %d, want 4 chunks", r)
	}
	f.free(b)
	f.free(d)
}

// An unmap that keeps failing leaves its chunk's address out of use, says
// so, and makes an allocation that needs the address fail with the cause;
// once the unmap works again, so does the allocation, and nothing leaks.
func TestExpandableMoveUnmapFails(t *testing.T) {
	var logs strings.Builder
	f, v := newGatedFixture(t, &logs)
	a := f.alloc(2 * chunk20)
	b := f.alloc(chunk20)
	f.free(a)
	v.mu.Lock()
	v.failAt = a // chunk 0
	v.mu.Unlock()
	d := f.alloc(3 * chunk20) // moves chunks 0-1: chunk 0's unmap fails
	f.free(b)
	f.free(d)
	_, err := f.a.Allocate(6*chunk20, f.s) // needs chunk 0 mapped
	if err == nil || !errors.Is(err, gpumem.ErrInvalidValue) || !strings.Contains(err.Error(), "still mapped") {
		t.Errorf("allocating over the stuck chunk: %v", err)
	}
	if !strings.Contains(logs.String(), "unmapping a moved chunk") {
		t.Errorf("nothing logged: %q", logs.String())
	}
	v.mu.Lock()
	v.failAt = 0
	v.mu.Unlock()
	all := f.alloc(6 * chunk20)
	if all != a {
		t.Errorf("six chunks at %#x, want %#x", uintptr(all), uintptr(a))
	}
	f.free(all)
}
