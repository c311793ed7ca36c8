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
