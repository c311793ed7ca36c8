package replay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

// closeCounter counts the Close calls of the allocator it wraps.
type closeCounter struct {
	gpumem.Allocator
	closes int
}

func (c *closeCounter) Close() error { c.closes++; return c.Allocator.Close() }

// A cancelled context stops the replay with an error wrapping the
// context's, and the allocator is still closed.
func TestRunContextCancelled(t *testing.T) {
	g, err := sim.New(sim.Config{NoStacks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var sb strings.Builder
	for i := 1; i <= 3*checkEvery; i++ {
		fmt.Fprintf(&sb, "a %d 4096 0\nf %d 0\n", i, i)
	}
	tr := mustTrace(t, sb.String())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a := &closeCounter{Allocator: newPassAlloc(g)}
	res, err := RunContext(ctx, g, tr, a, Options{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("RunContext with a cancelled context: %v, want context.Canceled", err)
	}
	if res.Pairs != 0 {
		t.Errorf("%d pairs replayed after the cancellation", res.Pairs)
	}
	if a.closes != 1 {
		t.Errorf("the allocator was closed %d times, want 1", a.closes)
	}
	// Run is RunContext without a deadline: the whole trace.
	res, err = Run(g, tr, newPassAlloc(g), Options{})
	if err != nil || res.Pairs != 3*checkEvery {
		t.Fatalf("Run: %d pairs, %v", res.Pairs, err)
	}
}

// cancelAfter cancels its context at its nth allocation.
type cancelAfter struct {
	gpumem.Allocator
	n      int
	cancel func()
}

func (c *cancelAfter) Allocate(size uint64, s gpumem.Stream) (gpumem.Ptr, error) {
	if c.n--; c.n == 0 {
		c.cancel()
	}
	return c.Allocator.Allocate(size, s)
}

// A replay cancelled midway returns the figures of what it replayed: its
// pairs, peaks, device calls and time.
func TestRunContextCancelledMidwayFigures(t *testing.T) {
	g := newFakeGPU(1 << 30)
	var sb strings.Builder
	for i := 0; i < 3*checkEvery; i++ {
		fmt.Fprintf(&sb, "a %d 4096 0\n", i)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := &cancelAfter{Allocator: newPassAlloc(g), n: checkEvery + checkEvery/2, cancel: cancel}
	res, err := RunContext(ctx, g, mustTrace(t, sb.String()), a, Options{TimelinePoints: -1})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("RunContext cancelled midway: %v", err)
	}
	if res.Pairs != 2*checkEvery || res.PeakRequested != 4096*uint64(res.Pairs) || res.PeakReserved == 0 || res.DeviceAllocs == 0 || res.NsPerPair <= 0 || res.LiveAtEnd != res.Pairs {
		t.Errorf("figures of the %d pairs replayed: %+v", res.Pairs, res)
	}
}

// TimelinePoints bounds the timeline: 1 gives the end alone.
func TestTimelineOnePoint(t *testing.T) {
	g := newFakeGPU(1 << 30)
	res, err := Run(g, mustTrace(t, small), newPassAlloc(g), Options{TimelinePoints: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Timeline) != 1 || res.Timeline[0].Event != len(mustTrace(t, small).Events) {
		t.Errorf("TimelinePoints 1: %+v, want the one point at the end", res.Timeline)
	}
}
